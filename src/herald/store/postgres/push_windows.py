"""Quiet hours and digests on PostgreSQL: the windows that hold events back from being pushed,
decided as the events are stored (``herald.store.holds``), under their agents' publish locks, so
two processes publishing to one agent at once agree on its windows; summed up when they end."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from herald.models import HoldReason, NewEvent, PushWindow
from herald.store.holds import decide, looks
from herald.store.postgres.rows import Connection, Runner

# $1 agents, $2 rules, $3 times (each look a triple): the window open at each look's time.
OPEN_WINDOWS = """
SELECT DISTINCT ON (k.agent_id, k.rule, k.at) k.agent_id, k.rule, k.at, w.id
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS k (agent_id, rule, at)
JOIN push_windows w ON w.agent_id = k.agent_id AND w.rule = k.rule
    AND w.opened_at <= k.at AND w.until > k.at
ORDER BY k.agent_id, k.rule, k.at, w.opened_at
"""
INSERT_WINDOWS = """
INSERT INTO push_windows (id, agent_id, reason, rule, opened_at, until)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[])
"""
TIMED_RULES = """
SELECT handle, preferences::text AS preferences FROM agents
WHERE preferences ?| ARRAY['quiet_hours', 'digests']
"""
DUE_WINDOWS = """
SELECT w.id, w.agent_id, a.handle, w.reason, w.opened_at, w.until
FROM push_windows w JOIN agents a ON a.id = w.agent_id
WHERE w.until <= $1 ORDER BY w.until LIMIT $2
"""
NEXT_WINDOW_END = "SELECT min(until) FROM push_windows"
# Counted from the partial index of held events: the events themselves are never read. A
# scheduled event not yet due has not arrived; a cancelled one never will.
WINDOW_COUNTS = """
SELECT type, count(*) AS n FROM events
WHERE held_by = $1 AND status NOT IN ('scheduled', 'cancelled') GROUP BY type
"""
CLOSE_WINDOW = "DELETE FROM push_windows WHERE id = $1"


async def hold(
    conn: Connection,
    events: Sequence[NewEvent],
    agents: Mapping[str, str],
    nows: Sequence[int],
) -> list[NewEvent]:
    """The events with the windows that hold them (``holds.decide``), the windows they open
    written: in the transaction that stores them, once their agents' publish locks are held."""
    wanted = sorted(looks(events, agents, nows))
    rows = await conn.fetch(OPEN_WINDOWS, *(list(column) for column in zip(*wanted, strict=True)))
    found = {(row["agent_id"], row["rule"], row["at"]): row["id"] for row in rows}
    decided, opened = decide(events, agents, found, nows)
    if opened:
        await conn.execute(INSERT_WINDOWS, *(list(column) for column in zip(*opened, strict=True)))
    return decided


class PushWindowStore:
    """The quiet hours' and digests' windows of ``PostgresStore``."""

    _run: Runner
    now: Callable[[], int]

    async def timed_rules(self) -> dict[str, str]:
        async def select(conn: Connection) -> dict[str, str]:
            return {row["handle"]: row["preferences"] for row in await conn.fetch(TIMED_RULES)}

        return await self._run(select)

    async def due_windows(self, limit: int) -> list[PushWindow]:
        now = self.now()

        async def select(conn: Connection) -> list[PushWindow]:
            rows = await conn.fetch(DUE_WINDOWS, now, limit)
            return [
                PushWindow(
                    row["id"],
                    row["agent_id"],
                    row["handle"],
                    HoldReason(row["reason"]),
                    row["opened_at"],
                    row["until"],
                )
                for row in rows
            ]

        return await self._run(select)

    async def next_window_end(self) -> int | None:
        async def select(conn: Connection) -> int | None:
            found: int | None = await conn.fetchval(NEXT_WINDOW_END)
            return found

        return await self._run(select)

    async def window_counts(self, window_id: str) -> dict[str, int]:
        async def select(conn: Connection) -> dict[str, int]:
            return {row["type"]: row["n"] for row in await conn.fetch(WINDOW_COUNTS, window_id)}

        return await self._run(select)

    async def close_window(self, window_id: str) -> None:
        async def delete(conn: Connection) -> None:
            await conn.execute(CLOSE_WINDOW, window_id)

        await self._run(delete, one_statement=True)
