"""A consistent copy of a SQLite store, taken while ``herald serve`` may be writing it: what
``herald backup`` and ``herald restore`` write (``herald.backup`` puts the copy in its place).

A SQLite store is a file in WAL mode: what was committed lately is in ``<db>-wal``, and a plain
copy of the file alone misses it. The copy is made with SQLite's online backup API instead, in
steps, from one read snapshot held from the first step to the last. In WAL mode a reader never
blocks the serving process's writes, and the held snapshot is what keeps the steps from
restarting: without it, each commit of the serving process between two steps would restart the
copy, which under load would never finish. So the copy holds every event committed before it
began, and none half-written. It is then checked (SQLite's ``integrity_check``, and its events
counted).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from herald.errors import HeraldError

PAGES_PER_STEP = 1024
"""Pages copied per step of the backup (4 MiB at SQLite's default page size)."""


def copy_snapshot(source: str, destination: str) -> int:
    """Copy the SQLite store ``source`` (which may be being written) as of one snapshot into the
    empty file ``destination``, give the copy a history of its own and check it. Returns how
    many events the copy holds.

    Raises:
        HeraldError: ``source`` is missing or not a herald store, or the copy cannot be written
            or fails its check.
    """
    expected = _copy(source, destination)
    _start_a_history(destination)
    _check_copy(destination, expected)
    return expected


def _copy(source: str, destination: str) -> int:
    """Copy ``source`` as of one snapshot into the empty database file ``destination``; returns
    how many events that snapshot holds."""
    with _reading(source) as reader, _sqlite_errors(f"cannot copy {source}"):
        reader.execute("BEGIN")
        expected = _count_events(reader, source)  # the read starts the snapshot held below
        copy = sqlite3.connect(destination, isolation_level=None)
        try:
            reader.backup(copy, pages=PAGES_PER_STEP)
            # A file that stands alone: no -wal beside it to copy or lose with it.
            copy.execute("PRAGMA journal_mode=DELETE")
        finally:
            copy.close()
        reader.execute("COMMIT")
    return expected


def _start_a_history(path: str) -> None:
    """Give the copy at ``path`` a history of its own (``Store.history``). Clients hold
    positions given since the backup was taken, whose seqs the copy hands out again once it is
    served: with a history of its own, none of them is taken as a place in it. Made anew for
    the backup and for each restore, so that a backup served as it is, or restored twice, is
    still not the history of the store it was taken from, nor of an earlier restore. A copy of
    a store from before histories has none: herald gives it a new one when it opens it."""
    with _sqlite_errors("cannot give the copy a history of its own"):
        copy = sqlite3.connect(path, isolation_level=None)
        try:
            found = copy.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'herald_history'"
            ).fetchone()
            if found:
                copy.execute("UPDATE herald_history SET id = lower(hex(randomblob(8)))")
        finally:
            copy.close()


def _check_copy(path: str, expected: int) -> None:
    with _reading(path) as copy, _sqlite_errors("the copy failed its check"):
        problems = [row[0] for row in copy.execute("PRAGMA integrity_check")]
        if problems != ["ok"]:
            raise HeraldError(f"the copy failed SQLite's integrity check: {problems[:3]}")
        events = _count_events(copy, path)
    if events != expected:
        raise HeraldError(f"the copy holds {events} events where its source held {expected}")


@contextlib.contextmanager
def _reading(path: str) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the SQLite file ``path``, which must exist."""
    if not Path(path).is_file():
        raise HeraldError(f"there is no SQLite store at {path}")
    uri = f"file:{quote(Path(path).resolve().as_posix())}?mode=ro"
    with _sqlite_errors(f"cannot open {path}"):
        connection = sqlite3.connect(uri, uri=True, isolation_level=None)
    try:
        yield connection
    finally:
        connection.close()


def _count_events(connection: sqlite3.Connection, path: str) -> int:
    try:
        (count,) = connection.execute("SELECT count(*) FROM events").fetchone()
    except sqlite3.DatabaseError as exc:
        raise HeraldError(f"{path} is not a herald store: {exc}") from exc
    return int(count)


@contextlib.contextmanager
def _sqlite_errors(doing: str) -> Iterator[None]:
    """SQLite's errors, and the OS's, said as a ``HeraldError`` that begins with ``doing``."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise HeraldError(f"{doing}: {exc}") from exc
