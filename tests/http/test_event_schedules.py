"""Schedules end to end: ``POST /v1/events`` with ``deliver_at`` or ``delay_s`` against
``herald serve`` on both backends. In process (``serve()``, its clock moved by the test) where
time matters: a scheduled event is offered by no way until it is due, then like any other, its
time to live counted from then; cancelled and recalled by ``DELETE /v1/events/{id}`` only as the
rules allow; bad times refused, storing nothing (one server per backend for the module, each
test with agents of its own). As real processes: a schedule survives a restart, and two
processes on one PostgreSQL make each event due once and deliver it once."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from herald.client import HeraldClient
from herald.testing import ManualClock
from herald.times import iso_ms
from tests.backends import BACKENDS, fresh_store_url
from tests.herald_process import HeraldProcess
from tests.http.test_mcp_webhook_status import Served, admin_of, config_of, real_time_clock
from tests.in_process import serving_in_thread
from tests.sse import SSEReader
from tests.waiting import until, wait_until

pytestmark = pytest.mark.anyio

TEXT = {"type": "t", "text": "x"}
HOUR_S = 3600


@pytest.fixture(scope="module", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, ManualClock]]:
    """``serve()`` on a fresh store of each backend in turn, for the module's tests: its URL
    and its clock."""
    clock = real_time_clock()
    with (
        fresh_store_url(request.param, tmp_path_factory.mktemp(request.param)) as store_url,
        serving_in_thread(config_of(store_url), clock) as url,
    ):
        yield url, clock


@pytest.fixture
async def served(server: tuple[str, ManualClock]) -> AsyncIterator[Served]:
    url, clock = server
    async with admin_of(url) as admin:
        yield Served(url, clock, admin)


async def status(served: Served, event_id: str) -> dict[str, Any]:
    answer = await served.admin.get(f"/v1/events/{event_id}")
    assert answer.status_code == 200, answer.text
    shown: dict[str, Any] = answer.json()
    return shown


async def drain(agent: httpx.AsyncClient) -> list[dict[str, Any]]:
    """What one drain (with a cursor: leased, at least once) hands the agent now."""
    answer = await agent.post("/channel/heartbeat", json={"cursor": 0})
    assert answer.status_code == 200, answer.text
    events: list[dict[str, Any]] = answer.json()["events"]
    return events


def now_ms(served: Served) -> int:
    return int(served.clock() * 1000)


async def test_a_scheduled_event_is_offered_by_no_way_until_due_then_like_any_other(
    served: Served,
) -> None:
    agent, client = await served.agent()
    reader = await asyncio.to_thread(SSEReader, served.url, agent["api_key"])
    try:
        due = now_ms(served) + HOUR_S * 1000
        answer = await served.admin.post(
            "/v1/events", json={"to": agent["handle"], **TEXT, "delay_s": HOUR_S}
        )
        assert answer.status_code == 202, answer.text
        receipt = answer.json()
        assert receipt["deliver_at"] == iso_ms(due)
        shown = await status(served, receipt["id"])
        assert (shown["status"], shown["deliver_at"]) == ("scheduled", iso_ms(due))
        mine = {"status": "scheduled", "agent": agent["handle"]}
        listed = await served.admin.get("/v1/events", params=mine)
        assert [e["id"] for e in listed.json()["events"]] == [receipt["id"]]
        await until(lambda: gauge_counts_every_scheduled(served), "/metrics counting it")
        assert await drain(client) == []
        assert (await client.get(f"/v1/events/{receipt['id']}")).status_code == 404
        # An event published now goes first, with the agent's first seq: the stream never
        # showed the scheduled one, which takes the next seq when it is due.
        (now_id,) = await served.publish(agent["handle"])
        frame = await asyncio.to_thread(reader.next)
        assert frame is not None and (frame.data["id"], frame.data["seq"]) == (now_id, 1)
        await client.post("/channel/ack", json={"ids": [now_id]})

        served.clock.advance(HOUR_S)
        frame = await asyncio.to_thread(reader.next)
        assert frame is not None, "the stream ended"
        assert (frame.data["id"], frame.data["seq"]) == (receipt["id"], 2)
        shown = await status(served, receipt["id"])
        assert shown["status"] in ("pending", "sent")
        assert shown["created_at"] == iso_ms(due)  # published, as its agent sees it, when due
        assert [e["id"] for e in await drain(client)] == [receipt["id"]]
        assert (await client.get(f"/v1/events/{receipt['id']}")).status_code == 200
    finally:
        reader.close()
        await client.aclose()


async def gauge_counts_every_scheduled(served: Served) -> bool:
    """Whether ``/metrics`` counts as many scheduled events as the server holds, one at least
    (its store gauges are read at most once a second)."""
    listed = await served.admin.get("/v1/events", params={"status": "scheduled", "limit": 500})
    scheduled = len(listed.json()["events"])
    text = (await served.admin.get("/metrics")).text
    return scheduled >= 1 and f"herald_events_scheduled {float(scheduled)}" in text.splitlines()


async def test_a_scheduled_events_time_to_live_counts_from_when_it_is_due(served: Served) -> None:
    agent, client = await served.agent()
    (event_id,) = await served.publish(agent["handle"], delay_s=60, ttl_s=30)
    served.clock.advance(61)  # past publish + ttl, not past due + ttl
    await until(lambda: drain(client), "the due event offered")
    served.clock.advance(30)
    await until(lambda: _is(served, event_id, "expired"), "the event expired 30 s after it was due")
    await client.aclose()


async def _is(served: Served, event_id: str, wanted: str) -> bool:
    return (await status(served, event_id))["status"] == wanted


async def test_a_list_publish_schedules_one_event_for_each_agent(served: Served) -> None:
    (first, first_client), (second, second_client) = [await served.agent() for _ in "ab"]
    at = iso_ms(now_ms(served) + 60_000)
    answer = await served.admin.post(
        "/v1/events",
        json={"to": [first["handle"], second["handle"]], **TEXT, "deliver_at": at},
    )
    assert answer.status_code == 202, answer.text
    receipts = answer.json()["events"]
    assert [r["deliver_at"] for r in receipts] == [at, at]
    assert await drain(first_client) == [] and await drain(second_client) == []
    served.clock.advance(60)
    for client, receipt in ((first_client, receipts[0]), (second_client, receipts[1])):
        events = await until(lambda c=client: drain(c), "each agent's copy offered")
        assert [(e["id"], e["seq"]) for e in events] == [(receipt["id"], 1)]
        await client.aclose()


async def test_a_cancelled_schedule_is_kept_with_its_cancel_and_never_offered(
    served: Served,
) -> None:
    agent, client = await served.agent()
    (event_id,) = await served.publish(agent["handle"], delay_s=60)
    cancelled = await served.admin.delete(f"/v1/events/{event_id}")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    (later,) = await served.publish(agent["handle"], delay_s=60)  # the one that goes
    served.clock.advance(61)
    events = await until(lambda: drain(client), "the other scheduled event offered")
    assert [e["id"] for e in events] == [later]
    shown = await status(served, event_id)
    assert shown["status"] == "cancelled"
    assert [(a["mechanism"], a["outcome"]) for a in shown["attempts"]] == [("cancel", "cancelled")]
    again = await served.admin.delete(f"/v1/events/{event_id}")
    assert again.status_code == 409 and "cancelled" in again.json()["error"]["message"]
    redelivered = await served.admin.post(f"/v1/events/{event_id}/redeliver")
    assert redelivered.status_code == 409, redelivered.text
    await client.aclose()


async def pending(served: Served) -> int:
    """``/v1/stats``' count of pending events (every test's: compare before and after)."""
    return int((await served.admin.get("/v1/stats")).json()["events"]["pending"])


async def test_a_pending_event_is_recalled_only_while_nothing_handed_it_out(served: Served) -> None:
    agent, client = await served.agent()
    pending_before = await pending(served)
    untouched, leased = await served.publish(agent["handle"], count=2)
    recalled = await served.admin.delete(f"/v1/events/{untouched}")
    assert recalled.status_code == 200, recalled.text
    assert recalled.json()["status"] == "cancelled"
    assert [e["id"] for e in await drain(client)] == [leased]  # the recalled one is gone
    refused = await served.admin.delete(f"/v1/events/{leased}")
    assert refused.status_code == 409, refused.text
    assert "handed out" in refused.json()["error"]["message"]
    assert (await status(served, leased))["status"] == "pending"
    assert await pending(served) == pending_before + 1  # the leased one
    missing = await served.admin.delete("/v1/events/evt_0000000000000000000000")
    assert missing.status_code == 404
    as_agent = await client.delete(f"/v1/events/{leased}")
    assert as_agent.status_code in (401, 403)
    await client.aclose()


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"delay_s": 60, "deliver_at": "2099-01-01T00:00:00Z"}, "not both"),
        ({"delay_s": 0}, "delay_s"),
        ({"delay_s": 30 * 86400 + 1}, "delay_s"),
        ({"deliver_at": "2026-12-08T09:00:00"}, "deliver_at"),
        ({"deliver_at": "tomorrow"}, "deliver_at"),
        ({"deliver_at": "past"}, "in the past"),
        ({"deliver_at": "far"}, "more than 30 days ahead"),
    ],
)
async def test_a_bad_schedule_is_refused_saying_what_to_fix_and_stores_nothing(
    served: Served, fields: dict[str, Any], says: str
) -> None:
    agent, client = await served.agent()
    now = now_ms(served)
    if fields.get("deliver_at") == "past":
        fields = {"deliver_at": iso_ms(now - 60_000)}
    elif fields.get("deliver_at") == "far":
        fields = {"deliver_at": iso_ms(now + 31 * 86400 * 1000)}
    answer = await served.admin.post("/v1/events", json={"to": agent["handle"], **TEXT, **fields})
    assert answer.status_code == 422, answer.text
    assert says in answer.json()["error"]["message"]
    listed = await served.admin.get("/v1/events", params={"agent": agent["handle"]})
    assert listed.json()["events"] == []
    await client.aclose()


async def test_a_batch_is_scheduled_whole_or_not_at_all(served: Served) -> None:
    agent, client = await served.agent()
    batch = [{"to": agent["handle"], **TEXT, "delay_s": 60}, {"to": agent["handle"], **TEXT}]
    answer = await served.admin.post("/v1/events", json=batch)
    assert answer.status_code == 422, answer.text
    assert "events[1]" in answer.json()["error"]["message"]
    listed = await served.admin.get("/v1/events", params={"agent": agent["handle"]})
    assert listed.json()["events"] == []
    await client.aclose()


# Real processes, the real clock: a delay of a second or two, waited for (bounded).


def _new_agent(admin: httpx.Client) -> dict[str, Any]:
    made = admin.post("/v1/agents", json={"handle": f"s-{uuid.uuid4().hex[:8]}"})
    assert made.status_code == 201, made.text
    agent: dict[str, Any] = made.json()
    return agent


def _drained(herald: HeraldProcess, agent: dict[str, Any]) -> list[dict[str, Any]]:
    """Every event the agent drains now, each acknowledged."""
    seen: list[dict[str, Any]] = []
    with herald.client(agent["api_key"]) as client:
        cursor = 0
        while True:
            answer = client.post("/channel/heartbeat", json={"cursor": cursor, "limit": 100})
            assert answer.status_code == 200, answer.text
            if not answer.json()["events"]:
                return seen
            seen += answer.json()["events"]
            cursor = answer.json()["cursor"]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_schedule_survives_a_restart(backend: str, tmp_path: Path) -> None:
    with fresh_store_url(backend, tmp_path) as url:
        herald = HeraldProcess(url)
        try:
            with herald.client(herald.admin_key) as admin:
                agent = _new_agent(admin)
                published = admin.post(
                    "/v1/events", json={"to": agent["handle"], **TEXT, "delay_s": 2}
                )
                assert published.status_code == 202, published.text
        finally:
            herald.kill()  # before it is due, as in a crash
        herald = HeraldProcess(url)
        try:
            events = wait_until(lambda: _drained(herald, agent), "the schedule due after a restart")
            assert [(e["id"], e["seq"]) for e in events] == [(published.json()["id"], 1)]
        finally:
            herald.stop()


def test_two_processes_make_each_scheduled_event_due_once_and_deliver_it_once(
    tmp_path: Path,
) -> None:
    count = 50
    with fresh_store_url("postgres", tmp_path) as url:
        first, second = HeraldProcess(url), HeraldProcess(url)
        try:
            with first.client(first.admin_key) as admin:
                agent = _new_agent(admin)
                reader = SSEReader(second.url, agent["api_key"])
                at = iso_ms(int((time.time() + 2) * 1000))
                batch = [{"to": agent["handle"], **TEXT, "deliver_at": at} for _ in range(count)]
                published = admin.post("/v1/events", json=batch)
                assert published.status_code == 202, published.text
                ids = [r["id"] for r in published.json()["events"]]
            streamed = []
            for _ in range(count):
                frame = reader.next()
                assert frame is not None
                streamed.append((frame.data["id"], frame.data["seq"]))
            reader.close()
            assert sorted(streamed, key=lambda s: s[1]) == list(
                zip(ids, range(1, count + 1), strict=True)
            )
            drained = _drained(first, agent)
            assert sorted(e["id"] for e in drained) == sorted(ids)
            with first.client(first.admin_key) as admin:
                shown = admin.get(f"/v1/agents/{agent['id']}").json()
                assert shown["last_seq"] == count  # numbered once: never due twice
        finally:
            first.stop()
            second.stop()


async def test_an_agent_schedules_a_message_to_another_through_herald_client(
    served: Served,
) -> None:
    (sender, sender_http), (receiver, receiver_http) = [await served.agent() for _ in "ab"]
    async with HeraldClient(served.url, sender["api_key"]) as client:
        published = await client.send_message(receiver["handle"], "standup", delay_s=60)
    assert published.event.status.value == "scheduled"
    assert await drain(receiver_http) == []
    served.clock.advance(60)
    events = await until(lambda: drain(receiver_http), "the scheduled message offered")
    assert [(e["id"], e["from"], e["seq"]) for e in events] == [
        (published.event.id, sender["handle"], 1)
    ]
    await sender_http.aclose()
    await receiver_http.aclose()
