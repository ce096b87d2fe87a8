"""Stores, chosen by URL: ``sqlite:///path.db`` (embedded, the default) or ``postgresql://...``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from herald.errors import ExtraNotInstalled
from herald.store.base import Store
from herald.times import Clock
from herald.urls import (
    POSTGRES_DRIVER,
    POSTGRES_EXTRA_MISSING,
    backend_of,
    split_schema,
    sqlite_path,
    sqlite_synchronous,
)

__all__ = ["Store", "copy_sqlite_store", "open_store", "store_exists", "store_from_url"]


def store_from_url(url: str, *, clock: Clock = time.time) -> Store:
    """Build (but do not open) the store a URL names.

    ``sqlite:///relative.db``, ``sqlite:////absolute.db`` (``?synchronous=NORMAL`` trades power-cut
    safety for speed), ``postgresql://user@host:port/db``.

    Raises:
        InvalidInput: the URL names no backend herald has.
        ExtraNotInstalled: a PostgreSQL URL, without the ``postgres`` extra (asyncpg).
    """
    if backend_of(url) == "sqlite":
        from herald.store.sqlite import SQLiteStore

        return SQLiteStore(sqlite_path(url), clock=clock, synchronous=sqlite_synchronous(url))
    with _postgres_driver():
        from herald.store.postgres import PostgresStore
    return PostgresStore(url, clock=clock)


async def store_exists(url: str) -> bool:
    """Whether the store a URL names was made (by a ``herald serve``, or ``open_store``): its
    SQLite file is there, or its PostgreSQL database holds herald's tables. Nothing is made.

    Raises:
        InvalidInput: the URL is malformed.
        StoreUnavailable: the PostgreSQL database cannot be reached.
        ExtraNotInstalled: a PostgreSQL URL, without the ``postgres`` extra (asyncpg).
    """
    if backend_of(url) == "sqlite":
        return Path(sqlite_path(url)).is_file()
    with _postgres_driver():
        from herald.store.postgres.pool import holds_a_store

    database, schema = split_schema(url)
    return await holds_a_store(database, schema)


def copy_sqlite_store(source: str, destination: str) -> int:
    """Copy the SQLite store file ``source`` (which may be being written) as of one snapshot
    into the new file ``destination``, as a history of its own, and check the copy
    (``store/sqlite/copies.py``). Returns how many events the copy holds.

    Raises:
        HeraldError: ``source`` is missing or not a herald store, or the copy cannot be written
            or fails its check.
    """
    from herald.store.sqlite.copies import copy_snapshot

    return copy_snapshot(source, destination)


@contextmanager
def _postgres_driver() -> Iterator[None]:
    """Around an import of the PostgreSQL store: without its driver, say which extra brings it.

    Raises:
        ExtraNotInstalled: the driver is not installed.
    """
    try:
        yield
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != POSTGRES_DRIVER:
            raise
        raise ExtraNotInstalled(POSTGRES_EXTRA_MISSING) from None


async def open_store(url: str, *, clock: Clock = time.time) -> Store:
    """Open the store a URL names and apply its migrations; ``await store.close()`` after."""
    store = store_from_url(url, clock=clock)
    await store.open()
    return store
