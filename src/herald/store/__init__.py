"""Stores, chosen by URL: ``sqlite:///path.db`` (embedded, the default) or ``postgresql://...``."""

from __future__ import annotations

import time

from herald.store.base import Store
from herald.times import Clock
from herald.urls import backend_of, sqlite_path, sqlite_synchronous

__all__ = ["Store", "open_store", "store_from_url"]


def store_from_url(url: str, *, clock: Clock = time.time) -> Store:
    """Build (but do not open) the store a URL names.

    ``sqlite:///relative.db``, ``sqlite:////absolute.db`` (``?synchronous=NORMAL`` trades power-cut
    safety for speed), ``postgresql://user@host:port/db``.

    Raises:
        InvalidInput: the URL names no backend herald has.
    """
    if backend_of(url) == "sqlite":
        from herald.store.sqlite import SQLiteStore

        return SQLiteStore(sqlite_path(url), clock=clock, synchronous=sqlite_synchronous(url))
    from herald.store.postgres import PostgresStore

    return PostgresStore(url, clock=clock)


async def open_store(url: str, *, clock: Clock = time.time) -> Store:
    """Open the store a URL names and apply its migrations; ``await store.close()`` after."""
    store = store_from_url(url, clock=clock)
    await store.open()
    return store
