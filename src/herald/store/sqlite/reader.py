"""The reader thread: a second connection to the SQLite file, for the reads that streams and
listings make over and over, so that they never wait in the writer's queue.

The writer (``worker.Worker``) commits a group at a time and waits for the disk at each commit;
a read queued behind it waited for that fsync too, and a push, the read of the events it pushes.
In WAL mode a reader sees every transaction committed before its own began and is never blocked
by the writer, so the reads that need no write of their own run here instead, one at a time,
each in a transaction of its own: the statements of one read see one state of the file (a page
of the journal and where the journal ends, for instance), and a read that starts after a write
was answered sees that write.
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
        while (read := self._reads.get()) is not None:
            try:
                if conn is None:
                    conn = _connect(self.path)
                conn.execute("BEGIN")
                try:
                    outcome: tuple[bool, Any] = (True, read.operation(conn))
                finally:
                    conn.execute("COMMIT")
            except Exception as exc:  # handed to the caller
                outcome = (False, exc)
            read.loop.call_soon_threadsafe(_settle, read.future, *outcome)
            del read, outcome  # held while waiting for the next, they would keep the answer
        if conn is not None:
            conn.close()


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row  # rows are read by column name
    conn.execute("PRAGMA query_only=ON")  # a write here would bypass the writer's rules
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():  # the caller was cancelled
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
