"""What an operator lists and counts, and an event offered again: the store contract, on every
backend."""

from __future__ import annotations

from dataclasses import replace

import pytest

from herald.errors import Conflict
from herald.ids import new_id
from herald.models import (
    Agent,
    Attempt,
    Endpoint,
    EventStatus,
    Finished,
    Kind,
    NewEvent,
    SessionRecord,
    State,
)
from herald.overview import EventQuery
from herald.store import Store
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio


async def add_agent(store: Store, handle: str) -> Agent:
    agent = Agent(new_id("agt_"), handle, f"hash-{handle}", store.now())
    await store.create_agent(agent)
    return agent


async def publish(store: Store, to: str, count: int, type: str = "t", **kw: float) -> list[str]:
    events = [NewEvent(to=to, type=type, text=f"{to}{n}", **kw) for n in range(count)]  # type: ignore[arg-type]
    return [p.event.id for p in await store.append(events)]


async def walk(store: Store, query: EventQuery) -> list[str]:
    """Every page of ``query``, by ``before``, as GET /v1/events walks them."""
    seen: list[str] = []
    before = None
    while True:
        page = await store.list_events(EventQuery(**{**query.__dict__, "before": before}))
        seen += [event.id for event in page]
        if len(page) < query.limit:
            return seen
        before = query.position(page[-1])


async def test_events_are_listed_newest_first_across_agents(
    store: Store, clock: ManualClock
) -> None:
    await add_agent(store, "alice"), await add_agent(store, "bob")
    ids = []
    for _ in range(3):
        ids += await publish(store, "alice", 2) + await publish(store, "bob", 1)
        clock.advance(1)
    listed = await store.list_events(EventQuery(limit=100))
    assert [e.id for e in listed] == sorted(ids, reverse=True)
    assert await walk(store, EventQuery(limit=2)) == [e.id for e in listed]


async def test_a_walk_sees_each_event_that_existed_when_it_began_once(
    store: Store, clock: ManualClock
) -> None:
    await add_agent(store, "alice"), await add_agent(store, "bob")
    before = await publish(store, "alice", 5) + await publish(store, "bob", 5)
    seen: list[str] = []
    position = None
    while True:
        page = await store.list_events(EventQuery(before=position, limit=3))
        seen += [e.id for e in page]
        if len(page) < 3:
            break
        position = (page[-1].created_at, page[-1].id)
        # Published between two pages, at the same millisecond and later.
        await publish(store, "alice", 2)
        clock.advance(0.001)
    assert sorted(seen) == sorted(before)


async def test_one_agents_events_come_by_seq_page_by_page_whatever_arrives_meanwhile(
    store: Store, clock: ManualClock
) -> None:
    alice, _ = await add_agent(store, "alice"), await add_agent(store, "bob")
    stored = await publish(store, "alice", 4)
    clock.advance(-60)  # a clock set back: stored later, created earlier
    stored += await publish(store, "alice", 4) + await publish(store, "bob", 3)
    clock.advance(120)
    stored += await publish(store, "alice", 3)
    alices = [e for e in await store.list_events(EventQuery(limit=100)) if e.id in stored]
    by_seq = sorted((e for e in alices if e.agent_id == alice.id), key=lambda e: -e.seq)
    seen: list[str] = []
    query = EventQuery(agent_id=alice.id, limit=3)
    while True:
        page = await store.list_events(query)
        seen += [e.id for e in page]
        if len(page) < query.limit:
            break
        query = replace(query, before=query.position(page[-1]))
        await publish(store, "alice", 2)  # published between two pages: after the walk's start
    assert seen == [e.id for e in by_seq]
    assert query.before == by_seq[8].seq


async def test_one_agents_events_not_yet_numbered_come_first_newest_first_then_by_seq(
    store: Store, clock: ManualClock
) -> None:
    """A scheduled event's seq is a placeholder below zero until it is due: listed by seq alone
    it would come after the agent's oldest event, pages away. Its agent's listing shows those
    first (they will be numbered after every event there is), the newest scheduled first."""
    alice = await add_agent(store, "alice")
    await add_agent(store, "bob")
    numbered = await publish(store, "alice", 3)
    later = NewEvent(to="alice", type="t", text="later", deliver_at=store.now() + 60_000)
    cancelled, due = [p.event.id for p in await store.schedule([later] * 2)]
    (last,) = [p.event.id for p in await store.schedule([later])]  # another batch, as soon
    await store.cancel(cancelled)
    await publish(store, "bob", 1)
    await store.schedule([replace(later, to="bob")])
    expected = [last, due, cancelled, *numbered[::-1]]
    for limit in (1, 2, 3, 4, 10):
        assert await walk(store, EventQuery(agent_id=alice.id, limit=limit)) == expected
    pending = EventQuery(agent_id=alice.id, status=EventStatus.PENDING)
    # A narrowed look counts through the runs in turn: the unnumbered, then the numbered.
    bounds = [await store.listing_bound(pending, scan) for scan in (2, 3, 4, 6, 7)]
    placeholders = [e.seq for e in await store.list_events(EventQuery(agent_id=alice.id))][:3]
    assert bounds == [placeholders[1], placeholders[2], 3, 1, None]
    assert [e.id for e in await store.list_events(replace(pending, through=3))] == [numbered[2]]
    scheduled = EventQuery(agent_id=alice.id, status=EventStatus.SCHEDULED)
    assert [e.id for e in await store.list_events(scheduled)] == [last, due]

    clock.advance(61)
    assert len(await store.release_due(10)) == 3  # alice's two, bob's one: numbered when due
    listed = await store.list_events(EventQuery(agent_id=alice.id))
    assert [e.seq for e in listed][1:] == [5, 4, 3, 2, 1]  # numbered in the order scheduled
    expected = [cancelled, last, due, *numbered[::-1]]
    assert await walk(store, EventQuery(agent_id=alice.id, limit=2)) == expected


async def test_events_are_filtered_by_agent_status_type_and_time(
    store: Store, clock: ManualClock
) -> None:
    alice, _ = await add_agent(store, "alice"), await add_agent(store, "bob")
    early = await publish(store, "alice", 1, type="dm.received")
    start = store.now()
    clock.advance(10)
    later = await publish(store, "alice", 2, type="build.failed")
    bob = await publish(store, "bob", 1, type="dm.sent")
    await store.ack(alice.id, ids=[later[0]])

    async def ids(**filters: object) -> set[str]:
        return {e.id for e in await store.list_events(EventQuery(**filters))}  # type: ignore[arg-type]

    assert await ids(agent_id=alice.id) == {*early, *later}
    assert await ids(status=EventStatus.DELIVERED) == {later[0]}
    assert await ids(type="dm.*") == {*early, *bob}
    assert await ids(type="dm.receive?") == set(early)
    assert await ids(type="dm.received") == set(early)
    assert await ids(type="dm") == set()
    assert await ids(since_ms=start + 1) == {*later, *bob}
    assert await ids(until_ms=start + 1) == set(early)
    assert await ids(agent_id=alice.id, type="build.*", status=EventStatus.PENDING) == {later[1]}


async def test_agents_are_summed_up_in_one_read(store: Store, clock: ManualClock) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    published = await publish(store, "alice", 3)
    await publish(store, "alice", 1, ttl_s=1)
    await store.ack(alice.id, ids=published[:1])
    clock.advance(2)  # the event with a ttl ran out: not open any more
    seen = store.now()
    await store.put_session(
        SessionRecord("s1", bob.id, "p1", "mcp", "2025-06-18", seen, seen, seen + 60_000)
    )
    summaries = {s.agent.handle: s for s in await store.agent_summaries()}
    assert [s.agent.handle for s in await store.agent_summaries()] == ["alice", "bob"]
    assert (summaries["alice"].pending, summaries["alice"].live_sessions) == (2, 0)
    assert summaries["alice"].last_activity_at == seen - 2000
    assert (summaries["bob"].pending, summaries["bob"].live_sessions) == (0, 1)
    assert summaries["bob"].last_activity_at == seen
    (only,) = await store.agent_summaries(bob.id)
    assert only.agent.id == bob.id


async def test_agents_come_a_page_at_a_time_by_handle_and_are_searched(store: Store) -> None:
    for handle in ("ann", "bo_b", "bob", "bobby", "carl"):
        await add_agent(store, handle)

    async def handles(**query: str | int | None) -> list[str]:
        return [s.agent.handle for s in await store.agent_summaries(**query)]  # type: ignore[arg-type]

    assert await handles(limit=2) == ["ann", "bo_b"]
    assert await handles(after="bo_b", limit=2) == ["bob", "bobby"]
    assert await handles(after="bobby") == ["carl"]
    assert await handles(search="bob") == ["bob", "bobby"]
    assert await handles(search="_") == ["bo_b"]  # a handle's own character, not a wildcard
    assert await handles(search="bob", after="bob") == ["bobby"]


async def test_the_stats_count_events_attempts_sessions_and_endpoints(store: Store) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    await add_agent(store, "carol")
    oldest, *_ = await publish(store, "alice", 3)
    await publish(store, "bob", 1)
    later = NewEvent(to="carol", type="t", text="later", deliver_at=store.now() + 60_000)
    first, _ = await store.schedule([later, later])
    await store.cancel(first.event.id)  # one scheduled, one cancelled: in no agent's row
    await store.claim(alice.id, "c", 1, 60_000, "heartbeat")
    await store.take(bob.id, 1, "heartbeat", "s")
    now = store.now()
    await store.put_session(
        SessionRecord("s1", alice.id, "p", "mcp", "2025-06-18", now, now, now + 1)
    )
    await store.put_session(
        SessionRecord("s2", bob.id, "p", "mcp", "2025-06-18", now, now, now + 1)
    )
    await store.put_session(SessionRecord("s3", bob.id, "p", "sse", "stream", now, now, now + 1))
    await store.put_session(
        SessionRecord("s4", bob.id, "p", "mcp", "2025-06-18", now, now, now + 1, "claude-code")
    )
    await store.put_endpoint(Endpoint(new_id("end_"), bob.id, Kind.WEBHOOK, "https://x", "s", now))
    stats = await store.stats(top=1)
    oldest = (await store.list_events(EventQuery(agent_id=alice.id)))[-1]
    assert stats.to_json() == {
        "events": {
            "pending": 3,
            "sent": 0,
            "delivered": 1,
            "expired": 0,
            "dead": 0,
            "scheduled": 1,
            "cancelled": 1,
        },
        "published": 4,
        "attempts_recorded": [
            {"mechanism": "cancel", "outcome": "cancelled", "count": 1},
            {"mechanism": "heartbeat", "outcome": "delivered", "count": 1},
            {"mechanism": "heartbeat", "outcome": "leased", "count": 1},
        ],
        "top_pending": [{"id": alice.id, "handle": "alice", "pending": 3}],
        "sessions": [
            {"transport": "mcp", "era": "2025-06-18", "count": 3},
            {"transport": "sse", "era": "stream", "count": 1},
        ],
        "endpoints": [{"kind": "webhook", "state": "active", "count": 1}],
        "clients": [
            {"client": None, "era": "2025-06-18", "count": 2},
            {"client": None, "era": "stream", "count": 1},
            {"client": "claude-code", "era": "2025-06-18", "count": 1},
        ],
        "oldest_pending": {
            "id": oldest.id,
            "agent": alice.id,
            "handle": "alice",
            "created_at": oldest.to_json()["created_at"],
        },
    }


async def test_the_events_published_stay_counted_once_they_are_delivered_and_pruned(
    store: Store,
) -> None:
    alice = await add_agent(store, "alice")
    await publish(store, "alice", 3)
    await store.take(alice.id, 3, "heartbeat", "s")
    assert await store.prune(store.now() + 1) == 3
    await publish(store, "alice", 2)
    stats = await store.stats()
    assert (stats.published, stats.events["pending"], stats.events["delivered"]) == (5, 2, 0)


async def test_the_oldest_pending_event_is_the_oldest_still_open(
    store: Store, clock: ManualClock
) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    assert (await store.stats()).oldest_pending is None
    (acked,) = await publish(store, "bob", 1)
    clock.advance(1)
    expiring_at, (expiring,) = store.now(), await publish(store, "alice", 1, ttl_s=5)
    clock.advance(1)
    waiting_at, (waiting,) = store.now(), await publish(store, "bob", 1)
    clock.advance(1)
    await publish(store, "alice", 1)
    await store.ack(bob.id, ids=[acked])
    assert (await store.stats()).oldest_pending == (expiring, alice.id, "alice", expiring_at)
    clock.advance(5)  # the first of alice's ran out: not open any more
    assert (await store.stats()).oldest_pending == (waiting, bob.id, "bob", waiting_at)


async def test_the_gauges_count_open_unexpired_events_live_sessions_and_endpoints(
    store: Store, clock: ManualClock
) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    empty = await store.gauges()
    assert (empty.pending, empty.oldest_pending_at, empty.oldest_pending_age_s) == (0, None, 0)
    (oldest,) = await publish(store, "alice", 1)
    clock.advance(2)
    await publish(store, "alice", 2)
    await publish(store, "bob", 2, ttl_s=1)  # expired by the time of the reading
    await publish(store, "bob", 1)
    await store.claim(alice.id, "c", 1, 60_000, "heartbeat")  # leased: still open
    await store.mark_sent(bob.id, [(await store.read_open(bob.id, 0, 1))[0].id])  # sent: open
    await store.take(alice.id, 1, "heartbeat", "s")  # delivered
    clock.advance(3)
    now = store.now()
    await store.put_session(SessionRecord("s1", alice.id, "p", "mcp", "legacy", now, now, now + 1))
    await store.put_session(SessionRecord("s2", bob.id, "p", "mcp", "gone", now, now, now))
    await store.put_endpoint(Endpoint(new_id("end_"), bob.id, Kind.WEBHOOK, "https://x", "s", now))
    gauges = await store.gauges()
    # alice: 3 published, 1 taken; bob: 2 expired, the one left is sent (pushed, unacknowledged).
    assert (gauges.read_at, gauges.pending) == (now, 3)
    first = await store.get_event(oldest)
    assert first is not None and gauges.oldest_pending_at == first.created_at
    assert gauges.oldest_pending_age_s == 5.0
    assert gauges.sessions == [("mcp", "legacy", 1)]
    assert gauges.endpoints == [("webhook", "active", 1)]
    stats = await store.stats()  # the same counts, written once for both
    assert (stats.sessions, stats.endpoints) == (gauges.sessions, gauges.endpoints)


async def test_an_agent_is_found_by_handle_and_an_endpoint_by_id(store: Store) -> None:
    alice = await add_agent(store, "alice")
    assert await store.agent_by_handle("alice") == alice
    assert await store.agent_by_handle("nobody") is None
    endpoint = Endpoint(new_id("end_"), alice.id, Kind.WEBHOOK, "https://x", "s", store.now())
    await store.put_endpoint(endpoint)
    assert await store.get_endpoint(endpoint.id) == endpoint
    assert await store.get_endpoint(new_id("end_")) is None


async def give_up(store: Store, endpoint: Endpoint, event_id: str) -> None:
    """The endpoint's delivery of the event fails for good, and the endpoint is disabled."""
    await store.schedule_deliveries(store.now(), 10)
    ((delivery, *_),) = await store.claim_deliveries("w", 10, 60_000)
    gone = Attempt(event_id, store.now(), "webhook", "undeliverable", endpoint.id, "HTTP 410")
    await store.finish_deliveries([Finished(delivery, gone, None, None, False, "HTTP 410")])


async def test_an_undeliverable_event_is_offered_again_with_its_history(
    store: Store, clock: ManualClock
) -> None:
    alice = await add_agent(store, "alice")
    endpoint = Endpoint(new_id("end_"), alice.id, Kind.WEBHOOK, "https://x", "s", store.now())
    await store.put_endpoint(endpoint)
    (event_id,) = await publish(store, "alice", 1)
    with pytest.raises(Conflict, match="pending already"):
        await store.redeliver(event_id)
    await give_up(store, endpoint, event_id)
    assert await store.next_attempts([endpoint.id]) == {}
    clock.advance(5)
    again = await store.redeliver(event_id)
    assert again is not None and again.status is EventStatus.PENDING
    assert again.status_at == store.now()
    (delivery,) = await store.deliveries(event_id)
    assert (delivery.state, delivery.attempts, delivery.next_at) == ("waiting", 0, store.now())
    assert await store.next_attempts([endpoint.id]) == {endpoint.id: store.now()}
    assert [a.outcome for a in await store.attempts(event_id)] == ["undeliverable"]
    # Waiting for its endpoint, disabled: enabled, it is claimed.
    assert await store.claim_deliveries("w", 10, 60_000) == []
    disabled = await store.get_endpoint(endpoint.id)
    assert disabled is not None and disabled.state is State.DISABLED
    assert await store.enable_endpoint(endpoint.id, disabled.disabled_reason or "")
    ((claimed, *_),) = await store.claim_deliveries("w", 10, 60_000)
    assert claimed.event_id == event_id


async def test_a_finished_event_is_offered_again_its_ttl_starting_afresh(
    store: Store, clock: ManualClock
) -> None:
    alice = await add_agent(store, "alice")
    delivered, expiring = await publish(store, "alice", 2, ttl_s=10)
    await store.claim(alice.id, "c", 1, 60_000, "heartbeat")
    await store.ack(alice.id, ids=[delivered])
    clock.advance(11)
    assert await store.expire() == 1
    for event_id in (delivered, expiring):
        again = await store.redeliver(event_id)
        assert again is not None and again.status is EventStatus.PENDING
        assert again.expires_at == store.now() + 10_000
    assert [e.id for e in await store.read_open(alice.id, 0, 10)] == [delivered, expiring]
    assert await store.redeliver(new_id("evt_")) is None


async def test_a_failing_endpoint_is_counted_failing_not_active(store: Store) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    now = store.now()
    await store.put_endpoint(
        Endpoint(new_id("end_"), alice.id, Kind.WEBHOOK, "https://a", "s", now)
    )
    failing = Endpoint(
        new_id("end_"), bob.id, Kind.WEBHOOK, "https://b", "s", now, failing_since=now - 1000
    )
    await store.put_endpoint(failing)
    assert (await store.stats(top=1)).to_json()["endpoints"] == [
        {"kind": "webhook", "state": "active", "count": 1},
        {"kind": "webhook", "state": "failing", "count": 1},
    ]
    assert sorted((await store.gauges()).endpoints) == [
        ("webhook", "active", 1),
        ("webhook", "failing", 1),
    ]
