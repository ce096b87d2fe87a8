"""Live sessions on SQLite: presence, kept with an expiry their process refreshes."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from herald.errors import NotFound
from herald.models import SessionRecord
from herald.store.sqlite.rows import Operation, as_json, insert_sql, records, select_list
from herald.store.tables import SESSIONS

PUT_SESSION = insert_sql(SESSIONS, "INSERT OR REPLACE")
SESSION_COLUMNS = select_list(SESSIONS)


class SessionStore:
    """The session half of ``SQLiteStore``."""

    _run: Callable[[Operation[Any]], Awaitable[Any]]
    now: Callable[[], int]

    async def put_session(self, session: SessionRecord) -> None:
        def put(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(PUT_SESSION, SESSIONS.values(session))
            except sqlite3.IntegrityError as exc:
                raise NotFound(f"no agent has the id {session.agent_id!r}") from exc

        await self._run(put)

    async def refresh_sessions(self, ids: Sequence[str], expires_at: int) -> int:
        def refresh(conn: sqlite3.Connection) -> int:
            return conn.execute(
                "UPDATE sessions SET expires_at = ? WHERE id IN (SELECT value FROM json_each(?))",
                (expires_at, as_json(list(ids))),
            ).rowcount

        return int(await self._run(refresh))

    async def remove_session(self, session_id: str) -> bool:
        def delete(conn: sqlite3.Connection) -> bool:
            return conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount > 0

        return bool(await self._run(delete))

    async def live_sessions(self, agent_id: str) -> list[SessionRecord]:
        now = self.now()

        def select(conn: sqlite3.Connection) -> list[SessionRecord]:
            rows = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE agent_id = ? AND expires_at > ?"
                " ORDER BY connected_at, id",
                (agent_id, now),
            )
            return records(SESSIONS, rows)

        result: list[SessionRecord] = await self._run(select)
        return result
