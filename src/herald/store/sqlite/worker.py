"""The worker thread: it owns the one connection and runs every operation, with group commit.

The worker takes all the operations waiting at that moment and runs them in one transaction, each
inside its own savepoint, then commits once: under load many publishes share one fsync, and each
caller still gets its answer only after the commit that made its write durable.

Operations of one kind that can be written together (``Joinable``: publishes) and are queued one
after another run as one: a group of publishes is stored by a few statements for all of them, not
a few for each. Each caller still gets its own answer or its own error: what the joined operation
refuses it refuses to that caller alone, and if it fails as a whole, each of its callers' operations
runs again alone, in its own savepoint, so that a failure lands only on the caller that caused it.

A group is answered in one call to the event loop: the journal's listeners first, then what
each operation asked to be told of its committed result (``then``: the events a publish created,
for the live sessions and streams), then every caller, so that the hand-back costs the loop one
wake-up per group, not one per operation, and the pushes of a group's events are under way
before the answers to its publishes.
"""

from __future__ import annotations

import asyncio
import functools
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from herald.errors import HeraldError, StoreUnavailable
from herald.store.journal import start_watching, written_in
from herald.store.sqlite.connection import WriterConnection
from herald.store.sqlite.rows import Operation, T
from herald.store.sqlite.schema import migrate

MAX_GROUP = 512
WAITS_FOR_DISK = ("FULL", "EXTRA")
"""The ``synchronous`` modes whose commit waits for the disk: a group of writes that need not
(``durable=False``) is committed with NORMAL instead."""
CACHED_STATEMENTS = 256
"""Prepared statements the connection keeps: room for every statement herald runs, and for the
multi-row inserts of each size up to ``rows.ROWS_PER_INSERT`` (one for each pattern of columns
None in all their rows: a publish's events usually share one)."""

Item = TypeVar("Item")
Outcome = tuple[bool, Any]
"""An operation's outcome: (True, its result) or (False, the error its caller gets)."""


@dataclass(frozen=True)
class Joinable(Generic[Item, T]):
    """A kind of operation that the worker may run for several callers at once.

    ``alone`` does one caller's (given its ``item``); ``together`` does those of several callers,
    queued one after another, and answers each: (True, its result), or (False, its error) having
    written nothing for it. If ``together`` raises, the worker undoes it and runs each ``alone``.
    """

    alone: Callable[[sqlite3.Connection, Item], T]
    together: Callable[[sqlite3.Connection, Sequence[Item]], list[Outcome]]


@dataclass
class _Job:
    operation: Operation[Any]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    kind: Joinable[Any, Any] | None = None
    item: Any = None
    then: Callable[[Any], None] | None = None
    durable: bool = True


class Worker:
    """The thread that runs operations on a SQLite file, a group of them per transaction."""

    def __init__(
        self, path: str, synchronous: str, on_journal: Callable[[], None] = lambda: None
    ) -> None:
        self.path = path
        self.synchronous = synchronous
        self.on_journal = on_journal
        """Called in the event loop after a commit that wrote a journal row."""
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
        """Run an operation on the connection; answers once the transaction is committed.
        ``durable=False``: its commit need not wait for the disk (``synchronous=NORMAL``, if
        every operation of its transaction says so): it survives a crash of the process, and
        may be lost in a power cut.

        Raises:
            StoreUnavailable: the worker is not started, or SQLite failed.
        """
        return await self._queue(operation, durable=durable)

    async def run_joinable(
        self, kind: Joinable[Item, T], item: Item, then: Callable[[T], None] | None = None
    ) -> T:
        """Run ``kind.alone`` on ``item``, or join it with the same kind's queued beside it.
        ``then`` is called in the event loop with the result once it is committed, before any
        caller of that commit is answered."""
        return await self._queue(lambda conn: kind.alone(conn, item), kind, item, then)

    async def _queue(
        self,
        operation: Operation[T],
        kind: Joinable[Any, Any] | None = None,
        item: Any = None,
        then: Callable[[T], None] | None = None,
        *,
        durable: bool = True,
    ) -> T:
        if self._thread is None:
            raise StoreUnavailable("the store is not open: call open() first")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put(_Job(operation, future, loop, kind, item, then, durable))
        try:
            return await future
        except HeraldError:
            raise
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"SQLite store failed: {exc}") from exc

    # The worker thread

    def _connect(self) -> WriterConnection:
        conn = sqlite3.connect(
            self.path,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=CACHED_STATEMENTS,
            factory=WriterConnection,
        )
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
        stopping = False
        try:
            while not stopping:
                group, stopping = self._take()
                if group:
                    self._serve_group(conn, group)
                del group  # held while waiting for the next, it would keep answers alive
        finally:
            conn.close()

    def _take(self) -> tuple[list[_Job], bool]:
        """The jobs queued now (waiting for one), up to ``MAX_GROUP``; and whether the worker
        was told to stop."""
        jobs: list[_Job] = []
        job = self._jobs.get()
        while job is not None:
            jobs.append(job)
            # Only this thread takes jobs: one is there if the queue is not empty. (Asking
            # first spares a lone publish the raise and catch of ``queue.Empty``.)
            if len(jobs) == MAX_GROUP or self._jobs.empty():
                return jobs, False
            job = self._jobs.get_nowait()
        return jobs, True

    def _serve_group(self, conn: WriterConnection, group: list[_Job]) -> None:
        """Run the group in one transaction and answer each of its jobs."""
        watch = start_watching()
        if self.synchronous in WAITS_FOR_DISK and not any(job.durable for job in group):
            # Writes whose loss in a power cut costs only a push sent again: a commit that
            # does not flush (WAL stays consistent; the next flushed commit makes it durable
            # too) holds the writer, and the publishes queued behind it, for much less.
            conn.execute("PRAGMA synchronous=NORMAL")
            try:
                outcomes = _run_jobs(conn, group)
            finally:
                conn.execute(f"PRAGMA synchronous={self.synchronous}")
        else:
            outcomes = _run_jobs(conn, group)
        on_journal = self.on_journal if written_in(watch) else None
        answers: dict[asyncio.AbstractEventLoop, list[tuple[_Job, Outcome]]] = {}
        for job, outcome in zip(group, outcomes, strict=True):
            answers.setdefault(job.loop, []).append((job, outcome))
        for loop, settled in answers.items():
            loop.call_soon_threadsafe(_answer, on_journal, settled)
            on_journal = None  # told once


def _run_jobs(conn: WriterConnection, group: list[_Job]) -> list[Outcome]:
    """Run the group in one transaction; each job's outcome. Whatever is undone, the
    connection forgets what it remembered (``WriterConnection.undone``)."""
    outcomes: list[Outcome] = []
    try:
        conn.execute("BEGIN IMMEDIATE")
        if len(group) == 1:  # alone in its transaction: no savepoint needed
            try:
                outcomes.append((True, group[0].operation(conn)))
            except Exception as exc:  # handed to the caller
                conn.execute("ROLLBACK")
                conn.undone()
                outcomes.append((False, exc))
        else:
            for run in _runs(group):
                outcomes += _run_joined(conn, run) if len(run) > 1 else [_run_saved(conn, run[0])]
        if conn.in_transaction:
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        conn.undone()  # also when the failure ended the transaction itself
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        outcomes = [(False, exc)] * len(group)
    return outcomes


def _runs(group: list[_Job]) -> Iterator[list[_Job]]:
    """The group in order, jobs of one joinable kind queued one after another taken together."""
    run: list[_Job] = []
    for job in group:
        if run and (job.kind is None or job.kind is not run[0].kind):
            yield run
            run = []
        run.append(job)
    if run:
        yield run


def _run_joined(conn: WriterConnection, run: list[_Job]) -> list[Outcome]:
    """Run jobs of one kind as one, inside a savepoint; if that fails, each alone."""
    kind = run[0].kind
    assert kind is not None
    conn.execute("SAVEPOINT joined")
    try:
        outcomes = kind.together(conn, [job.item for job in run])
    except Exception:  # one of them is at fault: each alone finds which
        conn.execute("ROLLBACK TO joined")
        conn.execute("RELEASE joined")
        conn.undone()
        return [_run_saved(conn, job) for job in run]
    conn.execute("RELEASE joined")
    return outcomes


def _run_saved(conn: WriterConnection, job: _Job) -> Outcome:
    """Run one job of a group inside a savepoint: its failure undoes only its own work."""
    conn.execute("SAVEPOINT job")
    try:
        result = job.operation(conn)
    except Exception as exc:  # handed to the caller of this one job
        conn.execute("ROLLBACK TO job")
        conn.execute("RELEASE job")
        conn.undone()
        return False, exc
    conn.execute("RELEASE job")
    return True, result


def _answer(on_journal: Callable[[], None] | None, settled: list[tuple[_Job, Outcome]]) -> None:
    """In the event loop: tell the journal's listeners and each job's ``then``, then answer each
    caller. A listener that fails keeps neither the others from being told nor any caller from
    its answer: its error is raised last, for the loop to report."""
    tellings: list[Callable[[], None]] = [on_journal] if on_journal is not None else []
    for job, (ok, value) in settled:
        if ok and job.then is not None:  # also if its caller was cancelled: it is committed
            tellings.append(functools.partial(job.then, value))
    failed: Exception | None = None
    for tell in tellings:
        try:
            tell()
        except Exception as exc:  # raised once every caller is answered
            failed = failed or exc
    for job, (ok, value) in settled:
        future = job.future
        if future.done():  # the caller was cancelled; the work is committed all the same
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
    if failed is not None:
        raise failed
