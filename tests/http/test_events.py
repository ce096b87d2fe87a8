"""Dead letters end to end, against a real ``herald serve`` on each backend: a consumer that
crashes on one event (it drains again from the same cursor, never acknowledging it) leaves that
event dead after ``--max-deliveries`` while the others flow; the dead event is listed by
``GET /v1/events?status=dead`` and ``herald events --status dead``, counted in ``GET /v1/stats``
and ``/metrics``, and ``herald event redeliver`` offers it again with its count begun anew;
``--max-deliveries 0`` hands it out for ever. Pushes count as drains do: an event pushed to MCP
sessions that never acknowledge it, or met first by a stream (SSE, MCP Events) that reconnects
from before it each time, dies after the limit too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.backends import BACKENDS, serving
from tests.herald_process import HeraldProcess
from tests.http.test_endpoints import new_agent
from tests.http.test_mcp import session
from tests.http.test_mcp_events import MODERN, agent_http, meta, stream_messages
from tests.http.test_metrics import scrape
from tests.sse import SSEReader
from tests.waiting import wait_until

LIMIT = 3


@pytest.fixture(scope="module", params=BACKENDS)
def herald(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HeraldProcess]:
    directory = tmp_path_factory.mktemp(request.param)
    with serving(request.param, directory, "--max-deliveries", str(LIMIT)) as process:
        yield process


def publish(admin: httpx.Client, handle: str, count: int) -> list[str]:
    batch = [{"to": handle, "type": "job", "text": f"job {n}"} for n in range(count)]
    response = admin.post("/v1/events", json=batch)
    assert response.status_code == 202, response.text
    return [event["id"] for event in response.json()["events"]]


def drained(agent: httpx.Client, cursor: int) -> list[dict[str, Any]]:
    """One step of a drain, one event at a time, acknowledging up to ``cursor``."""
    response = agent.post("/channel/heartbeat", json={"cursor": cursor, "limit": 1})
    assert response.status_code == 200, response.text
    events: list[dict[str, Any]] = response.json()["events"]
    return events


def operator(herald: HeraldProcess, *args: str) -> list[dict[str, Any]]:
    """``herald ARGS --json`` against the hub, its lines parsed."""
    assert herald.admin_key is not None
    env = {**os.environ, "HERALD_URL": herald.url, "HERALD_ADMIN_KEY": herald.admin_key}
    done = subprocess.run(
        [sys.executable, "-m", "herald.cli", *args, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_an_event_a_consumer_crashes_on_dies_after_the_limit_while_the_rest_flow(
    herald: HeraldProcess,
) -> None:
    with herald.client(herald.admin_key) as admin:
        agent = new_agent(admin)
        first, poison, third, fourth = publish(admin, agent["handle"], 4)
        with herald.client(agent["api_key"]) as consumer:
            (handled,) = drained(consumer, 0)
            assert handled["id"] == first
            # It crashes on the next event each time: it drains again from where it was.
            for _ in range(LIMIT):
                assert [e["id"] for e in drained(consumer, handled["seq"])] == [poison]
            (next_one,) = drained(consumer, handled["seq"])
            assert next_one["id"] == third
            (last,) = drained(consumer, next_one["seq"])
            assert last["id"] == fourth
            assert drained(consumer, last["seq"]) == []

        shown = admin.get(f"/v1/events/{poison}").json()
        assert shown["status"] == "dead"
        *leases, death = shown["attempts"]
        assert [(a["mechanism"], a["outcome"]) for a in leases] == [("heartbeat", "leased")] * 3
        assert (death["mechanism"], death["outcome"]) == ("dead_letter", "dead")
        assert death["error"] == f"handed out {LIMIT} times without an acknowledgement"
        listed = admin.get("/v1/events", params={"status": "dead", "agent": agent["id"]})
        assert [e["id"] for e in listed.json()["events"]] == [poison]
        assert [e["id"] for e in operator(herald, "events", "--status", "dead")] == [poison]
        assert admin.get("/v1/stats").json()["events"]["dead"] == 1
        wait_until(  # the store's gauges are read at most once a second
            lambda: scrape(admin)["herald_events_dead"][()] == 1, "the dead event in /metrics"
        )

        (redelivered,) = operator(herald, "event", "redeliver", poison)
        assert redelivered["status"] == "pending"
        with herald.client(agent["api_key"]) as consumer:
            # Its count begun anew: handed out as many times again, then acknowledged.
            for _ in range(LIMIT):
                assert [e["id"] for e in drained(consumer, last["seq"])] == [poison]
            assert drained(consumer, handled["seq"] + 1) == []
        assert admin.get(f"/v1/events/{poison}").json()["status"] == "delivered"
        assert admin.get("/v1/stats").json()["events"]["dead"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_limit_hands_an_unacknowledged_event_out_for_ever(backend: str, tmp_path: Path) -> None:
    with (
        serving(backend, tmp_path, "--max-deliveries", "0") as herald,
        herald.client(herald.admin_key) as admin,
    ):
        agent = new_agent(admin)
        (only,) = publish(admin, agent["handle"], 1)
        with herald.client(agent["api_key"]) as consumer:
            for _ in range(30):
                assert [e["id"] for e in drained(consumer, 0)] == [only]
        assert admin.get(f"/v1/events/{only}").json()["status"] == "pending"


def pushes_recorded(admin: httpx.Client, event_id: str) -> int:
    attempts = admin.get(f"/v1/events/{event_id}").json()["attempts"]
    return sum(attempt["outcome"] == "sent" for attempt in attempts)


def status(admin: httpx.Client, event_id: str) -> str:
    return str(admin.get(f"/v1/events/{event_id}").json()["status"])


@pytest.mark.anyio
async def test_an_event_pushed_to_sessions_that_never_acknowledge_it_dies_while_the_rest_flow(
    herald: HeraldProcess,
) -> None:
    with herald.client(herald.admin_key) as admin:
        agent = new_agent(admin)
        (poison,) = publish(admin, agent["handle"], 1)
        for times in range(1, LIMIT + 1):
            async with session(herald, agent["api_key"]) as (_, received):
                _, pushed = await received.next()
                assert pushed["meta"]["event_id"] == poison
            # The client ends without acknowledging it; the push's record is written after.
            wait_until(lambda: pushes_recorded(admin, poison) == times, "the push's record")  # noqa: B023

        async with session(herald, agent["api_key"]) as (client, received):
            (flowing,) = publish(admin, agent["handle"], 1)
            _, pushed = await received.next()
            assert pushed["meta"]["event_id"] == flowing  # not the dead one first
            assert (await client.call_tool("ack", {"ids": [flowing]})).structured_content == {
                "acked": 1
            }
        death = admin.get(f"/v1/events/{poison}").json()["attempts"][-1]
        assert (death["mechanism"], death["outcome"]) == ("dead_letter", "dead")
        assert death["error"] == f"handed out {LIMIT} times without an acknowledgement"
        assert status(admin, flowing) == "delivered"

        operator(herald, "event", "redeliver", poison)
        async with session(herald, agent["api_key"]) as (client, received):
            _, pushed = await received.next()
            assert pushed["meta"]["event_id"] == poison
            await client.call_tool("ack", {"ids": [poison]})
        assert status(admin, poison) == "delivered"


def test_an_event_a_stream_consumer_crashes_on_dies_after_the_limit_while_the_rest_flow(
    herald: HeraldProcess,
) -> None:
    with herald.client(herald.admin_key) as admin:
        agent = new_agent(admin)
        first, poison, third = publish(admin, agent["handle"], 3)
        with herald.client(agent["api_key"]) as consumer:
            reader = SSEReader(herald.url, agent["api_key"], after=0)
            try:
                handled = reader.next()
                assert handled is not None and handled.data["id"] == first
                assert consumer.post("/channel/ack", json={"ids": [first]}).status_code == 200
                resume_at = reader.last_id
            finally:
                reader.close()
            # It crashes on the next event each time, and resumes from the last it handled.
            for _ in range(LIMIT):
                reader = SSEReader(herald.url, agent["api_key"], last_event_id=resume_at)
                try:
                    met = reader.next()
                    assert met is not None and met.data["id"] == poison
                finally:
                    reader.close()
            reader = SSEReader(herald.url, agent["api_key"], last_event_id=resume_at)
            try:
                met = reader.next()
                assert met is not None and met.data["id"] == third  # the rest flow
                assert consumer.post("/channel/ack", json={"ids": [third]}).status_code == 200
            finally:
                reader.close()
        assert status(admin, poison) == "dead"
        assert status(admin, third) == "delivered"
        (redelivered,) = operator(herald, "event", "redeliver", poison)
        assert redelivered["status"] == "pending"
        reader = SSEReader(herald.url, agent["api_key"], last_event_id=resume_at)
        try:
            met = reader.next()
            assert met is not None and met.data["id"] == poison
        finally:
            reader.close()


async def events_stream_from(herald: HeraldProcess, key: str, cursor: str | None) -> dict[str, Any]:
    """The first event an ``events/stream`` of ``herald.event`` resumed at ``cursor`` pushes;
    the client then goes away (it crashes on it)."""
    body = {
        "jsonrpc": "2.0",
        "id": "stream-1",
        "method": "events/stream",
        "params": {"_meta": meta(), "name": "herald.event", "cursor": cursor},
    }
    headers = {"mcp-protocol-version": MODERN, "mcp-method": "events/stream"}
    async with (
        agent_http(herald, key) as http,
        stream_messages(http, body, headers) as messages,
    ):
        assert (await anext(messages))["method"] == "notifications/events/active"
        pushed = await anext(messages)
    assert pushed["method"] == "notifications/events/event"
    return dict(pushed["params"])


@pytest.mark.anyio
async def test_an_event_an_events_stream_client_crashes_on_dies_after_the_limit_while_the_rest_flow(
    herald: HeraldProcess,
) -> None:
    with herald.client(herald.admin_key) as admin:
        agent = new_agent(admin)
        first, poison, third = publish(admin, agent["handle"], 3)
        handled = await events_stream_from(herald, agent["api_key"], None)
        assert handled["eventId"] == first
        # It crashes on the next event each time, and resumes from the last it handled.
        for _ in range(LIMIT):
            met = await events_stream_from(herald, agent["api_key"], handled["cursor"])
            assert met["eventId"] == poison
        met = await events_stream_from(herald, agent["api_key"], handled["cursor"])
        assert met["eventId"] == third  # the rest flow
        assert status(admin, poison) == "dead"

        operator(herald, "event", "redeliver", poison)
        met = await events_stream_from(herald, agent["api_key"], handled["cursor"])
        assert met["eventId"] == poison
