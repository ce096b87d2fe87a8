"""Stores, chosen by URL: ``sqlite:///path.db`` (embedded, the default) or ``postgresql://...``."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

from herald.errors import InvalidInput
from herald.store.base import Store
from herald.times import Clock

__all__ = ["Store", "open_store", "store_from_url"]


def store_from_url(url: str, *, clock: Clock = time.time) -> Store:
    """Build (but do not open) the store a URL names.

    ``sqlite:///relative.db``, ``sqlite:////absolute.db`` (``?synchronous=NORMAL`` trades power-cut
    safety for speed), ``postgresql://user@host:port/db``.

    Raises:
        InvalidInput: the URL names no backend herald has.
    """
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        from herald.store.sqlite import SQLiteStore

        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if not path:
            raise InvalidInput("a SQLite store URL needs a file: sqlite:///herald.db")
        options = parse_qs(parts.query)
        synchronous = options.get("synchronous", ["FULL"])[0]
        return SQLiteStore(path, clock=clock, synchronous=synchronous)
    if parts.scheme in {"postgresql", "postgres"}:
        from herald.store.postgres import PostgresStore

        return PostgresStore(url, clock=clock)
    raise InvalidInput(
        f"unknown store URL {url!r}: use sqlite:///path.db or postgresql://user@host/db"
    )


async def open_store(url: str, *, clock: Clock = time.time) -> Store:
    """Open the store a URL names and apply its migrations; ``await store.close()`` after."""
    store = store_from_url(url, clock=clock)
    await store.open()
    return store
