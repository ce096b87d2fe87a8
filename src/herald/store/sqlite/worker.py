"""The worker thread: it owns the one connection and runs every operation, with group commit.

The worker takes all the operations waiting at that moment and runs them in one transaction, each
inside its own savepoint, then commits once: under load many publishes share one fsync, and each
caller still gets its answer only after the commit that made its write durable.

An operation whose loss in a crash costs nothing (the record of a push: its event stays pending
and is offered again) runs with ``durable=False``, and may wait: while other operations are
queued it is put off (for at most ``PUT_OFF_AT_MOST_S``), then runs in a group of its own, so
that a publish waits behind it only if it comes while it runs. Such a group commits without
waiting for the disk (WAL with synchronous=NORMAL): it does not hold the publishes queued behind
it for an fsync of its own, and the next durable commit syncs its pages too.

Before it starts such a group, the worker lets the event loop run first (``pause``): the group's
first statement would hand the loop the GIL anyway, and wait for it back while holding the
writer, so that whatever the loop published meanwhile waited behind the whole group. Paused
first, what the loop queues meanwhile goes first, and the group starts once a pause brings
nothing (or it is overdue).
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from herald.errors import HeraldError, StoreUnavailable
from herald.store.journal import start_watching, written_in
from herald.store.sqlite.rows import Operation, T
from herald.store.sqlite.schema import migrate

MAX_GROUP = 512
PUT_OFF_AT_MOST_S = 0.25
"""The longest an operation with ``durable=False`` is put off while others keep coming."""


@dataclass
class _Job:
    operation: Operation[Any]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    durable: bool = True
    queued_at: float = field(default_factory=time.monotonic)


class Worker:
    """The thread that runs operations on a SQLite file, a group of them per transaction."""

    def __init__(
        self,
        path: str,
        synchronous: str,
        on_journal: Callable[[], None] = lambda: None,
        pause: Callable[[], None] = lambda: time.sleep(0),
    ) -> None:
        self.path = path
        self.synchronous = synchronous
        self.on_journal = on_journal
        """Called in the event loop after a commit that wrote a journal row."""
        self.pause = pause
        """Called in the worker's thread before it starts an operation that can wait: gives
        the event loop the GIL (``time.sleep(0)`` releases it) so that it can queue work."""
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._open_error: BaseException | None = None

    async def start(self) -> None:
        """Start the thread, which opens the file and applies the migrations.

        Raises:
            StoreUnavailable: the file cannot be opened or migrated.
        """
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._work, name="herald-sqlite", daemon=True)
        self._thread.start()
        await asyncio.to_thread(self._ready.wait)
        if self._open_error is not None:
            self._thread = None
            raise StoreUnavailable(f"cannot open SQLite store {self.path!r}: {self._open_error}")

    async def stop(self) -> None:
        """Run the operations already queued, then close the connection and end the thread."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            await asyncio.to_thread(thread.join)

    async def run(self, operation: Operation[T], *, durable: bool = True) -> T:
        """Run an operation on the connection; answers once the transaction is committed (with
        ``durable=False``, maybe not yet on disk: see the module's docstring).

        Raises:
            StoreUnavailable: the worker is not started, or SQLite failed.
        """
        if self._thread is None:
            raise StoreUnavailable("the store is not open: call open() first")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put(_Job(operation, future, loop, durable))
        try:
            return await future
        except HeraldError:
            raise
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"SQLite store failed: {exc}") from exc

    # The worker thread

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row  # rows are read by column name
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=30000")
        migrate(conn)
        return conn

    def _work(self) -> None:
        try:
            conn = self._connect()
        except (sqlite3.Error, OSError) as exc:
            self._open_error = exc
            self._ready.set()
            return
        self._ready.set()
        put_off: deque[_Job] = deque()
        stopping = paused = False
        try:
            while not stopping or put_off:
                jobs, told_to_stop = self._take(wait=not (put_off or stopping))
                stopping = stopping or told_to_stop
                group = [job for job in jobs if job.durable]
                put_off.extend(job for job in jobs if not job.durable)
                if put_off and not (group or paused or stopping or _overdue(put_off[0])):
                    self.pause()  # then take what came meanwhile: it goes first
                    paused = True
                    continue
                paused = False
                if put_off and (not group or stopping or _overdue(put_off[0])):
                    group.append(put_off.popleft())
                if group:
                    self._serve_group(conn, group)
                del jobs, group  # held while waiting for the next, they would keep answers alive
        finally:
            conn.close()

    def _take(self, *, wait: bool) -> tuple[list[_Job], bool]:
        """The jobs queued now (waiting for one if ``wait``), up to ``MAX_GROUP``; and whether
        the worker was told to stop."""
        jobs: list[_Job] = []
        try:
            job = self._jobs.get(block=wait)
        except queue.Empty:
            return jobs, False
        while job is not None:
            jobs.append(job)
            if len(jobs) == MAX_GROUP:
                return jobs, False
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return jobs, False
        return jobs, True

    def _serve_group(self, conn: sqlite3.Connection, group: list[_Job]) -> None:
        """Run the group in one transaction and answer each of its jobs."""
        watch = start_watching()
        outcomes = _run_group(conn, group, self.synchronous)
        if written_in(watch):  # told before the callers get their answers
            group[0].loop.call_soon_threadsafe(self.on_journal)
        for job, (ok, value) in zip(group, outcomes, strict=True):
            job.loop.call_soon_threadsafe(_settle, job.future, ok, value)


def _overdue(job: _Job) -> bool:
    return time.monotonic() - job.queued_at >= PUT_OFF_AT_MOST_S


def _run_group(
    conn: sqlite3.Connection, group: list[_Job], synchronous: str
) -> list[tuple[bool, Any]]:
    relaxed = synchronous.upper() in {"FULL", "EXTRA"} and not any(j.durable for j in group)
    if relaxed:
        conn.execute("PRAGMA synchronous=NORMAL")
    try:
        return _run_jobs(conn, group)
    finally:
        if relaxed:
            conn.execute(f"PRAGMA synchronous={synchronous}")


def _run_jobs(conn: sqlite3.Connection, group: list[_Job]) -> list[tuple[bool, Any]]:
    """Run the group in one transaction; each job's outcome: (True, its result) or (False, its
    error)."""
    outcomes: list[tuple[bool, Any]] = []
    try:
        conn.execute("BEGIN IMMEDIATE")
        if len(group) == 1:  # alone in its transaction: no savepoint needed
            try:
                outcomes.append((True, group[0].operation(conn)))
            except Exception as exc:  # handed to the caller
                conn.execute("ROLLBACK")
                outcomes.append((False, exc))
        else:
            outcomes.extend(_run_saved(conn, job) for job in group)
        if conn.in_transaction:
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        outcomes = [(False, exc)] * len(group)
    return outcomes


def _run_saved(conn: sqlite3.Connection, job: _Job) -> tuple[bool, Any]:
    """Run one job of a group inside a savepoint: its failure undoes only its own work."""
    conn.execute("SAVEPOINT job")
    try:
        result = job.operation(conn)
    except Exception as exc:  # handed to the caller of this one job
        conn.execute("ROLLBACK TO job")
        conn.execute("RELEASE job")
        return False, exc
    conn.execute("RELEASE job")
    return True, result


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():  # the caller was cancelled; the work is committed all the same
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
