"""Publisher keys, on SQLite."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

from herald.models import PublisherKey
from herald.store.sqlite.rows import Operation, insert_sql, record, records, select_list
from herald.store.tables import PUBLISHER_KEYS

INSERT_PUBLISHER_KEY = insert_sql(PUBLISHER_KEYS)
PUBLISHER_KEY_COLUMNS = select_list(PUBLISHER_KEYS)


class PublisherKeyStore:
    """The publisher-key part of ``SQLiteStore``."""

    _run: Callable[[Operation[Any]], Awaitable[Any]]

    async def create_publisher_key(self, key: PublisherKey) -> None:
        def insert(conn: sqlite3.Connection) -> None:
            conn.execute(INSERT_PUBLISHER_KEY, PUBLISHER_KEYS.values(key))

        await self._run(insert)

    async def publisher_key_by_hash(self, key_hash: str) -> PublisherKey | None:
        def select(conn: sqlite3.Connection) -> PublisherKey | None:
            rows = conn.execute(
                f"SELECT {PUBLISHER_KEY_COLUMNS} FROM publisher_keys WHERE key_hash = ?",
                (key_hash,),
            )
            return record(PUBLISHER_KEYS, rows)

        found: PublisherKey | None = await self._run(select)
        return found

    async def list_publisher_keys(self) -> list[PublisherKey]:
        def select(conn: sqlite3.Connection) -> list[PublisherKey]:
            rows = conn.execute(f"SELECT {PUBLISHER_KEY_COLUMNS} FROM publisher_keys ORDER BY id")
            return records(PUBLISHER_KEYS, rows)

        listed: list[PublisherKey] = await self._run(select)
        return listed

    async def delete_publisher_key(self, key_id: str) -> bool:
        def delete(conn: sqlite3.Connection) -> bool:
            return conn.execute("DELETE FROM publisher_keys WHERE id = ?", (key_id,)).rowcount > 0

        return bool(await self._run(delete))
