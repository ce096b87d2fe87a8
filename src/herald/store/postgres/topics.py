"""Topics and the agents subscribed to them, on PostgreSQL; a publish to a topic reads its
subscribers and stores their events in one transaction."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import asyncpg

from herald.models import Hold, NewEvent, Published, Topic, TopicSubscription
from herald.store.postgres import queries
from herald.store.postgres.append import append_to_agents
from herald.store.postgres.errors import refused
from herald.store.postgres.rows import Connection, Runner, count


def _topic(row: asyncpg.Record) -> Topic:
    return Topic(
        row["name"], row["description"], row["created_at"], row["updated_at"], row["subscribers"]
    )


class TopicStore:
    """The topic half of ``PostgresStore``."""

    _run: Runner
    now: Callable[[], int]
    _appended: Callable[[list[Published]], None]

    async def put_topic(self, name: str, description: str) -> tuple[Topic, bool]:
        now = self.now()

        async def put(conn: Connection) -> tuple[Topic, bool]:
            row = await conn.fetchrow(queries.PUT_TOPIC, name, description, now)
            assert row is not None, "an upsert answers its row"
            return _topic(row), bool(row["created"])

        return await self._run(put)

    async def get_topic(self, name: str) -> Topic | None:
        async def select(conn: Connection) -> Topic | None:
            row = await conn.fetchrow(queries.GET_TOPIC, name)
            return None if row is None else _topic(row)

        return await self._run(select)

    async def list_topics(self) -> list[Topic]:
        async def select(conn: Connection) -> list[Topic]:
            return [_topic(row) for row in await conn.fetch(queries.LIST_TOPICS)]

        return await self._run(select)

    async def delete_topic(self, name: str) -> bool:
        async def delete(conn: Connection) -> bool:
            if count(await conn.execute(queries.DELETE_TOPIC, name)) == 0:
                return False
            await conn.execute(queries.DELETE_EXACT_SUBSCRIPTIONS, name)
            return True

        return await self._run(delete, transaction=True)

    async def subscribe_topic(self, agent_id: str, pattern: str) -> bool:
        now = self.now()

        async def insert(conn: Connection) -> bool:
            return count(await conn.execute(queries.SUBSCRIBE_TOPIC, agent_id, pattern, now)) > 0

        return await self._run(insert)

    async def unsubscribe_topic(self, agent_id: str, pattern: str) -> bool:
        async def delete(conn: Connection) -> bool:
            return count(await conn.execute(queries.UNSUBSCRIBE_TOPIC, agent_id, pattern)) > 0

        return await self._run(delete)

    async def topic_subscriptions(
        self, agent_id: str | None = None, topic: str | None = None
    ) -> list[TopicSubscription]:
        async def select(conn: Connection) -> list[TopicSubscription]:
            rows = await conn.fetch(queries.TOPIC_SUBSCRIPTIONS, agent_id, topic)
            return [TopicSubscription(*row.values()) for row in rows]

        return await self._run(select)

    async def append_to_topic(
        self, topic: str, event: NewEvent, holds: Mapping[str, Hold] | None = None
    ) -> list[Published] | None:
        now = self.now()
        copy = replace(event, topic=topic)  # each copy says which topic it came from

        async def append(conn: Connection) -> list[Published] | None:
            if await conn.fetchval(queries.TOPIC_EXISTS, topic) is None:
                return None
            handles = [row[0] for row in await conn.fetch(queries.TOPIC_SUBSCRIBERS, topic)]
            try:
                return await append_to_agents(conn, copy, handles, now, holds or {})
            except asyncpg.DataError as exc:  # its message may quote the event: not shown
                raise refused() from exc

        published = await self._run(append, transaction=True)
        if published:
            self._appended(published)
        return published
