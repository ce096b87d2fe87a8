"""The reader thread: a second connection to the SQLite file, for the reads that streams and
listings make over and over, so that they never wait in the writer's queue.

The writer (``worker.Worker``) commits a group at a time and waits for the disk at each commit;
a read queued behind it waited for that fsync too, and a push, the read of the events it pushes.
In WAL mode a reader sees every transaction committed before its own began and is never blocked
by the writer, so the reads that need no write of their own run here instead: the reads waiting
at that moment together, in one transaction that begins once they are all taken. So the
statements of one read see one state of the file (a page of the journal and where the journal
ends, for instance), and a read asked for after a write was answered sees that write.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from dataclasses import dataclass
from typing import Any

from herald.errors import HeraldError, StoreUnavailable
from herald.store.sqlite.rows import Operation, T

MAX_GROUP = 512


@dataclass
class _Read:
    operation: Operation[Any]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop


class Reader:
    """The thread that runs read-only operations on its own connection to a SQLite file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._reads: queue.SimpleQueue[_Read | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (after the writer made and migrated the file)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._work, name="herald-sqlite-reader", daemon=True
            )
            self._thread.start()

    async def stop(self) -> None:
        """Answer the reads already queued, then close the connection and end the thread."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._reads.put(None)
            await asyncio.to_thread(thread.join)

    async def run(self, operation: Operation[T]) -> T:
        """Run a read-only operation in a transaction of its own.

        Raises:
            StoreUnavailable: the reader is not started, or SQLite failed.
        """
        if self._thread is None:
            raise StoreUnavailable("the store is not open: call open() first")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._reads.put(_Read(operation, future, loop))
        try:
            return await future
        except HeraldError:
            raise
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"SQLite store failed: {exc}") from exc

    def _work(self) -> None:
        conn: sqlite3.Connection | None = None
        going_on = True
        while going_on and (first := self._reads.get()) is not None:
            # Every read waiting now, in one transaction: a thread takes the GIL back once
            # for them all rather than once each (up to the switch interval, 5 ms, each time).
            group = [first]
            while len(group) < MAX_GROUP:
                try:
                    more = self._reads.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    going_on = False
                    break
                group.append(more)
            try:
                if conn is None:
                    conn = _connect(self.path)
                outcomes = _run_reads(conn, group)
            except sqlite3.Error as exc:  # the connection failed: every read is told
                outcomes = [(False, exc)] * len(group)
            group[0].loop.call_soon_threadsafe(_settle, group, outcomes)
            del first, group, outcomes  # held while waiting, they would keep the answers
        if conn is not None:
            conn.close()


def _run_reads(conn: sqlite3.Connection, group: list[_Read]) -> list[tuple[bool, Any]]:
    outcomes: list[tuple[bool, Any]] = []
    conn.execute("BEGIN")
    try:
        for read in group:
            try:
                outcomes.append((True, read.operation(conn)))
            except Exception as exc:  # handed to the caller of this one read
                outcomes.append((False, exc))
    finally:
        conn.execute("COMMIT")
    return outcomes


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row  # rows are read by column name
    conn.execute("PRAGMA query_only=ON")  # a write here would bypass the writer's rules
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


def _settle(group: list[_Read], outcomes: list[tuple[bool, Any]]) -> None:
    for read, (ok, value) in zip(group, outcomes, strict=True):
        if read.future.done():  # the caller was cancelled
            continue
        if ok:
            read.future.set_result(value)
        else:
            read.future.set_exception(value)
