"""The push windows on SQLite: the writer's connection remembers the windows it opened or read
(a held publish then needs no statement to find its window), and forgets them whenever a
rollback, of a job alone, of one in a group or of a joined run, may have undone one."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from herald import Hub
from herald.models import Hold, HoldReason, NewEvent
from herald.store import open_store
from herald.store.sqlite.push_windows import hold
from herald.store.sqlite.worker import Joinable, Outcome, Worker
from tests.store.sqlite.test_worker import _holding, _queued

pytestmark = pytest.mark.anyio

NOW = 1_800_000_000_000
RULE = 'digest ["ci.*"]'


async def _agent(path: Path) -> tuple[str, str]:
    """A store at ``path`` with one agent: its handle and id."""
    async with Hub(await open_store(f"sqlite:///{path}")) as hub:
        agent, _ = await hub.create_agent("digested")
    return agent.handle, agent.id


def _holding_one(handle: str, agent_id: str, at: int) -> Callable[[sqlite3.Connection], NewEvent]:
    """An operation that stores nothing but decides the window of one event of the agent's
    digest published at ``at``: the first of a burst opens one (and is not held by it)."""

    def decide(conn: sqlite3.Connection) -> NewEvent:
        event = NewEvent(handle, "ci.a", "x", hold=Hold(HoldReason.DIGEST, RULE, at + 60_000))
        (decided,) = hold(conn, [event], {handle: agent_id}, [at])
        return decided

    return decide


def _undone(decide: Callable[[sqlite3.Connection], NewEvent]) -> Callable[..., NewEvent]:
    def fail(conn: sqlite3.Connection, *_: object) -> NewEvent:
        decide(conn)  # opens a window, then the operation fails: the window is undone
        raise ValueError("undone")

    return fail


def _windows(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        count: int = conn.execute("SELECT count(*) FROM push_windows").fetchone()[0]
        return count
    finally:
        conn.close()


async def test_a_window_found_or_opened_is_remembered_and_holds_the_rest_of_the_burst(
    tmp_path: Path,
) -> None:
    handle, agent_id = await _agent(tmp_path / "s.db")
    worker = Worker(str(tmp_path / "s.db"), "FULL")
    await worker.start()
    try:
        first = await worker.run(_holding_one(handle, agent_id, NOW))
        second = await worker.run(_holding_one(handle, agent_id, NOW + 1_000))
        after = await worker.run(_holding_one(handle, agent_id, NOW + 60_000))
    finally:
        await worker.stop()
    assert first.held_by is None and second.held_by is not None
    assert after.held_by is None  # the window ended: a new burst opens its own
    assert _windows(tmp_path / "s.db") == 2


@pytest.mark.parametrize("where", ["alone", "in a group", "joined"])
async def test_a_window_a_rollback_undid_is_not_remembered(tmp_path: Path, where: str) -> None:
    handle, agent_id = await _agent(tmp_path / "s.db")
    worker = Worker(str(tmp_path / "s.db"), "FULL")
    await worker.start()
    try:
        undone = _undone(_holding_one(handle, agent_id, NOW))
        if where == "alone":
            with pytest.raises(ValueError):
                await worker.run(undone)
        elif where == "in a group":  # rolled back to its own savepoint
            holding, gate = await _holding(worker)
            failing = asyncio.ensure_future(worker.run(undone))
            beside = asyncio.ensure_future(worker.run(lambda conn: None))
            await _queued(failing, beside)
            gate.set()
            await holding
            with pytest.raises(ValueError):
                await failing
            await beside
        else:  # a joined run that fails is undone, then each is run alone
            kind: Joinable[int, None] = Joinable(
                alone=lambda conn, _: None, together=_failing(undone)
            )
            holding, gate = await _holding(worker)
            joined = [asyncio.ensure_future(worker.run_joinable(kind, n)) for n in range(2)]
            await _queued(*joined)
            gate.set()
            await asyncio.gather(holding, *joined)
        later = await worker.run(_holding_one(handle, agent_id, NOW + 1_000))
    finally:
        await worker.stop()
    assert later.held_by is None  # the first of a burst: no window was open
    assert _windows(tmp_path / "s.db") == 1


def _failing(
    undone: Callable[..., NewEvent],
) -> Callable[[sqlite3.Connection, Sequence[int]], list[Outcome]]:
    def together(conn: sqlite3.Connection, items: Sequence[int]) -> list[Outcome]:
        undone(conn)
        return []

    return together
