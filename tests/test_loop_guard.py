"""Loop guards through ``herald serve`` (its ``serve()``, in process, its clock moved by the test)
on both backends: two agents answering each other over MCP and over the channel routes are
stopped at the exchange limit with a 429 ``loop_guard`` that names the thread, nothing stored is
lost and the refused message stores nothing, and the thread goes on once the window has passed;
the per-minute limit; an agent's raised limits; the refusals on the feed and counted in
``/metrics``. One server per backend for the module, its limits set by its configuration; each
test has agents of its own, and the limits count per agent and per pair of agents."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest

from herald.config import HttpConfig, HubConfig, ServeConfig
from herald.testing import ManualClock
from mcp import Client, StdioServerParameters
from tests.backends import BACKENDS, fresh_store_url
from tests.http.test_mcp_events import MODERN, answer, meta
from tests.in_process import serving_in_thread
from tests.mcp.conftest import HeraldNotifications, Received
from tests.sse import Frame, SSEReader

pytestmark = pytest.mark.anyio

ADMIN_KEY = "herald-test-admin-key-0123456789abcdef"
WAIT_S = 30.0
EXCHANGES, WINDOW_S, PER_MINUTE = 4, 300, 3
"""The module's server's limits (``HubConfig``'s ``loop_*``): fewer sends a minute than
exchanges, so that sends to one agent meet the per-minute limit first."""


@dataclass
class Served:
    url: str
    clock: ManualClock
    admin: httpx.AsyncClient

    async def agent(self, handle: str) -> httpx.AsyncClient:
        made = await self.admin.post("/v1/agents", json={"handle": handle})
        assert made.status_code == 201, made.text
        headers = {
            "authorization": f"Bearer {made.json()['api_key']}",
            "accept": "application/json, text/event-stream",
        }
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=WAIT_S)

    async def event(self, event_id: str) -> dict[str, Any]:
        shown = await self.admin.get(f"/v1/events/{event_id}")
        assert shown.status_code == 200, shown.text
        return dict(shown.json())

    async def trips(self, limit: str) -> float:
        """The server's count of refusals by ``limit`` (every test's: compare before and after)."""
        text = (await self.admin.get("/metrics")).text
        wanted = f'herald_loop_guards_tripped_total{{limit="{limit}"}} '
        lines = [line for line in text.splitlines() if line.startswith(wanted)]
        return float(lines[0].removeprefix(wanted)) if lines else 0.0


@dataclass(frozen=True)
class Server:
    url: str
    clock: ManualClock


@pytest.fixture(scope="module", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """``serve()`` on a fresh store of each backend in turn, with the module's limits."""
    clock = ManualClock(start=time.time())
    directory: Path = tmp_path_factory.mktemp(request.param)
    with fresh_store_url(request.param, directory) as store_url:
        hub = HubConfig(
            loop_exchanges=EXCHANGES, loop_window_s=WINDOW_S, loop_per_minute=PER_MINUTE
        )
        config = ServeConfig(
            store_url=store_url, log_level="warning", http=HttpConfig(port=0), hub=hub
        )
        with serving_in_thread(config, clock) as url:
            yield Server(url, clock)


@pytest.fixture
async def served(server: Server) -> AsyncIterator[Served]:
    headers = {"authorization": f"Bearer {ADMIN_KEY}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=WAIT_S) as admin:
        yield Served(server.url, server.clock, admin)


def named(role: str) -> str:
    """A handle of this test's own."""
    return f"{role}-{uuid.uuid4().hex[:8]}"


async def tool(http: httpx.AsyncClient, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One MCP ``tools/call`` (2026-07-28, sessionless); the tool's result."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"_meta": meta(), "name": name, "arguments": arguments},
    }
    headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": name}
    answered = answer(await http.post("/mcp", json=body, headers=headers))
    assert "result" in answered, answered
    return dict(answered["result"])


async def test_two_agents_replying_over_mcp_stop_at_the_exchange_limit_and_resume_after_it(
    served: Served,
) -> None:
    alice_handle, bob_handle = named("alice"), named("bob")
    alice, bob = await served.agent(alice_handle), await served.agent(bob_handle)
    trips_before = await served.trips("exchanges")
    async with alice, bob:
        sent = await tool(alice, "send_message", {"to": bob_handle, "text": "ping"})
        assert not sent.get("isError"), sent
        latest = sent["structuredContent"]["id"]
        first = await served.event(latest)
        thread = first["thread"]
        assert thread and first["from"] == alice_handle
        stored = [latest]
        speakers = [bob, alice]
        for turn in range(EXCHANGES - 1):  # each answers the other's last message
            replied = await tool(speakers[turn % 2], "reply", {"event_id": latest, "text": "ok"})
            assert not replied.get("isError"), replied
            latest = replied["structuredContent"]["routed_event_id"]
            stored.append(latest)

        refused = await tool(
            speakers[(EXCHANGES - 1) % 2], "reply", {"event_id": latest, "text": "ok"}
        )
        assert refused["isError"] is True
        error = refused["structuredContent"]["error"]
        assert error["code"] == "loop_guard" and error["thread"] == thread
        assert error["limit"] == "exchanges" and error["maximum"] == EXCHANGES
        assert error["window_s"] == WINDOW_S and 1 <= error["retry_after_s"] <= WINDOW_S
        assert thread in refused["content"][0]["text"]

        for event_id in stored:  # nothing lost, every one in the thread
            assert (await served.event(event_id))["thread"] == thread
        answered = await served.event(latest)
        assert answered["replies"] == [] and answered["status"] == "pending"
        assert await served.trips("exchanges") == trips_before + 1

        served.clock.advance(WINDOW_S)
        resumed = await tool(
            speakers[(EXCHANGES - 1) % 2], "reply", {"event_id": latest, "text": "ok"}
        )
        assert not resumed.get("isError"), resumed
        routed = resumed["structuredContent"]["routed_event_id"]
        assert (await served.event(routed))["thread"] == thread


async def test_two_agents_replying_over_http_are_refused_with_429_and_retry_after(
    served: Served,
) -> None:
    alice_handle, bob_handle = named("alice"), named("bob")
    alice, bob = await served.agent(alice_handle), await served.agent(bob_handle)
    async with alice, bob:
        sent = await alice.post("/channel/send", json={"to": bob_handle, "text": "ping"})
        assert sent.status_code == 202, sent.text
        latest, thread = sent.json()["id"], sent.json()["thread"]
        assert thread.startswith("thr_")
        speakers = [(bob, alice_handle), (alice, bob_handle)]  # each, and whom it answers
        for turn in range(EXCHANGES - 1):
            speaker, _ = speakers[turn % 2]
            replied = await speaker.post("/channel/reply", json={"event_id": latest, "text": "ok"})
            assert replied.status_code == 201, replied.text
            latest = replied.json()["routed_event_id"]

        refusing, _ = speakers[(EXCHANGES - 1) % 2]
        refused = await refusing.post("/channel/reply", json={"event_id": latest, "text": "ok"})
        assert refused.status_code == 429, refused.text
        error = refused.json()["error"]
        assert error["code"] == "loop_guard" and error["thread"] == thread
        assert error["limit"] == "exchanges" and error["maximum"] == EXCHANGES
        assert refused.headers["retry-after"] == str(error["retry_after_s"])
        # The other direction is the same pair: a new message from the other is refused too.
        other, to = speakers[EXCHANGES % 2]
        again = await other.post("/channel/send", json={"to": to, "text": "again"})
        assert again.status_code == 429 and again.json()["error"]["limit"] == "exchanges"

        served.clock.advance(error["retry_after_s"])
        resumed = await refusing.post("/channel/reply", json={"event_id": latest, "text": "ok"})
        assert resumed.status_code == 201, resumed.text
        assert (await served.event(resumed.json()["routed_event_id"]))["thread"] == thread


async def test_the_per_minute_limit_and_an_agents_raised_limits(served: Served) -> None:
    chatty_handle = named("chatty")
    chatty = await served.agent(chatty_handle)
    peers = [named(f"peer{n}") for n in range(PER_MINUTE + 3)]
    others = [await served.agent(peer) for peer in peers]
    trips_before = await served.trips("per_minute")
    feed = await asyncio.to_thread(
        SSEReader, served.url, ADMIN_KEY, path="/v1/stream", params={"agent": chatty_handle}
    )
    async with chatty:
        for peer in peers[:PER_MINUTE]:
            sent = await chatty.post("/channel/send", json={"to": peer, "text": "hi"})
            assert sent.status_code == 202, sent.text
        refused = await chatty.post("/channel/send", json={"to": peers[PER_MINUTE], "text": "hi"})
        assert refused.status_code == 429, refused.text
        error = refused.json()["error"]
        assert error["code"] == "loop_guard" and error["limit"] == "per_minute"
        assert error["maximum"] == PER_MINUTE and error["window_s"] == 60
        assert await served.trips("per_minute") == trips_before + 1
        tripped = await asyncio.to_thread(next_kind, feed, "loop_guard")
        assert tripped.data["agent"]["handle"] == chatty_handle
        assert tripped.data["to"] == peers[PER_MINUTE]
        assert tripped.data["limit"] == "per_minute"
        assert tripped.data["maximum"] == PER_MINUTE and tripped.data["thread"] == error["thread"]
        await asyncio.to_thread(feed.close)

        raised = await served.admin.patch(
            f"/v1/agents/{chatty_handle}", json={"loop_guard": {"per_minute": PER_MINUTE + 2}}
        )
        assert raised.status_code == 200, raised.text
        assert raised.json()["loop_guard"] == {
            "exchanges": EXCHANGES,
            "window_s": WINDOW_S,
            "per_minute": PER_MINUTE + 2,
        }
        for peer in peers[PER_MINUTE : PER_MINUTE + 2]:
            sent = await chatty.post("/channel/send", json={"to": peer, "text": "hi"})
            assert sent.status_code == 202, sent.text
        over = await chatty.post("/channel/send", json={"to": peers[-1], "text": "hi"})
        assert over.status_code == 429 and over.json()["error"]["maximum"] == PER_MINUTE + 2

        served.clock.advance(60)
        later = await chatty.post("/channel/send", json={"to": peers[-1], "text": "hi"})
        assert later.status_code == 202, later.text
    for other in others:
        await other.aclose()


async def test_scheduled_messages_are_counted_when_sent_and_a_refused_one_is_not_stored(
    served: Served,
) -> None:
    peer_handle = named("peer")
    later, peer = await served.agent(named("later")), await served.agent(peer_handle)
    async with later, peer:
        for _ in range(PER_MINUTE):
            body = {"to": peer_handle, "text": "tomorrow", "delay_s": 3600}
            sent = await later.post("/channel/send", json=body)
            assert sent.status_code == 202, sent.text
        refused = await later.post(
            "/channel/send", json={"to": peer_handle, "text": "one more", "delay_s": 60}
        )
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["limit"] == "per_minute"
        listed = await served.admin.get(
            "/v1/events", params={"agent": peer_handle, "status": "scheduled"}
        )
        assert [e["text"] for e in listed.json()["events"]] == ["tomorrow"] * PER_MINUTE


async def test_a_loop_guard_limit_must_be_a_whole_number_of_one_or_more(served: Served) -> None:
    alice = named("alice")
    await (await served.agent(alice)).aclose()  # it only has to exist
    for bad in ({"per_minute": 0}, {"exchanges": "5"}, {"window": 5}):
        refused = await served.admin.patch(f"/v1/agents/{alice}", json={"loop_guard": bad})
        assert refused.status_code == 422, refused.text
        assert "loop_guard" in refused.json()["error"]["message"]


def next_kind(feed: SSEReader, kind: str) -> Frame:
    """The feed's next item of ``kind`` (each wait bounded)."""
    while True:
        frame = feed.next(timeout_s=WAIT_S)
        assert frame is not None, f"no {kind} item on the feed"
        if frame.event == kind:
            return frame


@contextlib.asynccontextmanager
async def bridged(served: Served, handle: str) -> AsyncIterator[tuple[Client, Received]]:
    """``herald bridge`` for a new agent ``handle``, a real subprocess driven over stdio as
    Claude Code drives it."""
    made = await served.admin.post("/v1/agents", json={"handle": handle})
    assert made.status_code == 201, made.text
    received = Received()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "herald.cli", "bridge", "--url", served.url],
        env={**os.environ, "HERALD_API_KEY": made.json()["api_key"]},
    )
    async with Client(
        params,
        mode="auto",
        client_info=types.Implementation(name="claude-code", version="2.1.328"),
        extensions=[HeraldNotifications(received)],
    ) as client:
        yield client, received


async def pushed_event_id(received: Received) -> str:
    """The event of the next ``<channel>`` push the bridge makes."""
    while True:
        method, params = await received.next(timeout_s=WAIT_S)
        if method == "notifications/claude/channel":
            return str(params["meta"]["event_id"])


async def test_two_agents_auto_replying_through_the_bridge_stop_at_the_limit_and_resume(
    served: Served,
) -> None:
    bob_handle = named("bob")
    async with (
        bridged(served, named("alice")) as (alice, alice_pushes),
        bridged(served, bob_handle) as (bob, bob_pushes),
    ):
        sent = await alice.call_tool("send_message", {"to": bob_handle, "text": "ping"})
        assert not sent.is_error, sent
        # The message, then answers in turn up to the module's limit of exchanges.
        turns = [(bob, bob_pushes), (alice, alice_pushes)]
        for turn in range(EXCHANGES - 1):
            speaker, pushes = turns[turn % 2]
            event_id = await pushed_event_id(pushes)  # each answers what was pushed to it
            thread = (await served.event(event_id))["thread"]
            replied = await speaker.call_tool("reply", {"event_id": event_id, "text": "pong"})
            assert not replied.is_error, replied
            last_reply_to = event_id

        refusing, refusing_pushes = turns[(EXCHANGES - 1) % 2]
        refused_to = await pushed_event_id(refusing_pushes)  # the last exchange reached it
        refused = await refusing.call_tool("reply", {"event_id": refused_to, "text": "pong"})
        assert refused.is_error
        assert refused.structured_content is not None
        error = refused.structured_content["error"]
        assert error["code"] == "loop_guard" and error["thread"] == thread
        assert error["limit"] == "exchanges" and error["retry_after_s"] >= 1
        assert thread in refused.content[0].text  # type: ignore[union-attr]
        assert (await served.event(last_reply_to))["status"] == "delivered"  # answered
        assert (await served.event(refused_to))["status"] != "delivered"  # kept, unanswered

        served.clock.advance(WINDOW_S)
        resumed = await refusing.call_tool("reply", {"event_id": refused_to, "text": "pong"})
        assert not resumed.is_error, resumed
        other_pushes = turns[EXCHANGES % 2][1]
        assert (await served.event(await pushed_event_id(other_pushes)))["thread"] == thread
