"""The SQLite store's reader thread: the reads streams and listings make go on while the writer
waits (on the disk, or here on another process's write lock), and see each write once it was
answered."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from herald import Hub
from herald.feed import FeedMatch

pytestmark = pytest.mark.anyio


async def test_reads_are_answered_while_the_writer_waits_and_see_each_answered_write(
    tmp_path: Path,
) -> None:
    path = tmp_path / "herald.db"
    async with Hub.from_url(f"sqlite:///{path}") as hub:
        alice, _ = await hub.create_agent("alice")
        first = (await hub.publish("alice", "note", "one")).event
        reader = await hub.feed.open(None, FeedMatch())
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another writer holds the file's write lock
        try:
            publishing = asyncio.create_task(hub.publish("alice", "note", "two"))
            async with asyncio.timeout(10):  # each would wait 30 s behind the writer
                assert [e.id for e in await hub.open_events(alice.id, 0, 10)] == [first.id]
                assert (await hub.get_agent(alice.id)).handle == "alice"
                assert await reader.read() == [] and reader.caught_up
                assert (await hub.overview.stats()).events["pending"] == 1
            assert not publishing.done()
        finally:
            other.execute("ROLLBACK")
            other.close()
        second = (await publishing).event
        assert [e.id for e in await hub.open_events(alice.id, 0, 10)] == [first.id, second.id]
        assert [item.data["event"]["id"] for item in await reader.read()] == [second.id]
