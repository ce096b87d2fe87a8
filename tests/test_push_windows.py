"""Quiet hours and digests through the hub, on both backends, the hub's clock moved by the test:
what each rule holds back from being pushed (``held_by``), decided as the event is stored; one
``herald.summary`` event when a window ends, counting what it held by type; urgent events pass
both; every event is kept and drained; and, over a real serve, what an SSE stream and an MCP
session are pushed."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp.client.streamable_http import streamable_http_client

from herald import Hub
from herald.client import HeraldClient
from herald.config import HttpConfig, ServeConfig
from herald.errors import InvalidInput
from herald.models import Agent, Event, NewEvent, Priority
from herald.push_windows import SUMMARY_TYPE
from herald.store import open_store
from herald.testing import ManualClock
from mcp import Client
from tests.herald_process import ADMIN_KEY
from tests.http.test_mcp_webhook_status import serving as serving_webhooks
from tests.in_process import serving_here
from tests.mcp.conftest import HeraldNotifications, Received
from tests.sse import SSEReader
from tests.test_loop_guard import Served, tool
from tests.webhooks.receiver import Receiver


@contextlib.asynccontextmanager
async def serving(store_url: str) -> AsyncIterator[Served]:
    """``serve()`` on ``store_url`` with its clock in the test's hands, for one test."""
    clock = ManualClock(start=time.time())
    config = ServeConfig(store_url=store_url, log_level="warning", http=HttpConfig(port=0))
    headers = {"authorization": f"Bearer {ADMIN_KEY}"}
    async with (
        serving_here(config, clock) as url,
        httpx.AsyncClient(base_url=url, headers=headers, timeout=30.0) as admin,
    ):
        yield Served(url, clock, admin)


pytestmark = pytest.mark.anyio

BERLIN_NIGHTS = {"zone": "Europe/Berlin", "start": "22:00", "end": "07:00"}


def at(iso: str) -> float:
    """Seconds since the epoch of an RFC 3339 time."""
    return datetime.datetime.fromisoformat(iso).timestamp()


def set_clock(clock: ManualClock, iso: str) -> None:
    clock.advance(at(iso) - clock())


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=at("2026-01-10T12:00:00Z"))


@pytest.fixture
async def hub(store_url: str, clock: ManualClock) -> AsyncIterator[Hub]:
    async with Hub(await open_store(store_url, clock=clock)) as opened:
        yield opened


async def agent_with(hub: Hub, handle: str, preferences: dict[str, Any]) -> Agent:
    agent, _ = await hub.create_agent(handle)
    return await hub.preferences.put(agent.id, preferences)


async def publish(
    hub: Hub, to: str, type_: str, priority: Priority = Priority.NORMAL, text: str = "x"
) -> Event:
    (published,) = await hub.publish_many([NewEvent(to, type_, text, priority=priority)])
    return published.event


async def summaries(hub: Hub, agent: Agent) -> list[dict[str, Any]]:
    """The data of the summaries the windows ended by now made (each made at most once)."""
    return [e.data for e in await hub.release_windows() if e.agent_id == agent.id]


async def drained(hub: Hub, agent: Agent) -> list[Event]:
    return list((await hub.drain(agent, limit=500)).events)


async def test_quiet_hours_across_midnight_hold_all_but_urgent_then_one_summary(
    hub: Hub, clock: ManualClock
) -> None:
    agent = await agent_with(hub, "night-owl", {"quiet_hours": BERLIN_NIGHTS})
    set_clock(clock, "2026-01-10T20:59:00Z")  # 21:59 in Berlin: not yet quiet
    before = await publish(hub, agent.handle, "ci.done")
    set_clock(clock, "2026-01-10T21:00:00Z")  # 22:00: quiet
    held = [
        await publish(hub, agent.handle, "ci.done"),
        await publish(hub, agent.handle, "ci.done"),
    ]
    set_clock(clock, "2026-01-10T23:30:00Z")  # past midnight, still quiet
    held.append(await publish(hub, agent.handle, "mail.new"))
    urgent = await publish(hub, agent.handle, "pager", Priority.URGENT)
    low = await publish(hub, agent.handle, "digest.low", Priority.LOW)
    assert before.held_by is None and urgent.held_by is None and low.held_by is None
    assert len({e.held_by for e in held}) == 1 and held[0].held_by is not None

    set_clock(clock, "2026-01-11T05:59:59.999Z")  # 06:59:59.999 in Berlin
    assert await summaries(hub, agent) == []
    set_clock(clock, "2026-01-11T06:00:00Z")  # 07:00: the quiet hours end
    assert await summaries(hub, agent) == [
        {
            "reason": "quiet_hours",
            "count": 3,
            "types": {"ci.done": 2, "mail.new": 1},
            "from": "2026-01-10T21:00:00.000Z",
            "until": "2026-01-11T06:00:00.000Z",
        }
    ]
    assert await summaries(hub, agent) == []  # made once
    after = await publish(hub, agent.handle, "ci.done")
    assert after.held_by is None

    # Nothing is lost: every event, held or not, is drained, and the summary with them.
    kept = [e.id for e in await drained(hub, agent)]
    ids = [before.id, *(e.id for e in held), urgent.id, low.id, after.id]
    assert set(ids) <= set(kept) and len(kept) == len(ids) + 1


@pytest.mark.parametrize("name", ["localtime", "posixrules", "right/UTC"])
async def test_quiet_hours_refuse_a_zone_file_that_names_no_iana_zone(hub: Hub, name: str) -> None:
    # localtime is the machine's own zone: processes of one store would disagree on the hours.
    agent, _ = await hub.create_agent(f"zone-{name.replace('/', '-').lower()}")
    with pytest.raises(InvalidInput, match=f"zone '{name}' is no IANA time zone herald knows"):
        await hub.preferences.put(agent.id, {"quiet_hours": {**BERLIN_NIGHTS, "zone": name}})
    assert (
        "Europe/Berlin"
        in (await hub.preferences.put(agent.id, {"quiet_hours": BERLIN_NIGHTS})).preferences_json
    )


async def test_a_summary_of_one_event_says_so_in_the_singular(hub: Hub, clock: ManualClock) -> None:
    agent = await agent_with(hub, "light-sleeper", {"quiet_hours": BERLIN_NIGHTS})
    set_clock(clock, "2026-01-10T21:00:00Z")  # 22:00 in Berlin: quiet
    await publish(hub, agent.handle, "mail.new")
    set_clock(clock, "2026-01-11T06:00:00Z")  # 07:00: the quiet hours end
    (summary,) = [e for e in await hub.release_windows() if e.agent_id == agent.id]
    assert summary.text == (
        "1 event arrived during quiet hours and was not pushed (1 mail.new); it waits in your inbox"
    )


@pytest.mark.parametrize(
    ("quiet_from", "ends_before", "ends_at"),
    [
        # The night spring loses an hour: 07:00 CEST is 05:00 UTC, not 06:00.
        ("2026-03-28T21:30:00Z", "2026-03-29T04:59:59.999Z", "2026-03-29T05:00:00Z"),
        # The night autumn gains one: 07:00 CET is 06:00 UTC, not 05:00.
        ("2026-10-24T20:30:00Z", "2026-10-25T05:59:59.999Z", "2026-10-25T06:00:00Z"),
    ],
    ids=["spring-forward", "fall-back"],
)
async def test_quiet_hours_end_on_the_zones_wall_clock_across_a_daylight_saving_change(
    hub: Hub, clock: ManualClock, quiet_from: str, ends_before: str, ends_at: str
) -> None:
    agent = await agent_with(hub, "dst", {"quiet_hours": BERLIN_NIGHTS})
    set_clock(clock, quiet_from)  # 22:30 in Berlin
    held = await publish(hub, agent.handle, "ci.done")
    assert held.held_by is not None
    set_clock(clock, ends_before)
    assert await summaries(hub, agent) == []
    assert (await publish(hub, agent.handle, "ci.done")).held_by == held.held_by  # still quiet
    set_clock(clock, ends_at)
    (summed,) = await summaries(hub, agent)
    assert (summed["count"], summed["until"]) == (2, ends_at.replace(":00Z", ":00.000Z"))
    assert (await publish(hub, agent.handle, "ci.done")).held_by is None


async def test_a_digest_pushes_the_first_of_a_burst_and_sums_up_the_rest_at_its_end(
    hub: Hub, clock: ManualClock
) -> None:
    agent = await agent_with(hub, "ci-watcher", {"digests": [{"types": ["ci.*"], "window_s": 60}]})
    first = await publish(hub, agent.handle, "ci.build")  # before: opens the window, pushed
    assert first.held_by is None
    clock.advance(10)
    during = [await publish(hub, agent.handle, "ci.test")]
    other = await publish(hub, agent.handle, "mail.new")  # not of the digest's types
    urgent = await publish(hub, agent.handle, "ci.broken", Priority.URGENT)
    clock.advance(49.5)  # 59.5 s after the first: the window is still open
    during.append(await publish(hub, agent.handle, "ci.build"))
    assert {e.held_by for e in during} != {None} and len({e.held_by for e in during}) == 1
    assert other.held_by is None and urgent.held_by is None
    assert await summaries(hub, agent) == []
    clock.advance(0.5)  # 60 s after the first: it ends
    (summed,) = await summaries(hub, agent)
    assert summed["reason"] == "digest"
    assert (summed["count"], summed["types"]) == (2, {"ci.build": 1, "ci.test": 1})

    after = await publish(hub, agent.handle, "ci.build")  # after: a new burst, pushed
    assert after.held_by is None
    clock.advance(60)
    assert await summaries(hub, agent) == []  # a burst of one has nothing to sum up

    # Each event is in the inbox on its own, and acknowledged on its own.
    leased = (await hub.drain(agent, cursor=0, limit=50)).events
    assert [e.id for e in leased if e.type != SUMMARY_TYPE] == [
        first.id,
        during[0].id,
        other.id,
        urgent.id,
        during[1].id,
        after.id,
    ]
    assert (await hub.ack(agent, ids=[during[0].id])).count == 1


async def test_a_window_summed_up_holds_nothing_more_after_the_clock_is_set_back_into_it(
    hub: Hub, clock: ManualClock
) -> None:
    agent = await agent_with(hub, "set-back", {"digests": [{"types": ["ci.*"], "window_s": 60}]})
    assert (await publish(hub, agent.handle, "ci.build")).held_by is None
    clock.advance(1)
    held = await publish(hub, agent.handle, "ci.test")
    clock.advance(60)
    (summed,) = await summaries(hub, agent)
    assert summed["count"] == 1
    clock.advance(-31)  # back into the span of the window summed up and closed
    # A new burst: its first is pushed, the rest held by a window of its own, summed up.
    assert (await publish(hub, agent.handle, "ci.build")).held_by is None
    again = await publish(hub, agent.handle, "ci.test")
    assert again.held_by is not None and again.held_by != held.held_by
    clock.advance(60)
    (summed,) = await summaries(hub, agent)
    assert summed["count"] == 1


async def test_a_digest_holds_all_but_the_first_of_publishes_stored_together(
    hub: Hub, clock: ManualClock
) -> None:
    agent = await agent_with(hub, "grouped", {"digests": [{"types": ["ci.*"], "window_s": 60}]})
    published = await asyncio.gather(*(publish(hub, agent.handle, "ci.a") for _ in range(40)))
    pushed = [e for e in published if e.held_by is None]
    assert len(pushed) == 1 and len({e.held_by for e in published} - {None}) == 1
    assert pushed[0].seq == min(e.seq for e in published)  # the first stored opens the window
    clock.advance(60)
    (summed,) = await summaries(hub, agent)
    assert summed["count"] == 39


async def test_quiet_hours_come_before_a_digest_and_urgent_passes_both(
    hub: Hub, clock: ManualClock
) -> None:
    agent = await agent_with(
        hub,
        "both",
        {"quiet_hours": BERLIN_NIGHTS, "digests": [{"types": ["ci.*"], "window_s": 600}]},
    )
    set_clock(clock, "2026-01-10T22:00:00Z")  # 23:00 in Berlin
    quiet = [await publish(hub, agent.handle, "ci.build") for _ in range(3)]
    urgent = await publish(hub, agent.handle, "ci.build", Priority.URGENT)
    assert len({e.held_by for e in quiet} - {None}) == 1 and None not in {e.held_by for e in quiet}
    assert urgent.held_by is None
    set_clock(clock, "2026-01-11T06:00:00Z")
    (summed,) = await summaries(hub, agent)
    assert (summed["reason"], summed["count"]) == ("quiet_hours", 3)
    # The morning's first build opens a digest.
    assert (await publish(hub, agent.handle, "ci.build")).held_by is None
    assert (await publish(hub, agent.handle, "ci.build")).held_by is not None


async def test_a_digest_window_is_shared_by_every_process_and_summed_up_once(
    store_url: str, clock: ManualClock
) -> None:
    async with (
        Hub(await open_store(store_url, clock=clock)) as here,
        Hub(await open_store(store_url, clock=clock)) as elsewhere,
    ):
        agent = await agent_with(here, "shared", {"digests": [{"types": ["ci.*"], "window_s": 30}]})
        first = await publish(elsewhere, agent.handle, "ci.a")
        second = await publish(here, agent.handle, "ci.b")
        third = await publish(elsewhere, agent.handle, "ci.c")
        assert first.held_by is None
        assert second.held_by is not None and second.held_by == third.held_by
        clock.advance(30)
        made = [*await here.release_windows(), *await elsewhere.release_windows()]
        assert [(e.type, e.data["count"]) for e in made] == [(SUMMARY_TYPE, 2)]


async def test_a_window_open_across_a_restart_is_summed_up_once_after_it(
    store_url: str, clock: ManualClock
) -> None:
    async with Hub(await open_store(store_url, clock=clock)) as before:
        agent = await agent_with(before, "restarted", {"quiet_hours": BERLIN_NIGHTS})
        set_clock(clock, "2026-01-10T22:00:00Z")
        held = [await publish(before, agent.handle, "ci.done") for _ in range(2)]
        assert None not in {e.held_by for e in held}
    set_clock(clock, "2026-01-11T09:00:00Z")  # down while the quiet hours ended
    async with Hub(await open_store(store_url, clock=clock)) as after:
        (summed,) = await summaries(after, agent)
        assert (summed["count"], summed["until"]) == (2, "2026-01-11T06:00:00.000Z")
        assert await summaries(after, agent) == []


async def test_a_summary_of_ten_thousand_events_counts_them_all(
    hub: Hub, clock: ManualClock
) -> None:
    agent = await agent_with(hub, "flood", {"quiet_hours": BERLIN_NIGHTS})
    set_clock(clock, "2026-01-10T22:00:00Z")
    for batch in range(10):
        types = ["ci.build", "ci.test"] if batch % 2 else ["mail.new", "ci.build"]
        events = [NewEvent(agent.handle, types[n % 2], f"{batch}-{n}") for n in range(1000)]
        await hub.publish_many(events)
    set_clock(clock, "2026-01-11T06:00:00Z")
    (summed,) = await summaries(hub, agent)
    assert summed["count"] == 10_000
    assert summed["types"] == {"ci.build": 5000, "ci.test": 2500, "mail.new": 2500}


async def test_a_scheduled_event_is_held_by_the_quiet_hours_it_falls_due_in(
    hub: Hub, clock: ManualClock
) -> None:
    agent = await agent_with(hub, "later", {"quiet_hours": BERLIN_NIGHTS})
    set_clock(clock, "2026-01-10T20:00:00Z")  # 21:00 in Berlin: not quiet
    due_in_quiet = await hub.publish(
        agent.handle, "ci.done", "x", deliver_at="2026-01-10T22:00:00Z"
    )
    cancelled = await hub.publish(agent.handle, "ci.done", "x", deliver_at="2026-01-10T22:30:00Z")
    due_by_day = await hub.publish(agent.handle, "ci.done", "x", deliver_at="2026-01-10T20:30:00Z")
    assert due_in_quiet.event.held_by is not None and due_by_day.event.held_by is None
    await hub.cancel(cancelled.event.id)
    set_clock(clock, "2026-01-10T22:00:00Z")
    released = {e.id: e for e in await hub.release_due()}
    assert released[due_in_quiet.event.id].held_by == due_in_quiet.event.held_by
    set_clock(clock, "2026-01-11T06:00:00Z")
    (summed,) = await summaries(hub, agent)
    assert (summed["count"], summed["types"]) == (1, {"ci.done": 1})  # not the cancelled one


async def test_a_topics_copy_is_held_by_its_own_agents_rules_only(
    hub: Hub, clock: ManualClock
) -> None:
    await hub.topics.put("builds", "every build")
    sleeper = await agent_with(hub, "sleeper", {"quiet_hours": BERLIN_NIGHTS})
    awake, _ = await hub.create_agent("awake")
    for agent in (sleeper, awake):
        await hub.topics.subscribe(agent.id, "builds")
    set_clock(clock, "2026-01-10T22:00:00Z")  # 23:00 in Berlin
    copies = await hub.publish_topic("builds", "ci.done", "x")
    held = {p.event.agent_id: p.event.held_by for p in copies}
    assert held[sleeper.id] is not None and held[awake.id] is None
    urgent = await hub.publish_to_topic(
        "builds", NewEvent("", "ci.done", "x", priority=Priority.URGENT)
    )
    assert {p.event.held_by for p in urgent} == {None}
    set_clock(clock, "2026-01-11T06:00:00Z")
    assert [(s["reason"], s["count"]) for s in await summaries(hub, sleeper)] == [
        ("quiet_hours", 1)
    ]


# Over a real serve (``serve()`` on loopback, in process, its clock moved by the test): what an
# SSE stream and an MCP session are pushed, and what the agent drains.


@contextlib.asynccontextmanager
async def mcp_session(url: str, key: str) -> AsyncIterator[Received]:
    """A Claude Code-like MCP session of the agent whose key is ``key``: what it is pushed."""
    received = Received()
    headers = {"authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        Client(
            streamable_http_client(f"{url}/mcp", http_client=http),
            mode="auto",
            client_info=types.Implementation(name="claude-code", version="1.0"),
            extensions=[HeraldNotifications(received)],
        ),
    ):
        yield received


async def next_pushed(stream: SSEReader, session: Received) -> tuple[str, str]:
    """The next event pushed to both the stream and the MCP session: its text on the stream,
    and the session's channel push. Neither may show an event a window held."""
    while True:
        frame = await asyncio.to_thread(stream.next)
        assert frame is not None, "the stream ended"
        if frame.event == "message":
            break
    while True:
        method, params = await session.next(timeout_s=20)
        if method == "notifications/claude/channel":
            break
    text = str(frame.data["text"])
    assert "held" not in text and "held" not in params["content"], (text, params)
    return text, str(params["content"])


async def test_a_stream_and_an_mcp_session_are_pushed_summaries_not_what_windows_held(
    own_store_url: str,
) -> None:
    async with serving(own_store_url) as served:
        made = await served.admin.post("/v1/agents", json={"handle": "served-owl"})
        assert made.status_code == 201, made.text
        agent = made.json()
        path = f"/v1/agents/{agent['id']}"
        rules = {
            "quiet_hours": BERLIN_NIGHTS,
            "digests": [{"types": ["ci.*"], "window_s": 60}],
        }

        # Bad rules are refused, naming what to fix, and change nothing.
        bad = {"preferences": {**rules, "quiet_hours": {**BERLIN_NIGHTS, "zone": "Mars/Olympus"}}}
        refused = await served.admin.patch(path, json=bad)
        assert refused.status_code == 422, refused.text
        message = refused.json()["error"]["message"]
        assert "agent.preferences.quiet_hours.zone 'Mars/Olympus'" in message
        assert (await served.admin.get(path)).json()["preferences"] == {}
        patched = await served.admin.patch(path, json={"preferences": rules})
        assert patched.status_code == 200, patched.text
        assert patched.json()["preferences"] == rules

        async def publish_(type_: str, text: str, priority: str = "normal") -> None:
            body = {"to": "served-owl", "type": type_, "text": text, "priority": priority}
            answer = await served.admin.post("/v1/events", json=body)
            assert answer.status_code == 202, answer.text

        served.clock.advance(at("2027-01-10T20:00:00Z") - served.clock())  # 21:00 in Berlin
        stream = await asyncio.to_thread(SSEReader, served.url, agent["api_key"])
        try:
            async with mcp_session(served.url, agent["api_key"]) as session:
                # A digest: the first of the burst is pushed, the rest held till its end.
                await publish_("ci.build", "build one")
                assert (await next_pushed(stream, session))[0] == "build one"
                served.clock.advance(10)
                await publish_("ci.test", "held test")
                await publish_("mail.new", "a mail")  # not the digest's: pushed
                assert (await next_pushed(stream, session))[0] == "a mail"
                served.clock.advance(50)  # the window ends: its summary is pushed
                text, pushed = await next_pushed(stream, session)
                assert text.startswith("1 event arrived during a digest's window")
                assert "1 ci.test" in text and "1 ci.test" in pushed

                # Quiet hours: only urgent is pushed, then one summary when they end.
                served.clock.advance(at("2027-01-10T21:30:00Z") - served.clock())  # 22:30
                await publish_("ci.build", "held build")
                await publish_("mail.new", "held mail")
                await publish_("pager", "wake up", "urgent")
                assert (await next_pushed(stream, session))[0] == "wake up"
                served.clock.advance(at("2027-01-11T06:00:00Z") - served.clock())  # 07:00
                text, pushed = await next_pushed(stream, session)
                assert text.startswith("2 events arrived during quiet hours")
                assert "1 ci.build, 1 mail.new" in text and "1 ci.build, 1 mail.new" in pushed
        finally:
            await asyncio.to_thread(stream.close)

        # Nothing is lost: every event is drained, held or not, with both summaries. A push
        # is recorded just after its notification leaves, its row locked until then, and a
        # drain skips locked rows: drained again (bounded) until all eight have come.
        headers = {"authorization": f"Bearer {agent['api_key']}"}
        drained_by_id: dict[str, dict[str, Any]] = {}
        async with asyncio.timeout(30):
            while len(drained_by_id) < 8:
                drained = await served.admin.post("/channel/heartbeat", json={}, headers=headers)
                assert drained.status_code == 200, drained.text
                drained_by_id.update((e["id"], e) for e in drained.json()["events"])
        events = sorted(drained_by_id.values(), key=lambda e: int(e["seq"]))
        summaries_ = [e["data"] for e in events if e["type"] == SUMMARY_TYPE]
        assert [(s["reason"], s["count"]) for s in summaries_] == [
            ("digest", 1),
            ("quiet_hours", 2),
        ]
        texts = {e["text"] for e in events if e["type"] != SUMMARY_TYPE}
        assert {"held test", "held build", "held mail"} <= texts


async def test_an_agent_sets_its_own_rules_over_http_mcp_and_herald_client(
    own_store_url: str,
) -> None:
    rules = {"quiet_hours": BERLIN_NIGHTS, "digests": [{"types": ["ci.*"], "window_s": 600}]}
    async with serving(own_store_url) as served:
        agent = await served.agent("self-ruled")
        async with agent:
            bad_zone = {"quiet_hours": {**BERLIN_NIGHTS, "zone": "Europe/Atlantis"}}
            refused = await agent.put("/channel/preferences", json=bad_zone)
            assert refused.status_code == 422, refused.text
            assert "'Europe/Atlantis' is no IANA time zone" in refused.json()["error"]["message"]

            set_ = await tool(agent, "preferences", {"set": rules})
            assert not set_.get("isError"), set_
            assert set_["structuredContent"] == rules
            bad_window = {"digests": [{"types": ["ci.*"], "window_s": 0}]}
            refused_tool = await tool(agent, "preferences", {"set": bad_window})
            assert refused_tool["isError"] is True
            assert "digests[0].window_s" in refused_tool["content"][0]["text"]
            assert (await agent.get("/channel/preferences")).json() == rules  # unchanged

            key = agent.headers["authorization"].removeprefix("Bearer ")
            async with HeraldClient(served.url, key) as client:
                with pytest.raises(InvalidInput, match="quiet_hours starts and ends at 22:00"):
                    await client.preferences({"quiet_hours": {**BERLIN_NIGHTS, "end": "22:00"}})
                assert await client.preferences() == rules
                assert await client.preferences({"muted": ["x.*"]}) == {"muted": ["x.*"]}


async def test_a_webhook_gets_the_digests_first_event_and_its_summary_not_what_it_held(
    own_store_url: str,
) -> None:
    receiver = Receiver()
    try:
        async with serving_webhooks(own_store_url) as served:
            made = await served.admin.post("/v1/agents", json={"handle": "hooked"})
            assert made.status_code == 201, made.text
            path = f"/v1/agents/{made.json()['id']}"
            put = await served.admin.put(f"{path}/webhook", json={"url": receiver.url})
            assert put.status_code in (200, 201), put.text
            rules = {"preferences": {"digests": [{"types": ["ci.*"], "window_s": 60}]}}
            assert (await served.admin.patch(path, json=rules)).status_code == 200

            for type_, text in (("ci.build", "first"), ("ci.build", "held"), ("mail", "mail")):
                body = {"to": "hooked", "type": type_, "text": text}
                answer = await served.admin.post("/v1/events", json=body)
                assert answer.status_code == 202, answer.text
            arrived = [await asyncio.to_thread(receiver.arrived.get, timeout=30) for _ in "ab"]
            assert sorted(r.json["text"] for r in arrived) == ["first", "mail"]
            served.clock.advance(60)
            summed = await asyncio.to_thread(receiver.arrived.get, timeout=30)
            assert summed.json["type"] == SUMMARY_TYPE and summed.json["data"]["count"] == 1
            assert "held" not in [r.json["text"] for r in receiver.requests]
    finally:
        receiver.close()
