"""The journal on PostgreSQL: each row carries its transaction's id (``tx``, xid8), and is read
by ``(tx, position)`` below a horizon no running transaction of this database is under
(``read_horizon``), so that no reader passes a row that commits later, although identities are
not handed out in commit order. Nor are transaction ids: publishers take theirs only once they
hold their agents' publish locks (``append.py``), so an agent's events are read in seq order.
Rows are written in the transaction they journal, folded into one of its statements where it
has few (``queries.journaled``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from herald.feed import (
    EventHead,
    JournalBounds,
    JournalPage,
    JournalPosition,
    JournalRow,
    LoopGuardTrip,
)
from herald.models import Attempt
from herald.store.journal import JournalRecord, decode, note_written
from herald.store.postgres import queries
from herald.store.postgres.rows import Connection, Runner, arrays
from herald.store.tables import ATTEMPTS


async def write(conn: Connection, row: JournalRecord | None) -> None:
    """Insert a transaction's row (None: it changed nothing the feed shows)."""
    if row is not None:
        await conn.execute(queries.INSERT_JOURNAL, row.at, row.kind, row.agent_id, row.detail)
        note_written()


async def insert_attempts(
    conn: Connection, attempts: Sequence[Attempt], row: JournalRecord | None = None
) -> None:
    """Insert attempts and, in the same statement, the transaction's journal row."""
    if row is None:
        if attempts:
            await conn.execute(queries.INSERT_ATTEMPTS, *arrays(ATTEMPTS, attempts))
        return
    if not attempts:
        await write(conn, row)
        return
    await conn.execute(
        queries.INSERT_ATTEMPTS_JOURNALED,
        *arrays(ATTEMPTS, attempts),
        row.at,
        row.kind,
        row.agent_id,
        row.detail,
    )
    note_written()


XID_WRAP = 2**32
"""A backend's transaction id is the low 32 bits of its 64-bit (xid8) one."""


async def read_horizon(conn: Connection) -> tuple[int, int, JournalPosition | None]:
    """The journal's read horizon, the snapshot's xmax and the pruned horizon.

    A row is final once every transaction that could still write one before it has ended: the
    horizon is the oldest transaction of this database still running (the snapshot's xmax when
    none runs). Transactions of other databases sharing the server never write this journal,
    so a long one there does not hold the feed back (the snapshot's xmin would). Which running
    transactions are this database's is read after the snapshot, in a statement of its own:
    one that ended in between has committed before the rows are read, in a third.
    """
    snapshot = await conn.fetchrow(queries.JOURNAL_SNAPSHOT)
    assert snapshot is not None  # a SELECT from a function of one row
    here = {int(row[0]) for row in await conn.fetch(queries.RUNNING_HERE)}
    xmax = int(snapshot["xmax"])
    running = [int(x) for x in snapshot["running"] if int(x) % XID_WRAP in here]
    return min(running, default=xmax), xmax, position(snapshot["horizon"])


def position(text: str | None) -> JournalPosition | None:
    """A position written ``tx.position`` (as the horizon is kept)."""
    if text is None:
        return None
    tx, _, at = text.partition(".")
    return JournalPosition(int(tx), int(at))


class JournalStore:
    """The journal part of ``PostgresStore``."""

    _run: Runner
    now: Callable[[], int]

    async def journal_bounds(self) -> JournalBounds:
        async def read(conn: Connection) -> JournalBounds:
            horizon, xmax, pruned = await read_horizon(conn)
            return JournalBounds(JournalPosition(horizon, 0), JournalPosition(xmax, 0), pruned)

        return await self._run(read)

    async def read_journal(
        self,
        after: JournalPosition,
        limit: int,
        *,
        inclusive: bool = False,
        agent_id: str | None = None,
        newest: bool = False,
    ) -> JournalPage:
        # Positions are whole numbers: from (tx, p) is after (tx, p - 1).
        start = after.position - 1 if inclusive else after.position

        async def read(conn: Connection) -> JournalPage:
            horizon, _, _ = await read_horizon(conn)
            query = queries.READ_NEWEST_JOURNAL if newest else queries.READ_JOURNAL
            rows = await conn.fetch(query, str(after.tx), start, str(horizon), agent_id, limit)
            found = [
                JournalRow(
                    JournalPosition(int(row["tx"]), row["position"]),
                    row["at"],
                    row["kind"],
                    row["agent_id"],
                    decode(row["detail"]),
                )
                for row in rows
            ]
            return JournalPage(found, max(after, JournalPosition(horizon, 0)))

        return await self._run(read)

    async def feed_events(
        self, ids: Sequence[str], ranges: Sequence[tuple[str, int, int]]
    ) -> list[EventHead]:
        agents = [agent_id for agent_id, _, _ in ranges]
        firsts = [first for _, first, _ in ranges]
        lasts = [last for _, _, last in ranges]

        async def select(conn: Connection) -> list[EventHead]:
            rows = await conn.fetch(queries.FEED_EVENTS, list(ids), agents, firsts, lasts)
            return [EventHead(*row) for row in rows]

        return await self._run(select)

    async def loop_guard_trips(
        self, since_ms: int, limit: int
    ) -> tuple[int, list[tuple[int, LoopGuardTrip]]]:
        async def read(conn: Connection) -> tuple[int, list[tuple[int, LoopGuardTrip]]]:
            count = int(await conn.fetchval(queries.TRIPS_SINCE, since_ms))
            rows = await conn.fetch(queries.NEWEST_TRIPS, limit)
            trips = [
                (row["at"], trip) for row in rows for trip in decode(row["detail"]).loop_guards
            ]
            return count, trips

        return await self._run(read)

    async def agent_handles(self, agent_ids: Sequence[str]) -> dict[str, str]:
        async def select(conn: Connection) -> dict[str, str]:
            rows = await conn.fetch(queries.AGENT_HANDLES, list(agent_ids))
            return {row["id"]: row["handle"] for row in rows}

        return await self._run(select)

    async def prune_journal(self, before_ms: int) -> int:
        async def prune(conn: Connection) -> int:
            horizon, _, _ = await read_horizon(conn)
            return int(await conn.fetchval(queries.PRUNE_JOURNAL, before_ms, str(horizon)))

        return await self._run(prune)
