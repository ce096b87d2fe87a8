"""Stores, chosen by URL: ``sqlite:///path.db`` (embedded, the default) or ``postgresql://...``."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

from herald.errors import ExtraNotInstalled
from herald.store.base import Store
from herald.times import Clock
from herald.urls import backend_of, sqlite_path

__all__ = ["Store", "open_store", "store_from_url"]

POSTGRES_DRIVER = "asyncpg"
"""The module a PostgreSQL store needs: installed by the ``postgres`` extra, not by herald alone."""


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

        options = parse_qs(urlsplit(url).query)
        synchronous = options.get("synchronous", ["FULL"])[0]
        return SQLiteStore(sqlite_path(url), clock=clock, synchronous=synchronous)
    try:
        from herald.store.postgres import PostgresStore
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != POSTGRES_DRIVER:
            raise
        raise ExtraNotInstalled(
            "PostgreSQL needs the postgres extra: pip install 'herald[postgres]'"
        ) from None
    return PostgresStore(url, clock=clock)


async def open_store(url: str, *, clock: Clock = time.time) -> Store:
    """Open the store a URL names and apply its migrations; ``await store.close()`` after."""
    store = store_from_url(url, clock=clock)
    await store.open()
    return store
