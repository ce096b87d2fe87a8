"""Endpoints and their delivery schedule, on PostgreSQL: many processes may deliver at once, so
deliveries are claimed with ``FOR UPDATE SKIP LOCKED``, and a batch of attempts is finished in
one transaction."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from herald.feed import EndpointChange, JournalEntry
from herald.models import REFUSED_PREFIX, Agent, Delivery, Endpoint, Event, Finished, OneClaim
from herald.store.journal import EndpointLook, endpoint_changes, finished_groups, record
from herald.store.postgres import queries
from herald.store.postgres.journal import insert_attempts, write
from herald.store.postgres.rows import Connection, Runner, claimed_delivery, count, endpoint
from herald.store.postgres.subscriptions import note_attempts
from herald.store.rules import delivery_updates, endpoint_notes, event_statuses
from herald.store.tables import DELIVERIES, ENDPOINTS


class EndpointStore:
    """The endpoint half of ``PostgresStore``."""

    _run: Runner
    now: Callable[[], int]

    async def put_endpoint(self, new: Endpoint) -> None:
        now = self.now()

        async def put(conn: Connection) -> None:
            await conn.execute(queries.DELETE_ENDPOINT, new.agent_id, new.kind.value)
            await conn.execute(queries.INSERT_ENDPOINT, *ENDPOINTS.values(new))
            await _journal(conn, now, [(new.id, new.agent_id, new.kind.value)], "created")

        await self._run(put, transaction=True)

    async def endpoints(self, agent_id: str) -> list[Endpoint]:
        async def select(conn: Connection) -> list[Endpoint]:
            return [endpoint(row) for row in await conn.fetch(queries.LIST_ENDPOINTS, agent_id)]

        return await self._run(select)

    async def any_endpoints(self) -> bool:
        async def select(conn: Connection) -> bool:
            return bool(await conn.fetchval("SELECT EXISTS (SELECT 1 FROM endpoints)"))

        return await self._run(select)

    async def endpoint_page(
        self, after: str | None, limit: int, *, failing: bool
    ) -> list[tuple[Endpoint, str]]:
        async def select(conn: Connection) -> list[tuple[Endpoint, str]]:
            rows = await conn.fetch(queries.ENDPOINT_PAGE, after or "", limit, failing)
            return [(endpoint(row), row["agent_handle"]) for row in rows]

        return await self._run(select)

    async def delete_endpoint(self, agent_id: str, kind: str) -> bool:
        now = self.now()

        async def delete(conn: Connection) -> bool:
            rows = await conn.fetch(queries.DELETE_ENDPOINT, agent_id, kind)
            await _journal(conn, now, [(row["id"], agent_id, kind) for row in rows], "deleted")
            return bool(rows)

        return await self._run(delete, transaction=True)

    async def rotate_secret(
        self, endpoint_id: str, secret: str, previous_until: int
    ) -> Endpoint | None:
        async def rotate(conn: Connection) -> Endpoint | None:
            row = await conn.fetchrow(queries.ROTATE_SECRET, endpoint_id, secret, previous_until)
            return endpoint(row) if row is not None else None

        return await self._run(rotate)

    async def refused_endpoints(self) -> list[Endpoint]:
        async def select(conn: Connection) -> list[Endpoint]:
            rows = await conn.fetch(queries.REFUSED_ENDPOINTS, REFUSED_PREFIX)
            return [endpoint(row) for row in rows]

        return await self._run(select)

    async def enable_endpoint(self, endpoint_id: str, disabled_reason: str) -> bool:
        now = self.now()

        async def enable(conn: Connection) -> bool:
            rows = await conn.fetch(queries.ENABLE_ENDPOINT, endpoint_id, disabled_reason)
            enabled = [(row["id"], row["agent_id"], row["kind"]) for row in rows]
            await _journal(conn, now, enabled, "enabled")
            return bool(rows)

        return await self._run(enable, transaction=True)

    async def schedule_deliveries(
        self,
        before_ms: int,
        limit: int,
        *,
        agents: Sequence[str] | None = None,
        not_agents: Sequence[str] = (),
        push_grace_ms: int | None = None,
    ) -> int:
        now = self.now()
        only = list(agents) if agents is not None else None
        args: list[object] = [now, before_ms, only, list(not_agents), limit]
        query = queries.SCHEDULE_DELIVERIES
        if push_grace_ms is not None:
            query = queries.SCHEDULE_DELIVERIES_PUSH_GRACE
            args.append(push_grace_ms)

        async def schedule(conn: Connection) -> int:
            scheduled = count(await conn.execute(query, *args))
            await conn.execute(queries.SCHEDULED_THROUGH, now, only, list(not_agents))
            return scheduled

        return await self._run(schedule)

    async def claim_deliveries(
        self,
        worker: str,
        limit: int,
        lease_ms: int,
        *,
        per_endpoint: int = 4,
        in_flight: Mapping[str, int] | None = None,
        pace_ms: float | None = None,
    ) -> list[tuple[Delivery, Endpoint, Event, Agent]]:
        now = self.now()
        busy = dict(in_flight or {})

        async def claim(conn: Connection) -> list[tuple[Delivery, Endpoint, Event, Agent]]:
            rows = await conn.fetch(
                queries.CLAIM_DELIVERIES,
                worker,
                now,
                limit,
                now + lease_ms,
                per_endpoint,
                list(busy),
                list(busy.values()),
                pace_ms,
            )
            return [claimed_delivery(row) for row in rows]

        return await self._run(claim)

    async def release_claims(self, claimant: str | None = None, one: OneClaim | None = None) -> int:
        parts = (one.endpoint_id, one.event_id, one.runs_out_by) if one else (None, None, None)

        async def release(conn: Connection) -> int:
            return count(await conn.execute(queries.RELEASE_CLAIMS, claimant, *parts))

        return await self._run(release)

    async def finish_deliveries(self, finished: Sequence[Finished]) -> list[tuple[str, str]]:
        now = self.now()
        notes = endpoint_notes(finished)
        statuses = event_statuses(finished)
        deliveries = delivery_updates(finished)
        disables = [
            n for n in notes if n.disable_reason is not None or n.disable_failing_since is not None
        ]
        looked_at = [note.endpoint_id for note in notes]

        async def finish(conn: Connection) -> list[tuple[str, str]]:
            before = _looks(await conn.fetch(queries.LOCK_ENDPOINT_LOOKS, looked_at))
            await conn.execute(
                queries.NOTE_ENDPOINTS,
                looked_at,
                now,
                [n.ok for n in notes],
                [n.recovered for n in notes],
                [n.error for n in notes],
            )
            if disables:
                await conn.execute(
                    queries.DISABLE_ENDPOINTS,
                    [n.endpoint_id for n in disables],
                    [n.disable_reason for n in disables],
                    [n.disable_failing_since for n in disables],
                )
            suspended = await note_attempts(conn, finished, now)
            if statuses:
                await conn.execute(
                    queries.FINISH_DELIVERY_EVENTS,
                    [event_id for event_id, _ in statuses],
                    [status for _, status in statuses],
                    now,
                )
            await conn.execute(
                queries.FINISH_DELIVERIES,
                [d.endpoint_id for d in deliveries],
                [d.event_id for d in deliveries],
                [d.next_at for d in deliveries],
                [d.state for d in deliveries],
                [d.error for d in deliveries],
            )
            after = _looks(await conn.fetch(queries.ENDPOINT_LOOKS, looked_at))
            entry = JournalEntry(
                attempts=finished_groups(finished),
                endpoints=endpoint_changes(before, after),
            )
            await insert_attempts(
                conn,
                [item.attempt for item in finished],
                record(now, "deliveries", None, entry),
            )
            return suspended

        return await self._run(finish, transaction=True)

    async def deliveries(self, event_id: str) -> list[Delivery]:
        async def select(conn: Connection) -> list[Delivery]:
            rows = await conn.fetch(queries.LIST_DELIVERIES, event_id)
            return [DELIVERIES.record(row) for row in rows]

        return await self._run(select)


def _looks(rows: Sequence[Any]) -> list[EndpointLook]:
    return [EndpointLook(*row) for row in rows]


async def _journal(
    conn: Connection, now: int, endpoints: list[tuple[str, str, str]], state: str
) -> None:
    """The journal row of endpoints (id, agent, kind) that were created, deleted or enabled."""
    entry = JournalEntry(
        endpoints=tuple(EndpointChange(*endpoint, state) for endpoint in endpoints)
    )
    await write(conn, record(now, "endpoint", endpoints[0][1] if endpoints else None, entry))
