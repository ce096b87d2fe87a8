"""The SQLite worker's order of work: what may wait (``durable=False``, a push's record) waits
for what is queued beside it, and is never dropped."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from herald.store.sqlite.worker import Worker

pytestmark = pytest.mark.anyio


def _noting(ran: list[str], name: str) -> Callable[[sqlite3.Connection], None]:
    def operation(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS notes (name TEXT)")
        conn.execute("INSERT INTO notes VALUES (?)", (name,))
        ran.append(name)

    return operation


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


async def _queued(*operations: asyncio.Task[None]) -> None:
    """Let each task run to its first wait: its job is then in the worker's queue."""
    await asyncio.sleep(0)
    assert not any(task.done() for task in operations)


async def test_an_operation_that_may_wait_runs_after_those_queued_beside_it(
    tmp_path: Path,
) -> None:
    worker = Worker(str(tmp_path / "w.db"), "FULL")
    await worker.start()
    try:
        ran: list[str] = []
        holding, gate = await _holding(worker)
        record = asyncio.ensure_future(worker.run(_noting(ran, "record"), durable=False))
        publish = asyncio.ensure_future(worker.run(_noting(ran, "publish")))
        await _queued(record, publish)
        gate.set()
        await asyncio.wait_for(asyncio.gather(holding, record, publish), 10)
        assert ran == ["publish", "record"]
    finally:
        await worker.stop()


async def test_an_operation_that_may_wait_lets_the_loop_queue_work_before_it_starts(
    tmp_path: Path,
) -> None:
    # The worker's pause hands the event loop the GIL; here the loop publishes meanwhile.
    loop = asyncio.get_running_loop()
    ran: list[str] = []
    pauses: list[str] = []
    publishes: list[asyncio.Future[None]] = []
    queued = threading.Event()

    def publish(worker: Worker) -> None:
        publishes.append(asyncio.ensure_future(worker.run(_noting(ran, "publish"))))
        loop.call_soon(queued.set)  # after the task's first step, which queues its job

    def publishing_meanwhile() -> None:
        pauses.append("pause")
        if len(pauses) == 1:
            loop.call_soon_threadsafe(publish, worker)
            assert queued.wait(10)

    worker = Worker(str(tmp_path / "w.db"), "FULL", pause=publishing_meanwhile)
    await worker.start()
    try:
        await asyncio.wait_for(worker.run(_noting(ran, "record"), durable=False), 10)
        await asyncio.wait_for(asyncio.gather(*publishes), 10)
        # Paused again after the publish, with nothing queued then: the record ran.
        assert ran == ["publish", "record"]
        assert pauses == ["pause", "pause"]
    finally:
        await worker.stop()


async def test_an_operation_that_may_wait_runs_though_every_pause_brings_more_work(
    tmp_path: Path,
) -> None:
    # A flood: the loop publishes during every pause. The record still runs, once overdue.
    loop = asyncio.get_running_loop()
    ran: list[str] = []
    publishes: list[asyncio.Future[None]] = []

    def publish(worker: Worker, queued: threading.Event) -> None:
        publishes.append(asyncio.ensure_future(worker.run(_noting(ran, "publish"))))
        loop.call_soon(queued.set)

    def publishing_every_time() -> None:
        queued = threading.Event()
        loop.call_soon_threadsafe(publish, worker, queued)
        assert queued.wait(10)

    worker = Worker(str(tmp_path / "w.db"), "FULL", pause=publishing_every_time)
    await worker.start()
    try:
        await asyncio.wait_for(worker.run(_noting(ran, "record"), durable=False), 10)
        assert ran.count("record") == 1
        assert ran.index("record") > 0  # the publishes that came first went first
    finally:
        await worker.stop()
        await asyncio.gather(*publishes, return_exceptions=True)


async def test_what_was_put_off_runs_before_the_worker_stops(tmp_path: Path) -> None:
    worker = Worker(str(tmp_path / "w.db"), "FULL")
    await worker.start()
    ran: list[str] = []
    holding, gate = await _holding(worker)
    records = [
        asyncio.ensure_future(worker.run(_noting(ran, f"record {n}"), durable=False))
        for n in range(3)
    ]
    publish = asyncio.ensure_future(worker.run(_noting(ran, "publish")))
    await _queued(*records, publish)
    stopping = asyncio.ensure_future(worker.stop())
    gate.set()
    await asyncio.wait_for(asyncio.gather(holding, *records, publish, stopping), 10)
    assert ran == ["publish", "record 0", "record 1", "record 2"]
    conn = sqlite3.connect(tmp_path / "w.db")
    try:
        assert conn.execute("SELECT count(*) FROM notes").fetchone() == (4,)
    finally:
        conn.close()
