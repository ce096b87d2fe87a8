"""The event types the operator declares, on SQLite."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

from herald.models import EventType
from herald.store.sqlite.rows import Operation, insert_sql, record, records, select_list
from herald.store.tables import EVENT_TYPES

INSERT_EVENT_TYPE = insert_sql(EVENT_TYPES)
EVENT_TYPE_COLUMNS = select_list(EVENT_TYPES)


class EventTypeStore:
    """The event-type half of ``SQLiteStore``."""

    _run: Callable[[Operation[Any]], Awaitable[Any]]
    now: Callable[[], int]

    async def put_event_type(
        self, name: str, description: str, payload_schema_json: str | None
    ) -> tuple[EventType, bool]:
        now = self.now()

        def put(conn: sqlite3.Connection) -> tuple[EventType, bool]:
            found = _select(conn, name)
            stored = EventType(
                name,
                description,
                payload_schema_json,
                found.created_at if found else now,
                now,
            )
            if found is None:
                conn.execute(INSERT_EVENT_TYPE, EVENT_TYPES.values(stored))
            else:
                conn.execute(
                    "UPDATE event_types SET description = ?, payload_schema = ?, updated_at = ?"
                    " WHERE name = ?",
                    (description, payload_schema_json, now, name),
                )
            return stored, found is None

        result: tuple[EventType, bool] = await self._run(put)
        return result

    async def get_event_type(self, name: str) -> EventType | None:
        found: EventType | None = await self._run(lambda conn: _select(conn, name))
        return found

    async def list_event_types(self) -> list[EventType]:
        def select(conn: sqlite3.Connection) -> list[EventType]:
            rows = conn.execute(f"SELECT {EVENT_TYPE_COLUMNS} FROM event_types ORDER BY name")
            return records(EVENT_TYPES, rows)

        listed: list[EventType] = await self._run(select)
        return listed

    async def delete_event_type(self, name: str) -> bool:
        def delete(conn: sqlite3.Connection) -> bool:
            return conn.execute("DELETE FROM event_types WHERE name = ?", (name,)).rowcount > 0

        return bool(await self._run(delete))


def _select(conn: sqlite3.Connection, name: str) -> EventType | None:
    rows = conn.execute(f"SELECT {EVENT_TYPE_COLUMNS} FROM event_types WHERE name = ?", (name,))
    return record(EVENT_TYPES, rows)
