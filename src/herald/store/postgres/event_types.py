"""The event types the operator declares, on PostgreSQL. A change tells every process sharing
the database through the ``herald_catalogue`` channel (a trigger, see the migrations)."""

from __future__ import annotations

from collections.abc import Callable

from herald.models import EventType
from herald.store.postgres import queries
from herald.store.postgres.rows import Connection, Runner, count
from herald.store.tables import EVENT_TYPES


class EventTypeStore:
    """The event-type half of ``PostgresStore``."""

    _run: Runner
    now: Callable[[], int]

    async def put_event_type(
        self, name: str, description: str, payload_schema_json: str | None
    ) -> tuple[EventType, bool]:
        now = self.now()

        async def put(conn: Connection) -> tuple[EventType, bool]:
            row = await conn.fetchrow(
                queries.PUT_EVENT_TYPE, name, description, payload_schema_json, now
            )
            assert row is not None, "an upsert answers its row"
            return EVENT_TYPES.record(row), bool(row["created"])

        return await self._run(put)

    async def get_event_type(self, name: str) -> EventType | None:
        async def select(conn: Connection) -> EventType | None:
            row = await conn.fetchrow(queries.GET_EVENT_TYPE, name)
            return EVENT_TYPES.record(row) if row is not None else None

        return await self._run(select)

    async def list_event_types(self) -> list[EventType]:
        async def select(conn: Connection) -> list[EventType]:
            return [EVENT_TYPES.record(row) for row in await conn.fetch(queries.LIST_EVENT_TYPES)]

        return await self._run(select)

    async def delete_event_type(self, name: str) -> bool:
        async def delete(conn: Connection) -> bool:
            return count(await conn.execute(queries.DELETE_EVENT_TYPE, name)) > 0

        return await self._run(delete)
