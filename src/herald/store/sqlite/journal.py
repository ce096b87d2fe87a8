"""The journal on SQLite: one writer, so a row's position is its commit order (``tx`` is 0).
Rows are written by each operation in its own transaction (``write``); the feed reads them."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from herald.feed import (
    EventHead,
    JournalBounds,
    JournalPage,
    JournalPosition,
    JournalRow,
    LoopGuardTrip,
)
from herald.store.journal import JournalRecord, decode, note_written
from herald.store.sqlite.rows import Operation, as_json

HORIZON_SETTING = "journal_horizon"
"""The newest position pruned, kept in the settings table as ``tx.position``."""


def write(conn: sqlite3.Connection, row: JournalRecord | None) -> None:
    """Insert the operation's row (None: it changed nothing the feed shows)."""
    if row is None:
        return
    conn.execute(
        "INSERT INTO journal (at, kind, agent_id, detail) VALUES (?, ?, ?, ?)",
        (row.at, row.kind, row.agent_id, row.detail),
    )
    note_written()


def horizon(value: str | None) -> JournalPosition | None:
    if value is None:
        return None
    tx, _, position = value.partition(".")
    return JournalPosition(int(tx), int(position))


# Both read the partial index of the journal's trips (journal_loop_guard_trips), never the rest.
TRIPS_SINCE = "SELECT count(*) FROM journal WHERE kind = 'loop_guard' AND at >= ?"
NEWEST_TRIPS = (
    "SELECT at, detail FROM journal WHERE kind = 'loop_guard' ORDER BY at DESC, position DESC"
    " LIMIT ?"
)


class JournalStore:
    """The journal part of ``SQLiteStore``."""

    _run: Callable[[Operation[Any]], Awaitable[Any]]

    async def journal_bounds(self) -> JournalBounds:
        def read(conn: sqlite3.Connection) -> JournalBounds:
            (newest,) = conn.execute("SELECT coalesce(max(position), 0) FROM journal").fetchone()
            row = conn.execute(
                "SELECT value FROM settings WHERE name = ?", (HORIZON_SETTING,)
            ).fetchone()
            head = JournalPosition(0, newest)
            return JournalBounds(head, head, horizon(row[0] if row else None))

        result: JournalBounds = await self._run(read)
        return result

    async def read_journal(
        self,
        after: JournalPosition,
        limit: int,
        *,
        inclusive: bool = False,
        agent_id: str | None = None,
        newest: bool = False,
    ) -> JournalPage:
        # Positions of another store (tx > 0: PostgreSQL's) are after every row of this one.
        start = after.position if after.tx == 0 else None
        params = {
            "start": start,
            "inclusive": inclusive,
            "agent": agent_id,
            "limit": limit,
        }

        def read(conn: sqlite3.Connection) -> JournalPage:
            rows = conn.execute(
                "SELECT position, at, kind, agent_id, detail FROM journal"
                " WHERE :start IS NOT NULL AND (position > :start"
                "   OR (:inclusive AND position = :start))"
                " AND (:agent IS NULL OR agent_id = :agent OR agent_id IS NULL)"
                f" ORDER BY position {'DESC' if newest else ''} LIMIT :limit",
                params,
            ).fetchall()
            if newest:
                rows.reverse()
            (last,) = conn.execute("SELECT coalesce(max(position), 0) FROM journal").fetchone()
            return JournalPage(
                [
                    JournalRow(
                        JournalPosition(0, row["position"]),
                        row["at"],
                        row["kind"],
                        row["agent_id"],
                        decode(row["detail"]),
                    )
                    for row in rows
                ],
                max(after, JournalPosition(0, last)),
            )

        result: JournalPage = await self._run(read)
        return result

    async def feed_events(
        self, ids: Sequence[str], ranges: Sequence[tuple[str, int, int]]
    ) -> list[EventHead]:
        columns = "e.id, e.agent_id, a.handle, e.seq, e.type"
        params = {"ids": as_json(list(ids)), "ranges": as_json(list(ranges))}

        def select(conn: sqlite3.Connection) -> list[EventHead]:
            rows = conn.execute(
                f"SELECT {columns} FROM events e JOIN agents a ON a.id = e.agent_id"
                " WHERE e.id IN (SELECT value FROM json_each(:ids))"
                f" UNION ALL SELECT {columns} FROM json_each(:ranges) r"
                " JOIN events e ON e.agent_id = r.value ->> 0"
                " AND e.seq BETWEEN r.value ->> 1 AND r.value ->> 2"
                " JOIN agents a ON a.id = e.agent_id",
                params,
            )
            return [EventHead(*row) for row in rows]

        result: list[EventHead] = await self._run(select)
        return result

    async def loop_guard_trips(
        self, since_ms: int, limit: int
    ) -> tuple[int, list[tuple[int, LoopGuardTrip]]]:
        def read(conn: sqlite3.Connection) -> tuple[int, list[tuple[int, LoopGuardTrip]]]:
            (count,) = conn.execute(TRIPS_SINCE, (since_ms,)).fetchone()
            rows = conn.execute(NEWEST_TRIPS, (limit,)).fetchall()
            return count, [(at, trip) for at, detail in rows for trip in decode(detail).loop_guards]

        result: tuple[int, list[tuple[int, LoopGuardTrip]]] = await self._run(read)
        return result

    async def agent_handles(self, agent_ids: Sequence[str]) -> dict[str, str]:
        def select(conn: sqlite3.Connection) -> dict[str, str]:
            rows = conn.execute(
                "SELECT id, handle FROM agents WHERE id IN (SELECT value FROM json_each(?))",
                (as_json(list(agent_ids)),),
            )
            return {row[0]: row[1] for row in rows}

        result: dict[str, str] = await self._run(select)
        return result

    async def prune_journal(self, before_ms: int) -> int:
        def prune(conn: sqlite3.Connection) -> int:
            # In position order from the oldest, read no further than the first row kept.
            kept = conn.execute(
                "SELECT coalesce((SELECT position FROM journal WHERE at >= ?"
                " ORDER BY position LIMIT 1), (SELECT max(position) FROM journal))",
                (before_ms,),
            ).fetchone()[0]
            if kept is None:
                return 0
            newest_gone = conn.execute(
                "SELECT max(position) FROM journal WHERE position < ?", (kept,)
            ).fetchone()[0]
            if newest_gone is None:
                return 0
            gone = conn.execute("DELETE FROM journal WHERE position < ?", (kept,)).rowcount
            conn.execute(
                "INSERT INTO settings (name, value) VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (HORIZON_SETTING, f"0.{newest_gone}"),
            )
            return int(gone)

        result: int = await self._run(prune)
        return result
