"""Publisher keys, on PostgreSQL."""

from __future__ import annotations

from herald.models import PublisherKey
from herald.store.postgres import queries
from herald.store.postgres.rows import Connection, Runner, count
from herald.store.tables import PUBLISHER_KEYS


class PublisherKeyStore:
    """The publisher-key part of ``PostgresStore``."""

    _run: Runner

    async def create_publisher_key(self, key: PublisherKey) -> None:
        async def insert(conn: Connection) -> None:
            await conn.execute(queries.INSERT_PUBLISHER_KEY, *PUBLISHER_KEYS.values(key))

        await self._run(insert)

    async def publisher_key_by_hash(self, key_hash: str) -> PublisherKey | None:
        async def select(conn: Connection) -> PublisherKey | None:
            row = await conn.fetchrow(queries.PUBLISHER_KEY_BY_HASH, key_hash)
            return PUBLISHER_KEYS.record(row) if row is not None else None

        return await self._run(select)

    async def list_publisher_keys(self) -> list[PublisherKey]:
        async def select(conn: Connection) -> list[PublisherKey]:
            rows = await conn.fetch(queries.LIST_PUBLISHER_KEYS)
            return [PUBLISHER_KEYS.record(row) for row in rows]

        return await self._run(select)

    async def delete_publisher_key(self, key_id: str) -> bool:
        async def delete(conn: Connection) -> bool:
            return count(await conn.execute(queries.DELETE_PUBLISHER_KEY, key_id)) > 0

        return await self._run(delete)
