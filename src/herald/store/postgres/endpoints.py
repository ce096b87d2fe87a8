"""Endpoints and their delivery schedule, on PostgreSQL: many processes may deliver at once, so
deliveries are claimed with ``FOR UPDATE SKIP LOCKED`` and each attempt is finished in one
transaction."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from herald.endpoints import Delivery, Endpoint
from herald.events import Agent, Attempt, Event
from herald.store.postgres import queries
from herald.store.postgres.attempts import insert_attempts
from herald.store.postgres.rows import Connection, Runner, claimed_delivery, count, endpoint


class EndpointStore:
    """The endpoint half of ``PostgresStore``."""

    _run: Runner
    now: Callable[[], int]

    async def put_endpoint(self, new: Endpoint) -> None:
        async def put(conn: Connection) -> None:
            await conn.execute(queries.DELETE_ENDPOINT, new.agent_id, new.kind.value)
            await conn.execute(
                queries.INSERT_ENDPOINT,
                new.id,
                new.agent_id,
                new.kind.value,
                new.url,
                new.secret,
                new.created_at,
                new.mode,
                new.previous_secret,
                new.previous_until,
                new.state.value,
                new.disabled_reason,
                new.failing_since,
                new.last_error,
                new.last_attempt_at,
            )

        await self._run(put, transaction=True)

    async def endpoints(self, agent_id: str) -> list[Endpoint]:
        async def select(conn: Connection) -> list[Endpoint]:
            return [endpoint(row) for row in await conn.fetch(queries.LIST_ENDPOINTS, agent_id)]

        return await self._run(select)

    async def delete_endpoint(self, agent_id: str, kind: str) -> bool:
        async def delete(conn: Connection) -> bool:
            return count(await conn.execute(queries.DELETE_ENDPOINT, agent_id, kind)) > 0

        return await self._run(delete)

    async def rotate_secret(
        self, endpoint_id: str, secret: str, previous_until: int
    ) -> Endpoint | None:
        async def rotate(conn: Connection) -> Endpoint | None:
            row = await conn.fetchrow(queries.ROTATE_SECRET, endpoint_id, secret, previous_until)
            return endpoint(row) if row is not None else None

        return await self._run(rotate)

    async def schedule_deliveries(
        self,
        before_ms: int,
        limit: int,
        *,
        agents: Sequence[str] | None = None,
        not_agents: Sequence[str] = (),
    ) -> int:
        now = self.now()
        only = list(agents) if agents is not None else None

        async def schedule(conn: Connection) -> int:
            status = await conn.execute(
                queries.SCHEDULE_DELIVERIES, now, before_ms, only, list(not_agents), limit
            )
            return count(status)

        return await self._run(schedule)

    async def claim_deliveries(
        self,
        worker: str,
        limit: int,
        lease_ms: int,
        *,
        per_endpoint: int = 4,
        skip_endpoints: Sequence[str] = (),
    ) -> list[tuple[Delivery, Endpoint, Event, Agent]]:
        now = self.now()
        skip = list(skip_endpoints)

        async def claim(conn: Connection) -> list[tuple[Delivery, Endpoint, Event, Agent]]:
            rows = await conn.fetch(
                queries.CLAIM_DELIVERIES, worker, now, limit, now + lease_ms, skip, per_endpoint
            )
            return [claimed_delivery(row) for row in rows]

        return await self._run(claim)

    async def finish_delivery(
        self,
        delivery: Delivery,
        *,
        attempt: Attempt,
        next_at: int | None,
        event_status: str | None,
        endpoint_ok: bool,
        disable_reason: str | None = None,
        disable_failing_since: int | None = None,
    ) -> None:
        now = self.now()
        endpoint_id, event_id = delivery.endpoint_id, delivery.event_id
        state = "waiting" if next_at is not None else ("done" if endpoint_ok else "dead")

        async def finish(conn: Connection) -> None:
            # The endpoint's row first: replacing an endpoint locks it before its deliveries.
            if endpoint_ok:
                await conn.execute(queries.NOTE_ENDPOINT_OK, endpoint_id, now)
            else:
                await conn.execute(queries.NOTE_ENDPOINT_FAILED, endpoint_id, now, attempt.error)
            if disable_reason is not None:
                await conn.execute(queries.DISABLE_ENDPOINT, endpoint_id, disable_reason)
            elif disable_failing_since is not None:
                await conn.execute(
                    queries.DISABLE_FAILING_ENDPOINT, endpoint_id, disable_failing_since
                )
            if event_status is not None:
                await conn.execute(queries.FINISH_DELIVERY_EVENT, event_id, event_status, now)
            await conn.execute(
                queries.FINISH_DELIVERY, endpoint_id, event_id, next_at, state, attempt.error
            )
            await insert_attempts(conn, [attempt])

        await self._run(finish, transaction=True)

    async def deliveries(self, event_id: str) -> list[Delivery]:
        async def select(conn: Connection) -> list[Delivery]:
            rows = await conn.fetch(queries.LIST_DELIVERIES, event_id)
            return [Delivery(*row) for row in rows]

        return await self._run(select)
