"""Loop guards through ``herald serve`` (its ``serve()``, in process, its clock moved by the test)
on both backends: two agents answering each other over MCP and over the channel routes are
stopped at the exchange limit with a 429 ``loop_guard`` that names the thread, nothing stored is
lost and the refused message stores nothing, and the thread goes on once the window has passed;
the per-minute limit; an agent's raised limits; the refusals on the feed and counted in
``/metrics``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import mcp_types as types
import pytest

from herald.config import HttpConfig, HubConfig, ServeConfig
from herald.serve import serve
from herald.testing import ManualClock
from mcp import Client, StdioServerParameters
from tests.http.test_mcp_events import MODERN, answer, meta
from tests.mcp.conftest import HeraldNotifications, Received
from tests.sse import Frame, SSEReader

pytestmark = pytest.mark.anyio

ADMIN_KEY = "herald-test-admin-key-0123456789abcdef"
WAIT_S = 30.0


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
        text = (await self.admin.get("/metrics")).text
        wanted = f'herald_loop_guards_tripped_total{{limit="{limit}"}} '
        lines = [line for line in text.splitlines() if line.startswith(wanted)]
        return float(lines[0].removeprefix(wanted)) if lines else 0.0


@contextlib.asynccontextmanager
async def serving(store_url: str, **limits: int) -> AsyncIterator[Served]:
    """``serve()`` on ``store_url`` with the loop guard limits given (``HubConfig``'s names)."""
    clock = ManualClock(start=time.time())
    config = ServeConfig(
        store_url=store_url, log_level="warning", http=HttpConfig(port=0), hub=HubConfig(**limits)
    )
    lines: list[str] = []
    listening = asyncio.Event()

    def announce(line: str) -> None:
        lines.append(line)
        if "listening on" in line:
            listening.set()

    stop = asyncio.Event()
    running = asyncio.create_task(
        serve(config, admin_key=ADMIN_KEY, announce=announce, stop=stop, clock=clock)
    )
    try:
        async with asyncio.timeout(WAIT_S):
            await listening.wait()
        (url,) = [m.group(1) for line in lines if (m := re.search(r"on (http://\S+)", line))]
        headers = {"authorization": f"Bearer {ADMIN_KEY}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=WAIT_S) as admin:
            yield Served(url, clock, admin)
    finally:
        stop.set()
        async with asyncio.timeout(WAIT_S):
            await running


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
    own_store_url: str,
) -> None:
    async with serving(own_store_url, loop_exchanges=4, loop_window_s=600) as served:
        alice, bob = await served.agent("alice"), await served.agent("bob")
        async with alice, bob:
            sent = await tool(alice, "send_message", {"to": "bob", "text": "ping"})
            assert not sent.get("isError"), sent
            latest = sent["structuredContent"]["id"]
            first = await served.event(latest)
            thread = first["thread"]
            assert thread and first["from"] == "alice"
            stored = [latest]
            speakers = [bob, alice]
            for turn in range(3):  # each answers the other's last message: 4 exchanges
                replied = await tool(
                    speakers[turn % 2], "reply", {"event_id": latest, "text": "ok"}
                )
                assert not replied.get("isError"), replied
                latest = replied["structuredContent"]["routed_event_id"]
                stored.append(latest)

            refused = await tool(alice, "reply", {"event_id": latest, "text": "ok"})
            assert refused["isError"] is True
            error = refused["structuredContent"]["error"]
            assert error["code"] == "loop_guard" and error["thread"] == thread
            assert error["limit"] == "exchanges" and error["maximum"] == 4
            assert error["window_s"] == 600 and 1 <= error["retry_after_s"] <= 600
            assert thread in refused["content"][0]["text"]

            for event_id in stored:  # nothing lost, every one in the thread
                assert (await served.event(event_id))["thread"] == thread
            answered = await served.event(latest)
            assert answered["replies"] == [] and answered["status"] == "pending"
            assert await served.trips("exchanges") == 1

            served.clock.advance(600)
            resumed = await tool(alice, "reply", {"event_id": latest, "text": "ok"})
            assert not resumed.get("isError"), resumed
            routed = resumed["structuredContent"]["routed_event_id"]
            assert (await served.event(routed))["thread"] == thread


async def test_two_agents_replying_over_http_are_refused_with_429_and_retry_after(
    own_store_url: str,
) -> None:
    async with serving(own_store_url, loop_exchanges=3, loop_window_s=300) as served:
        alice, bob = await served.agent("alice"), await served.agent("bob")
        async with alice, bob:
            sent = await alice.post("/channel/send", json={"to": "bob", "text": "ping"})
            assert sent.status_code == 202, sent.text
            latest, thread = sent.json()["id"], sent.json()["thread"]
            assert thread.startswith("thr_")
            for speaker in (bob, alice):
                replied = await speaker.post(
                    "/channel/reply", json={"event_id": latest, "text": "ok"}
                )
                assert replied.status_code == 201, replied.text
                latest = replied.json()["routed_event_id"]

            refused = await bob.post("/channel/reply", json={"event_id": latest, "text": "ok"})
            assert refused.status_code == 429, refused.text
            error = refused.json()["error"]
            assert error["code"] == "loop_guard" and error["thread"] == thread
            assert error["limit"] == "exchanges" and error["maximum"] == 3
            assert refused.headers["retry-after"] == str(error["retry_after_s"])
            # The other direction is the same pair: a new message from alice is refused too.
            again = await alice.post("/channel/send", json={"to": "bob", "text": "again"})
            assert again.status_code == 429 and again.json()["error"]["limit"] == "exchanges"

            served.clock.advance(error["retry_after_s"])
            resumed = await bob.post("/channel/reply", json={"event_id": latest, "text": "ok"})
            assert resumed.status_code == 201, resumed.text
            assert (await served.event(resumed.json()["routed_event_id"]))["thread"] == thread


async def test_the_per_minute_limit_and_an_agents_raised_limits(own_store_url: str) -> None:
    async with serving(own_store_url, loop_per_minute=3) as served:
        chatty = await served.agent("chatty")
        others = [await served.agent(f"peer{n}") for n in range(6)]
        feed = await asyncio.to_thread(  # the server runs on this loop: open it from a thread
            SSEReader, served.url, ADMIN_KEY, path="/v1/stream", params={"agent": "chatty"}
        )
        async with chatty:
            for n in range(3):
                sent = await chatty.post("/channel/send", json={"to": f"peer{n}", "text": "hi"})
                assert sent.status_code == 202, sent.text
            refused = await chatty.post("/channel/send", json={"to": "peer3", "text": "hi"})
            assert refused.status_code == 429, refused.text
            error = refused.json()["error"]
            assert error["code"] == "loop_guard" and error["limit"] == "per_minute"
            assert error["maximum"] == 3 and error["window_s"] == 60
            assert await served.trips("per_minute") == 1
            tripped = await asyncio.to_thread(next_kind, feed, "loop_guard")
            assert tripped.data["agent"]["handle"] == "chatty"
            assert tripped.data["to"] == "peer3" and tripped.data["limit"] == "per_minute"
            assert tripped.data["maximum"] == 3 and tripped.data["thread"] == error["thread"]
            await asyncio.to_thread(feed.close)

            raised = await served.admin.patch(
                "/v1/agents/chatty", json={"loop_guard": {"per_minute": 5}}
            )
            assert raised.status_code == 200, raised.text
            assert raised.json()["loop_guard"] == {
                "exchanges": 12,
                "window_s": 600,
                "per_minute": 5,
            }
            for n in (3, 4):
                sent = await chatty.post("/channel/send", json={"to": f"peer{n}", "text": "hi"})
                assert sent.status_code == 202, sent.text
            over = await chatty.post("/channel/send", json={"to": "peer5", "text": "hi"})
            assert over.status_code == 429 and over.json()["error"]["maximum"] == 5

            served.clock.advance(60)
            later = await chatty.post("/channel/send", json={"to": "peer5", "text": "hi"})
            assert later.status_code == 202, later.text
        for other in others:
            await other.aclose()


async def test_scheduled_messages_are_counted_when_sent_and_a_refused_one_is_not_stored(
    own_store_url: str,
) -> None:
    async with serving(own_store_url, loop_per_minute=2) as served:
        later = await served.agent("later")
        peer = await served.agent("peer")
        async with later, peer:
            for _ in range(2):
                body = {"to": "peer", "text": "tomorrow", "delay_s": 3600}
                sent = await later.post("/channel/send", json=body)
                assert sent.status_code == 202, sent.text
            refused = await later.post(
                "/channel/send", json={"to": "peer", "text": "one more", "delay_s": 60}
            )
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["limit"] == "per_minute"
            listed = await served.admin.get(
                "/v1/events", params={"agent": "peer", "status": "scheduled"}
            )
            assert [e["text"] for e in listed.json()["events"]] == ["tomorrow", "tomorrow"]


async def test_a_loop_guard_limit_must_be_a_whole_number_of_one_or_more(
    own_store_url: str,
) -> None:
    async with serving(own_store_url) as served:
        await (await served.agent("alice")).aclose()  # it only has to exist
        for bad in ({"per_minute": 0}, {"exchanges": "5"}, {"window": 5}):
            refused = await served.admin.patch("/v1/agents/alice", json={"loop_guard": bad})
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
    own_store_url: str,
) -> None:
    async with (
        serving(own_store_url, loop_exchanges=3, loop_window_s=120) as served,
        bridged(served, "alice") as (alice, alice_pushes),
        bridged(served, "bob") as (bob, bob_pushes),
    ):
        sent = await alice.call_tool("send_message", {"to": "bob", "text": "ping"})
        assert not sent.is_error, sent
        # The message, then one answer each: 3 exchanges.
        for speaker, pushes in ((bob, bob_pushes), (alice, alice_pushes)):
            event_id = await pushed_event_id(pushes)  # each answers what was pushed to it
            thread = (await served.event(event_id))["thread"]
            replied = await speaker.call_tool("reply", {"event_id": event_id, "text": "pong"})
            assert not replied.is_error, replied
            last_reply_to = event_id

        refused_to = await pushed_event_id(bob_pushes)  # the third exchange reached bob
        refused = await bob.call_tool("reply", {"event_id": refused_to, "text": "pong"})
        assert refused.is_error
        assert refused.structured_content is not None
        error = refused.structured_content["error"]
        assert error["code"] == "loop_guard" and error["thread"] == thread
        assert error["limit"] == "exchanges" and error["retry_after_s"] >= 1
        assert thread in refused.content[0].text  # type: ignore[union-attr]
        assert (await served.event(last_reply_to))["status"] == "delivered"  # answered
        assert (await served.event(refused_to))["status"] != "delivered"  # kept, unanswered

        served.clock.advance(120)
        resumed = await bob.call_tool("reply", {"event_id": refused_to, "text": "pong"})
        assert not resumed.is_error, resumed
        assert (await served.event(await pushed_event_id(alice_pushes)))["thread"] == thread
