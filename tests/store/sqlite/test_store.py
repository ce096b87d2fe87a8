"""What the SQLite store does because one writer serves every write: a large record of pushes is
written a few pushes per transaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from herald.ids import new_id
from herald.models import Agent, Attempt, EventStatus, NewEvent
from herald.store.sqlite.store import PUSHES_PER_WRITE, SQLiteStore

pytestmark = pytest.mark.anyio


async def test_a_large_record_of_pushes_is_written_a_few_pushes_per_transaction(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(str(tmp_path / "herald.db"))
    await store.open()
    try:
        alice = Agent(new_id("agt_"), "alice", "hash-alice", store.now())
        await store.create_agent(alice)
        count = 3 * PUSHES_PER_WRITE
        published = await store.append(
            [NewEvent(to="alice", type="note", text=f"event {n}") for n in range(count)]
        )
        start = (await store.journal_bounds()).head
        now = store.now()
        await store.record_pushes(
            [(alice.id, Attempt(p.event.id, now, "events.stream", "sent", "s")) for p in published]
        )
        # A row per transaction: a publish that comes meanwhile goes between two (the worker's
        # order, tests/store/sqlite/test_worker.py).
        rows = (await store.read_journal(start, 100)).rows
        assert [len(row.entry.attempts[0].event_ids) for row in rows] == [PUSHES_PER_WRITE] * 3
        for p in published:
            pushed = await store.get_event(p.event.id)
            assert pushed is not None and pushed.status is EventStatus.SENT
            assert [a.session for a in await store.attempts(p.event.id)] == ["s"]
    finally:
        await store.close()
