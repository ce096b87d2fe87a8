"""Live sessions on PostgreSQL: presence that every process sharing the database sees."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import asyncpg

from herald.errors import NotFound
from herald.models import SessionRecord
from herald.store.postgres import queries
from herald.store.postgres.rows import Connection, Runner, count
from herald.store.tables import SESSIONS


class SessionStore:
    """The session half of ``PostgresStore``."""

    _run: Runner
    now: Callable[[], int]

    async def put_session(self, session: SessionRecord) -> None:
        async def put(conn: Connection) -> None:
            try:
                await conn.execute(queries.PUT_SESSION, *SESSIONS.values(session))
            except asyncpg.ForeignKeyViolationError as exc:
                raise NotFound(f"no agent has the id {session.agent_id!r}") from exc

        await self._run(put)

    async def refresh_sessions(self, ids: Sequence[str], expires_at: int) -> int:
        async def refresh(conn: Connection) -> int:
            return count(await conn.execute(queries.REFRESH_SESSIONS, list(ids), expires_at))

        return await self._run(refresh)

    async def remove_session(self, session_id: str) -> bool:
        async def delete(conn: Connection) -> bool:
            return count(await conn.execute(queries.REMOVE_SESSION, session_id)) > 0

        return await self._run(delete)

    async def live_sessions(self, agent_id: str) -> list[SessionRecord]:
        now = self.now()

        async def select(conn: Connection) -> list[SessionRecord]:
            rows = await conn.fetch(queries.LIVE_SESSIONS, agent_id, now)
            return [SESSIONS.record(row) for row in rows]

        return await self._run(select)
