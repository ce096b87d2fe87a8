"""What the SQLite store does because one writer serves every write: a large record of pushes is
written a few pushes per transaction, and a publish that comes meanwhile goes between them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from herald.ids import new_id
from herald.models import Agent, Attempt, EventStatus, NewEvent
from herald.store.sqlite.store import PUSHES_PER_WRITE, SQLiteStore

pytestmark = pytest.mark.anyio


async def test_a_publish_goes_before_the_end_of_a_large_record_of_pushes(tmp_path: Path) -> None:
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
        recording = asyncio.ensure_future(
            store.record_pushes(
                [
                    (alice.id, Attempt(p.event.id, now, "events.stream", "sent", "s"))
                    for p in published
                ]
            )
        )
        await asyncio.sleep(0)  # the record's first part is queued
        await store.append([NewEvent(to="alice", type="note", text="late")])
        await asyncio.wait_for(recording, 10)

        kinds = [row.kind for row in (await store.read_journal(start, 100)).rows]
        assert kinds.count("pushes") == 3
        assert kinds[-2:] == ["pushes", "pushes"]  # the publish did not wait for the whole record
        for p in published:
            pushed = await store.get_event(p.event.id)
            assert pushed is not None and pushed.status is EventStatus.SENT
            assert [a.session for a in await store.attempts(p.event.id)] == ["s"]
    finally:
        await store.close()
