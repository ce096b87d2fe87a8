"""A drain's attempts on SQLite: one row per run of a step, named by its events, and still every
event's history, count and prune as one row per event kept them."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from herald import open_store
from herald.ids import new_id
from herald.models import Agent, Attempt, NewEvent
from herald.store.base import Store
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "herald.db"


@pytest.fixture
async def store(path: Path, clock: ManualClock) -> AsyncIterator[Store]:
    opened = await open_store(f"sqlite:///{path}", clock=clock)
    try:
        yield opened
    finally:
        await opened.close()


def rows(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        (count,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        return int(count)
    finally:
        conn.close()


async def alice_with(store: Store, count: int) -> tuple[Agent, list[str]]:
    agent = Agent(new_id("agt_"), "alice", "hash", store.now())
    await store.create_agent(agent)
    published = await store.append(
        [NewEvent(to="alice", type="t", text=str(n)) for n in range(count)]
    )
    return agent, [p.event.id for p in published]


async def test_a_drain_step_writes_a_row_per_run_not_per_event(
    store: Store, path: Path, clock: ManualClock
) -> None:
    alice, ids = await alice_with(store, 150)
    first = await store.claim(alice.id, "c", 100, 60_000, "heartbeat")
    clock.advance(1)
    second = await store.claim(alice.id, "c", 100, 60_000, "heartbeat", ack_up_to=first[-1].seq)
    assert len(first) == 100 and len(second) == 50
    # Two leases and one acknowledgement of 100: three rows, none per event.
    assert rows(path, "attempt_runs") == 3
    assert rows(path, "attempts") == 0
    assert [(a.mechanism, a.outcome) for a in await store.attempts(ids[0])] == [
        ("heartbeat", "leased"),
        ("ack", "delivered"),
    ]
    assert [(a.mechanism, a.outcome) for a in await store.attempts(ids[120])] == [
        ("heartbeat", "leased")
    ]
    recorded = dict(((m, o), n) for m, o, n in (await store.stats()).attempts_recorded)
    assert recorded == {("heartbeat", "leased"): 150, ("ack", "delivered"): 100}


async def test_an_event_s_history_keeps_the_order_written_across_rows_and_runs(
    store: Store,
) -> None:
    # The clock stands still: only the order of writing places the runs among the event's own
    # attempt rows.
    alice, (event_id,) = await alice_with(store, 1)
    failed = Attempt(event_id, store.now(), "channel", "failed", "s1", "gone")
    await store.record_attempts([failed])
    (leased,) = await store.claim(alice.id, "c", 10, 60_000, "heartbeat")
    await store.record_attempts([failed])
    await store.ack(alice.id, up_to_seq=leased.seq, consumer="c")
    assert [(a.mechanism, a.outcome) for a in await store.attempts(event_id)] == [
        ("channel", "failed"),
        ("heartbeat", "leased"),
        ("channel", "failed"),
        ("ack", "delivered"),
    ]


async def test_a_run_is_pruned_once_none_of_its_events_is_left(
    store: Store, path: Path, clock: ManualClock
) -> None:
    alice, ids = await alice_with(store, 3)
    await store.claim(alice.id, "c", 3, 60_000, "heartbeat")  # a run of all three
    clock.advance(1)
    await store.ack(alice.id, ids=ids[:2], consumer="c")  # a run of two
    clock.advance(60)
    assert await store.prune(store.now()) == 2
    # The acknowledgement's run named only pruned events: gone. The lease's names the open one.
    assert rows(path, "attempt_runs") == 1
    assert [(a.mechanism, a.outcome) for a in await store.attempts(ids[2])] == [
        ("heartbeat", "leased")
    ]
    await store.ack(alice.id, ids=ids[2:], consumer="c")
    clock.advance(60)
    assert await store.prune(store.now()) == 1
    assert rows(path, "attempt_runs") == 0


async def test_an_agent_s_runs_go_with_it(store: Store, path: Path) -> None:
    alice, _ = await alice_with(store, 2)
    await store.claim(alice.id, "c", 2, 60_000, "heartbeat")
    assert rows(path, "attempt_runs") == 1
    assert await store.delete_agent(alice.id)
    assert rows(path, "attempt_runs") == 0
