"""The SQLite worker: operations queued together run in one transaction, in order, each answered
with its own outcome; operations of a joinable kind queued one after another run as one; and
nothing queued is dropped when it stops."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from herald.errors import NotFound
from herald.store.sqlite.worker import Joinable, Outcome, Worker

pytestmark = pytest.mark.anyio


def _noting(ran: list[str], name: str) -> Callable[[sqlite3.Connection], str]:
    def operation(conn: sqlite3.Connection) -> str:
        conn.execute("CREATE TABLE IF NOT EXISTS notes (name TEXT)")
        conn.execute("INSERT INTO notes VALUES (?)", (name,))
        ran.append(name)
        return name

    return operation


def _notes(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [name for (name,) in conn.execute("SELECT name FROM notes ORDER BY rowid")]
    finally:
        conn.close()


async def _holding(worker: Worker) -> tuple[asyncio.Future[None], threading.Event]:
    """An operation the worker runs until the gate returned opens: what is queued meanwhile
    waits, and is taken together once it opens."""
    inside, gate = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        inside.set()
        gate.wait(10)

    holding = asyncio.ensure_future(worker.run(hold))
    assert await asyncio.to_thread(inside.wait, 10)
    return holding, gate


async def _queued(*operations: asyncio.Future[object]) -> None:
    """Let each task run to its first wait: its job is then in the worker's queue."""
    await asyncio.sleep(0)
    assert not any(task.done() for task in operations)


class Notes:
    """A joinable kind of operation that notes names, and records how it was called."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.kind = Joinable(self.alone, self.together)

    def alone(self, conn: sqlite3.Connection, name: str) -> str:
        self.calls.append(("alone", [name]))
        if name.startswith("bad"):
            raise ValueError(name)
        return _noting([], name)(conn)

    def together(self, conn: sqlite3.Connection, names: Sequence[str]) -> list[Outcome]:
        self.calls.append(("together", list(names)))
        if any(name.startswith("bad") for name in names):
            _noting([], "half done")(conn)  # undone: the worker runs each alone
            raise ValueError("one of them")
        return [
            (False, NotFound(name))
            if name.startswith("refused")
            else (True, _noting([], name)(conn))
            for name in names
        ]


async def test_operations_queued_together_run_in_order_each_with_its_own_outcome(
    tmp_path: Path,
) -> None:
    worker = Worker(str(tmp_path / "w.db"), "FULL")
    await worker.start()
    try:
        ran: list[str] = []
        holding, gate = await _holding(worker)

        def failing(conn: sqlite3.Connection) -> None:
            _noting(ran, "failed")(conn)
            raise NotFound("nothing here")

        first = asyncio.ensure_future(worker.run(_noting(ran, "first")))
        failed = asyncio.ensure_future(worker.run(failing))
        second = asyncio.ensure_future(worker.run(_noting(ran, "second")))
        await _queued(first, failed, second)
        gate.set()
        await asyncio.wait_for(holding, 10)
        assert await asyncio.wait_for(first, 10) == "first"
        with pytest.raises(NotFound):
            await asyncio.wait_for(failed, 10)
        assert await asyncio.wait_for(second, 10) == "second"
        assert ran == ["first", "failed", "second"]
    finally:
        await worker.stop()
    assert _notes(tmp_path / "w.db") == ["first", "second"]  # the failure undid its own alone


async def test_joinable_operations_queued_one_after_another_run_as_one(tmp_path: Path) -> None:
    notes = Notes()
    worker = Worker(str(tmp_path / "w.db"), "FULL")
    await worker.start()
    try:
        ran: list[str] = []
        holding, gate = await _holding(worker)
        joined = [
            asyncio.ensure_future(worker.run_joinable(notes.kind, name))
            for name in ("a", "refused b", "c")
        ]
        between = asyncio.ensure_future(worker.run(_noting(ran, "between")))
        after = asyncio.ensure_future(worker.run_joinable(notes.kind, "d"))
        await _queued(*joined, between, after)
        gate.set()
        await asyncio.wait_for(holding, 10)
        outcomes = await asyncio.gather(*joined, between, after, return_exceptions=True)
    finally:
        await worker.stop()
    assert outcomes[0] == "a" and outcomes[2] == "c"
    assert isinstance(outcomes[1], NotFound)  # refused to its own caller alone
    assert outcomes[3:] == ["between", "d"]
    # An operation of another kind between them ends a run: the order is kept.
    assert notes.calls == [("together", ["a", "refused b", "c"]), ("alone", ["d"])]
    assert _notes(tmp_path / "w.db") == ["a", "c", "between", "d"]


async def test_each_job_of_a_group_is_told_its_committed_result_before_any_is_answered(
    tmp_path: Path,
) -> None:
    """A publish's events reach the live sessions and streams before any publish committed with
    it is answered: their pushes do not wait behind those answers."""
    notes = Notes()
    worker = Worker(str(tmp_path / "w.db"), "FULL")
    await worker.start()
    try:
        told: list[str] = []
        holding, gate = await _holding(worker)
        joined = [
            asyncio.ensure_future(worker.run_joinable(notes.kind, name, told.append))
            for name in ("a", "refused b", "c")
        ]
        await _queued(*joined)
        gate.set()
        await asyncio.wait_for(holding, 10)
        first, *_ = await asyncio.wait(joined, return_when=asyncio.FIRST_COMPLETED)
        told_when_first_answered = list(told)
        await asyncio.gather(*joined, return_exceptions=True)
    finally:
        await worker.stop()
    assert first  # one was answered, and by then every committed result was told
    assert told_when_first_answered == ["a", "c"]  # not the refused one
    assert told == ["a", "c"]


async def test_a_joined_run_that_fails_runs_each_alone_and_fails_only_its_cause(
    tmp_path: Path,
) -> None:
    notes = Notes()
    worker = Worker(str(tmp_path / "w.db"), "FULL")
    await worker.start()
    try:
        holding, gate = await _holding(worker)
        joined = [
            asyncio.ensure_future(worker.run_joinable(notes.kind, name))
            for name in ("a", "bad b", "c")
        ]
        await _queued(*joined)
        gate.set()
        await asyncio.wait_for(holding, 10)
        outcomes = await asyncio.gather(*joined, return_exceptions=True)
    finally:
        await worker.stop()
    assert outcomes[0] == "a" and outcomes[2] == "c"
    assert isinstance(outcomes[1], ValueError)
    assert notes.calls == [
        ("together", ["a", "bad b", "c"]),
        ("alone", ["a"]),
        ("alone", ["bad b"]),
        ("alone", ["c"]),
    ]
    assert _notes(tmp_path / "w.db") == ["a", "c"]  # nothing of the failed run is left


def _synchronous(conn: sqlite3.Connection) -> int:
    """The ``synchronous`` mode the transaction commits with: 1 NORMAL, 2 FULL."""
    return int(conn.execute("PRAGMA synchronous").fetchone()[0])


async def test_writes_that_need_not_wait_for_the_disk_commit_without_a_flush_alone(
    tmp_path: Path,
) -> None:
    """Records whose loss costs only a push sent again hold the writer for no flush, unless a
    write that must last is in the same transaction; then the store's mode is back."""
    worker = Worker(str(tmp_path / "w.db"), "FULL")
    await worker.start()
    try:
        holding, gate = await _holding(worker)
        light = [asyncio.ensure_future(worker.run(_synchronous, durable=False)) for _ in "ab"]
        await _queued(*light)
        gate.set()
        await asyncio.wait_for(holding, 10)
        assert await asyncio.wait_for(asyncio.gather(*light), 10) == [1, 1]

        holding, gate = await _holding(worker)
        mixed = [
            asyncio.ensure_future(worker.run(_synchronous, durable=False)),
            asyncio.ensure_future(worker.run(_synchronous)),
        ]
        await _queued(*mixed)
        gate.set()
        await asyncio.wait_for(holding, 10)
        assert await asyncio.wait_for(asyncio.gather(*mixed), 10) == [2, 2]
        assert await asyncio.wait_for(worker.run(_synchronous), 10) == 2
    finally:
        await worker.stop()


async def test_callers_are_answered_though_a_journal_listener_fails(tmp_path: Path) -> None:
    def failing_listener() -> None:
        raise RuntimeError("a listener's bug")

    loop = asyncio.get_running_loop()
    reported: list[object] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context.get("exception")))
    worker = Worker(str(tmp_path / "w.db"), "FULL", on_journal=failing_listener)
    await worker.start()
    try:

        def journaled(conn: sqlite3.Connection) -> str:
            from herald.store.journal import note_written

            note_written()
            return "done"

        assert await asyncio.wait_for(worker.run(journaled), 10) == "done"
    finally:
        await worker.stop()
        loop.set_exception_handler(None)
    assert [type(error) for error in reported] == [RuntimeError]


async def test_a_failing_then_keeps_no_other_job_untold_nor_any_caller_unanswered(
    tmp_path: Path,
) -> None:
    """One publish's listener that fails must not keep the events of the others committed with
    it from their sessions and streams."""
    loop = asyncio.get_running_loop()
    reported: list[object] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context.get("exception")))
    notes = Notes()
    told: list[str] = []

    def failing(_name: str) -> None:
        raise RuntimeError("a listener's bug")

    worker = Worker(str(tmp_path / "w.db"), "FULL")
    await worker.start()
    try:
        holding, gate = await _holding(worker)
        joined = [
            asyncio.ensure_future(worker.run_joinable(notes.kind, "a", failing)),
            asyncio.ensure_future(worker.run_joinable(notes.kind, "b", told.append)),
        ]
        await _queued(*joined)
        gate.set()
        await asyncio.wait_for(holding, 10)
        assert await asyncio.wait_for(asyncio.gather(*joined), 10) == ["a", "b"]
    finally:
        await worker.stop()
        loop.set_exception_handler(None)
    assert told == ["b"]
    assert [type(error) for error in reported] == [RuntimeError]


async def test_what_was_queued_runs_before_the_worker_stops(tmp_path: Path) -> None:
    worker = Worker(str(tmp_path / "w.db"), "FULL")
    await worker.start()
    ran: list[str] = []
    holding, gate = await _holding(worker)
    queued = [asyncio.ensure_future(worker.run(_noting(ran, f"op {n}"))) for n in range(3)]
    await _queued(*queued)
    stopping = asyncio.ensure_future(worker.stop())
    gate.set()
    await asyncio.wait_for(asyncio.gather(holding, *queued, stopping), 10)
    assert ran == ["op 0", "op 1", "op 2"]
    assert _notes(tmp_path / "w.db") == ["op 0", "op 1", "op 2"]
