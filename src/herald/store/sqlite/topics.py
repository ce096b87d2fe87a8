"""Topics and the agents subscribed to them, on SQLite; a publish to a topic reads its
subscribers and stores their events in one transaction of the store's one writer."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from herald.models import Hold, NewEvent, Published, Topic, TopicSubscription
from herald.store.sqlite.append import append_to_agents
from herald.store.sqlite.rows import Operation

# The agents whose patterns match :topic (GLOB, like herald's globs, is case-sensitive with *
# and ?; a topic's name holds neither, nor [).
SUBSCRIBERS = """
SELECT DISTINCT a.handle, a.id FROM topic_subscriptions s JOIN agents a ON a.id = s.agent_id
WHERE :topic GLOB s.pattern
"""
TOPIC_COLUMNS = """
t.name, t.description, t.created_at, t.updated_at,
(SELECT count(DISTINCT s.agent_id) FROM topic_subscriptions s WHERE t.name GLOB s.pattern)
"""
SUBSCRIPTION_COLUMNS = "s.agent_id, a.handle, s.pattern, s.created_at"


class TopicStore:
    """The topic half of ``SQLiteStore``."""

    _run: Callable[[Operation[Any]], Awaitable[Any]]
    now: Callable[[], int]
    _appended: Callable[[list[Published]], None]

    async def put_topic(self, name: str, description: str) -> tuple[Topic, bool]:
        now = self.now()

        def put(conn: sqlite3.Connection) -> tuple[Topic, bool]:
            created = (
                conn.execute(
                    "INSERT INTO topics VALUES (?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
                    (name, description, now, now),
                ).rowcount
                > 0
            )
            if not created:
                conn.execute(
                    "UPDATE topics SET description = ?, updated_at = ? WHERE name = ?",
                    (description, now, name),
                )
            found = _select(conn, name)
            assert found is not None, "just stored"
            return found, created

        result: tuple[Topic, bool] = await self._run(put)
        return result

    async def get_topic(self, name: str) -> Topic | None:
        found: Topic | None = await self._run(lambda conn: _select(conn, name))
        return found

    async def list_topics(self) -> list[Topic]:
        def select(conn: sqlite3.Connection) -> list[Topic]:
            rows = conn.execute(f"SELECT {TOPIC_COLUMNS} FROM topics t ORDER BY t.name")
            return [Topic(row[0], row[1], row[2], row[3], row[4]) for row in rows]

        listed: list[Topic] = await self._run(select)
        return listed

    async def delete_topic(self, name: str) -> bool:
        def delete(conn: sqlite3.Connection) -> bool:
            if conn.execute("DELETE FROM topics WHERE name = ?", (name,)).rowcount == 0:
                return False
            conn.execute("DELETE FROM topic_subscriptions WHERE pattern = ?", (name,))
            return True

        return bool(await self._run(delete))

    async def subscribe_topic(self, agent_id: str, pattern: str) -> bool:
        now = self.now()

        def insert(conn: sqlite3.Connection) -> bool:
            return (
                conn.execute(
                    "INSERT INTO topic_subscriptions VALUES (?, ?, ?)"
                    " ON CONFLICT (agent_id, pattern) DO NOTHING",
                    (agent_id, pattern, now),
                ).rowcount
                > 0
            )

        return bool(await self._run(insert))

    async def unsubscribe_topic(self, agent_id: str, pattern: str) -> bool:
        def delete(conn: sqlite3.Connection) -> bool:
            return (
                conn.execute(
                    "DELETE FROM topic_subscriptions WHERE agent_id = ? AND pattern = ?",
                    (agent_id, pattern),
                ).rowcount
                > 0
            )

        return bool(await self._run(delete))

    async def topic_subscriptions(
        self, agent_id: str | None = None, topic: str | None = None
    ) -> list[TopicSubscription]:
        where, params = [], []
        if agent_id is not None:
            where.append("s.agent_id = ?")
            params.append(agent_id)
        if topic is not None:
            where.append("? GLOB s.pattern")
            params.append(topic)
        sql = (
            f"SELECT {SUBSCRIPTION_COLUMNS} FROM topic_subscriptions s"
            " JOIN agents a ON a.id = s.agent_id"
            + (f" WHERE {' AND '.join(where)}" if where else "")
            + " ORDER BY a.handle, s.pattern"
        )

        def select(conn: sqlite3.Connection) -> list[TopicSubscription]:
            return [TopicSubscription(*row) for row in conn.execute(sql, params)]

        listed: list[TopicSubscription] = await self._run(select)
        return listed

    async def append_to_topic(
        self, topic: str, event: NewEvent, holds: Mapping[str, Hold] | None = None
    ) -> list[Published] | None:
        now = self.now()
        copy = replace(event, topic=topic)  # each copy says which topic it came from

        def append(conn: sqlite3.Connection) -> list[Published] | None:
            if conn.execute("SELECT 1 FROM topics WHERE name = ?", (topic,)).fetchone() is None:
                return None
            agents = dict(conn.execute(SUBSCRIBERS, {"topic": topic}).fetchall())
            return append_to_agents(conn, copy, agents, now, holds or {})

        published: list[Published] | None = await self._run(append)
        if published:
            self._appended(published)
        return published


def _select(conn: sqlite3.Connection, name: str) -> Topic | None:
    row = conn.execute(f"SELECT {TOPIC_COLUMNS} FROM topics t WHERE t.name = ?", (name,)).fetchone()
    return None if row is None else Topic(row[0], row[1], row[2], row[3], row[4])
