"""The counts the store keeps so that the operator's counts read no event or attempt: each
agent's events by status (in its row) and the attempts recorded by mechanism and outcome, kept
exact by every write, and filled by the migration that adds them. On every backend."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from typing import Any

import asyncpg
import pytest

from herald import open_store
from herald.ids import new_id
from herald.models import (
    Agent,
    Attempt,
    Endpoint,
    EventMatch,
    EventStatus,
    Finished,
    Kind,
    NewEvent,
    Reply,
)
from herald.overview import EventQuery
from herald.store import Store, migrations
from herald.store.postgres import schema as postgres_schema
from herald.store.sqlite import schema as sqlite_schema
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio

STATUSES = ("pending", "sent", "delivered", "expired")
KEPT = """
SELECT id, pending_events, sent_events, delivered_events, expired_events, dead_events,
    oldest_open_at
FROM agents
"""
RECOUNTED = """
SELECT a.id, coalesce(c.pending, 0), coalesce(c.sent, 0), coalesce(c.delivered, 0),
    coalesce(c.expired, 0), coalesce(c.dead, 0), (
        SELECT e.created_at FROM events e
        WHERE e.agent_id = a.id AND e.status IN ('pending', 'sent') ORDER BY e.seq LIMIT 1
    )
FROM agents a LEFT JOIN (
    SELECT agent_id,
        sum(CASE WHEN status = 'pending' THEN 1 ELSE 0 END) AS pending,
        sum(CASE WHEN status = 'sent' THEN 1 ELSE 0 END) AS sent,
        sum(CASE WHEN status = 'delivered' THEN 1 ELSE 0 END) AS delivered,
        sum(CASE WHEN status = 'expired' THEN 1 ELSE 0 END) AS expired,
        sum(CASE WHEN status = 'dead' THEN 1 ELSE 0 END) AS dead
    FROM events GROUP BY agent_id
) AS c ON c.agent_id = a.id
"""
ATTEMPTS_KEPT = (
    "SELECT mechanism, outcome, sum(recorded) FROM attempt_counts GROUP BY mechanism, outcome"
)
ATTEMPTS_STORED = "SELECT mechanism, outcome, count(*) FROM attempts GROUP BY mechanism, outcome"
# On SQLite a drain step's attempts are a row each of its runs, which name their events: one
# attempt per event named that is still stored.
SQLITE_ATTEMPTS_STORED = """
SELECT mechanism, outcome, count(*) FROM (
    SELECT mechanism, outcome FROM attempts
    UNION ALL
    SELECT r.mechanism, r.outcome FROM attempt_runs r, json_each(r.event_ids) AS j
    JOIN events e ON e.id = j.value
) GROUP BY mechanism, outcome
"""
# SQLite keeps whether an event is open in a column of its own, which its open events' indexes
# select on: it must say what the status says.
OPEN_FLAG_WRONG = (
    "SELECT id, status, is_open FROM events WHERE is_open <> (status IN ('pending', 'sent'))"
)

# PostgreSQL keeps each agent's oldest open seq in its row, where its drains start to read: it
# must say what the events say.
OLDEST_OPEN_SEQ_WRONG = """
SELECT id, oldest_open_seq FROM agents a WHERE oldest_open_seq IS DISTINCT FROM (
    SELECT min(e.seq) FROM events e WHERE e.agent_id = a.id AND e.status IN ('pending', 'sent')
)
"""


async def query(store_url: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows read straight from the store's database, beside the store."""
    if store_url.startswith("sqlite"):
        conn = sqlite3.connect(store_url.removeprefix("sqlite:///"))
        try:
            return [tuple(row) for row in conn.execute(sql)]
        finally:
            conn.close()
    pg = await asyncpg.connect(store_url)
    try:
        return [tuple(row) for row in await pg.fetch(sql)]
    finally:
        await pg.close()


Counts = dict[str, tuple[int | None, ...]]


async def kept_and_recounted(store_url: str) -> tuple[Counts, Counts]:
    """Each agent's counts by status and oldest open event's ``created_at``, as its row keeps
    them and as the events table has them now."""

    async def read(sql: str) -> Counts:
        rows = await query(store_url, sql)
        return {row[0]: tuple(None if n is None else int(n) for n in row[1:]) for row in rows}

    return await read(KEPT), await read(RECOUNTED)


async def attempts_kept(store_url: str) -> dict[tuple[str, str], int]:
    return {(m, o): int(n) for m, o, n in await query(store_url, ATTEMPTS_KEPT)}


async def attempts_stored(store_url: str) -> dict[tuple[str, str], int]:
    sql = SQLITE_ATTEMPTS_STORED if store_url.startswith("sqlite") else ATTEMPTS_STORED
    return {(m, o): int(n) for m, o, n in await query(store_url, sql)}


async def add_agent(store: Store, handle: str) -> Agent:
    agent = Agent(new_id("agt_"), handle, f"hash-{handle}", store.now())
    await store.create_agent(agent)
    return agent


def events(*handles: str, ttl_s: float | None = None) -> list[NewEvent]:
    return [NewEvent(to=handle, type="t", text=handle, ttl_s=ttl_s) for handle in handles]


async def test_each_agent_s_counts_follow_every_write_of_its_events(
    store_url: str, store: Store, clock: ManualClock
) -> None:
    async def check(step: str) -> None:
        kept, recounted = await kept_and_recounted(store_url)
        assert kept == recounted, step
        if store_url.startswith("sqlite"):
            assert await query(store_url, OPEN_FLAG_WRONG) == [], step
        else:
            assert await query(store_url, OLDEST_OPEN_SEQ_WRONG) == [], step

    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    carol, dave = await add_agent(store, "carol"), await add_agent(store, "dave")
    await check("agents made")

    # Publishes: a batch to several agents, one event alone, appends that come together (one
    # group on PostgreSQL), a repeated dedupe key (not stored again), a reply routed as an event.
    batch = [p.event for p in await store.append(events("alice", "bob", "alice", "carol") * 3)]
    (alone,) = await store.append(events("dave"))
    await asyncio.gather(*(store.append(events("bob", "dave", ttl_s=5)) for _ in range(4)))
    keyed = [NewEvent(to="carol", type="t", text="once", dedupe_key="k")] * 2
    await store.append(keyed)
    await store.append(keyed[:1])
    reply = Reply(new_id("rpl_"), alone.event.id, dave.id, "ok", "null", store.now())
    await store.add_reply(reply, NewEvent(to="alice", type="reply.received", text="ok"))
    await check("published")

    alices = [e.id for e in batch if e.agent_id == alice.id]
    await store.ack(alice.id, ids=alices[:2])
    await check("acknowledged by id")
    leased = await store.claim(bob.id, "c", 3, 60_000, "heartbeat")
    await check("leased")
    held = await store.claim(bob.id, "c", 3, 60_000, "heartbeat", ack_up_to=leased[-1].seq)
    await check("acknowledged by a drain's cursor")
    # Handed out once and allowed once: the same consumer's next claim (its answer lost, say)
    # buries it (the rest are held by another); a poll does the same.
    store.max_deliveries = 1
    (poisoned,) = await store.claim(bob.id, "d", 1, 60_000, "heartbeat")
    assert await store.claim(bob.id, "d", 1, 60_000, "heartbeat") == []
    await check("died in a claim")
    polled = await store.poll(
        bob.id, "c", 3, 60_000, cursor=leased[-1].seq, match=EventMatch(), scan=10
    )
    assert polled.events == []
    for gone in [poisoned, *held]:
        died = await store.get_event(gone.id)
        assert died is not None and died.status is EventStatus.DEAD
    await check("died in a poll")
    store.max_deliveries = 0
    await store.take(dave.id, 2, "heartbeat", "s")
    await check("taken")
    carols = [e.id for e in batch if e.agent_id == carol.id]
    await store.mark_sent(carol.id, carols[:2])
    await store.record_pushes(
        [(alice.id, Attempt(alices[2], store.now(), "stream", "sent", "s1", None))]
    )
    await check("sent")
    # Two streams of carol's push the same pending event, and one event already sent: each
    # counted once.
    now = store.now()
    await store.record_pushes(
        [(carol.id, Attempt(carols[2], now, "stream", "sent", stream, None)) for stream in "ab"]
        + [(alice.id, Attempt(alices[2], now, "stream", "sent", "s2", None))]
    )
    await check("pushed twice in one record")
    await store.ack(carol.id, ids=carols[:1])  # sent, then delivered
    await check("a sent event acknowledged")

    # One batch of the worker's: a webhook delivers two of carol's events (sent ones) and all of
    # alice's (pending and sent); carol's others become sent (pending ones, as OpenClaw's do).
    for agent in (carol, alice):
        endpoint = Endpoint(new_id("end_"), agent.id, Kind.WEBHOOK, "https://x", "s", store.now())
        await store.put_endpoint(endpoint)
    await store.schedule_deliveries(store.now(), 20)
    claimed = await store.claim_deliveries("w", 20, 60_000, per_endpoint=20)
    carols_claimed = [item for item in claimed if item[2].agent_id == carol.id]
    alices_claimed = [item for item in claimed if item[2].agent_id == alice.id]
    assert len(carols_claimed) > 2 and alices_claimed
    finished = [
        Finished(
            delivery,
            Attempt(event.id, store.now(), "webhook", "ok", None, None),
            None,
            "delivered" if n < 2 or event.agent_id == alice.id else "sent",
            True,
        )
        for n, (delivery, _, event, _) in enumerate(carols_claimed + alices_claimed)
    ]
    await store.finish_deliveries(finished)
    await check("delivered by a webhook")

    clock.advance(6)
    assert await store.expire() > 0
    await check("expired by the sweep")

    expired = await store.list_events(EventQuery(status=EventStatus.EXPIRED))
    await store.redeliver(expired[0].id)
    await store.redeliver(alices[0])
    await store.redeliver(poisoned.id)  # dead
    await check("redelivered")

    # Schedules: stored scheduled (counted nowhere), one cancelled, a pending one recalled, the
    # rest made pending with their agents' next seqs when due.
    later = [replace(e, deliver_at=store.now() + 1_000) for e in events("alice", "bob", "alice")]
    scheduled = [p.event for p in await store.schedule(later)]
    await check("scheduled")
    (fresh,) = await store.append(events("carol"))
    await store.cancel(scheduled[0].id)
    await store.cancel(fresh.event.id)
    await check("cancelled and recalled")
    clock.advance(1)
    assert {e.id for e in await store.release_due(10)} == {e.id for e in scheduled[1:]}
    await check("due")

    clock.advance(60)
    assert await store.prune(store.now()) > 0
    await check("finished events pruned")

    (taken, _) = await store.append(events("dave", "dave"))
    await store.ack(dave.id, ids=[taken.event.id])
    assert await store.delete_agent(dave.id)
    await check("an agent deleted with its events")
    kept, _ = await kept_and_recounted(store_url)
    assert dave.id not in kept
    assert sum(n or 0 for counts in kept.values() for n in counts[:5]) > 0
    assert any(counts[5] is not None for counts in kept.values())


async def test_the_stats_read_the_kept_counts(store: Store, clock: ManualClock) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    await store.append(events("alice", "alice", "alice", "bob"))
    await store.append(events("bob", ttl_s=1))
    (acked, *_) = await store.claim(alice.id, "c", 1, 60_000, "heartbeat")
    await store.ack(alice.id, ids=[acked.id])
    clock.advance(2)  # bob's second event ran out; the sweep has not marked it yet
    stats = await store.stats()
    assert stats.events == {
        "pending": 4,
        "sent": 0,
        "delivered": 1,
        "expired": 0,
        "dead": 0,
        "scheduled": 0,
        "cancelled": 0,
    }
    assert stats.top_pending == [(alice.id, "alice", 2), (bob.id, "bob", 1)]
    (bob_summary,) = await store.agent_summaries(bob.id)
    assert bob_summary.pending == 1
    assert await store.expire() == 1
    assert (await store.stats()).events["expired"] == 1


async def test_the_oldest_open_event_is_the_oldest_first_open_event_of_an_agent(
    store: Store, clock: ManualClock
) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    assert (await store.stats()).oldest_pending is None
    await store.append(events("bob", ttl_s=1))
    clock.advance(2)  # bob's first event ran out: not open, though the sweep has not marked it
    first, second = await store.append(events("alice", "alice"))
    clock.advance(1)
    (later,) = await store.append(events("bob"))

    async def oldest() -> tuple[str, str, str, int] | None:
        return (await store.stats()).oldest_pending

    assert await oldest() == (first.event.id, alice.id, "alice", first.event.created_at)
    await store.ack(alice.id, ids=[first.event.id])
    assert await oldest() == (second.event.id, alice.id, "alice", second.event.created_at)
    await store.ack(alice.id, ids=[second.event.id])
    assert await oldest() == (later.event.id, bob.id, "bob", later.event.created_at)


async def test_attempts_are_counted_as_recorded_and_stay_counted_once_pruned(
    store_url: str, store: Store, clock: ManualClock
) -> None:
    alice = await add_agent(store, "alice")
    await store.append(events("alice", "alice", "alice"))
    await store.claim(alice.id, "c", 2, 60_000, "heartbeat")
    await store.take(alice.id, 1, "heartbeat", "s")
    open_event = (await store.read_open(alice.id, 0, 10))[0]
    for _ in range(2):  # a row each on PostgreSQL, until the upkeep sums them up
        await store.record_attempts(
            [Attempt(open_event.id, store.now(), "channel", "failed", "s1", "gone")]
        )
    counted = {
        ("heartbeat", "leased"): 2,
        ("heartbeat", "delivered"): 1,
        ("channel", "failed"): 2,
    }
    assert await attempts_kept(store_url) == counted == await attempts_stored(store_url)
    clock.advance(60)
    assert await store.prune(store.now()) == 1  # the taken event, with its attempt
    assert await attempts_stored(store_url) != counted
    assert await attempts_kept(store_url) == counted
    # The counts are summed up again by the upkeep: one row each.
    assert len(await query(store_url, "SELECT * FROM attempt_counts")) == len(counted)
    stats = await store.stats()
    assert sorted(stats.attempts_recorded) == sorted((m, o, n) for (m, o), n in counted.items())


def counts_migration(backend: str) -> int:
    """The version of the migration that adds the counts, whatever its number."""
    return next(m.version for m in migrations.load(backend) if m.name == "event_counts")


OLD_AGENTS = [("agt_1", "alice"), ("agt_2", "bob"), ("agt_3", "carol")]
OLD_EVENTS = [
    ("evt_1", "agt_1", 1, "pending"),
    ("evt_2", "agt_1", 2, "sent"),
    ("evt_3", "agt_1", 3, "delivered"),
    ("evt_4", "agt_2", 1, "expired"),
    ("evt_5", "agt_2", 2, "delivered"),
    ("evt_6", "agt_2", 3, "pending"),
    ("evt_7", "agt_2", 4, "pending"),
]
OLD_ATTEMPTS = [("evt_3", "heartbeat", "delivered"), ("evt_5", "webhook", "ok")] * 2


async def test_the_migration_counts_what_a_store_holds_already(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The store as it was before the migration that adds the counts, with events and attempts.
    every = migrations.load
    backend = "sqlite" if store_url.startswith("sqlite") else "postgres"
    cut = counts_migration(backend)
    monkeypatch.setattr(
        migrations, "load", lambda backend: [m for m in every(backend) if m.version < cut]
    )
    agents = ", ".join(f"('{i}', '{h}', 'hash-{h}', 0, 0)" for i, h in OLD_AGENTS)
    stored = ", ".join(
        f"('{i}', '{a}', {seq}, 't', 'x', 'null', {seq * 10}, '{s}')" for i, a, seq, s in OLD_EVENTS
    )
    tried = ", ".join(f"('{e}', 0, '{m}', '{o}')" for e, m, o in OLD_ATTEMPTS)
    inserts = [
        f"INSERT INTO agents (id, handle, key_hash, created_at, last_seq) VALUES {agents}",
        f"INSERT INTO events (id, agent_id, seq, type, text, data, created_at, status)"
        f" VALUES {stored}",
        f"INSERT INTO attempts (event_id, at, mechanism, outcome) VALUES {tried}",
    ]
    if store_url.startswith("sqlite"):
        conn = sqlite3.connect(store_url.removeprefix("sqlite:///"))
        sqlite_schema.migrate(conn)
        for sql in inserts:
            conn.execute(sql)
        conn.commit()
        conn.close()
    else:
        pg = await asyncpg.connect(store_url)
        await postgres_schema.migrate(pg)
        for sql in inserts:
            await pg.execute(sql)
        await pg.close()
    monkeypatch.undo()

    opened = await open_store(store_url)
    try:  # the events closed before the migrations are not open after them
        assert [e.id for e in await opened.read_open("agt_1", 0, 10)] == ["evt_1", "evt_2"]
        assert [e.id for e in await opened.read_open("agt_2", 0, 10)] == ["evt_6", "evt_7"]
    finally:
        await opened.close()
    kept, recounted = await kept_and_recounted(store_url)
    assert kept == recounted
    if not store_url.startswith("sqlite"):
        assert await query(store_url, OLDEST_OPEN_SEQ_WRONG) == []
    assert kept == {
        "agt_1": (1, 1, 1, 0, 0, 10),
        "agt_2": (2, 0, 1, 1, 0, 30),
        "agt_3": (0, 0, 0, 0, 0, None),
    }
    assert await attempts_kept(store_url) == {("heartbeat", "delivered"): 2, ("webhook", "ok"): 2}
