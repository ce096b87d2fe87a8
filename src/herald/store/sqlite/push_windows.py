"""Quiet hours and digests on SQLite: the windows that hold events back from being pushed,
decided as the events are stored (``herald.store.holds``), and summed up when they end."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from herald.models import HoldReason, NewEvent, PushWindow
from herald.store.holds import decide, looks
from herald.store.sqlite.connection import OpenWindows, WriterConnection
from herald.store.sqlite.rows import Operation

OPEN_WINDOW = """
SELECT id, opened_at, until FROM push_windows
WHERE agent_id = ? AND rule = ? AND opened_at <= ? AND until > ?
ORDER BY opened_at LIMIT 1
"""
INSERT_WINDOW = (
    "INSERT INTO push_windows (id, agent_id, reason, rule, opened_at, until)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)
TIMED_RULES = """
SELECT handle, preferences FROM agents INDEXED BY agents_timed_rules
WHERE json_extract(preferences, '$.quiet_hours') IS NOT NULL
    OR json_extract(preferences, '$.digests') IS NOT NULL
"""
DUE_WINDOWS = """
SELECT w.id, w.agent_id, a.handle, w.reason, w.opened_at, w.until
FROM push_windows w JOIN agents a ON a.id = w.agent_id
WHERE w.until <= ? ORDER BY w.until LIMIT ?
"""
NEXT_WINDOW_END = "SELECT min(until) FROM push_windows"
# Counted from the partial index of held events: the events themselves are never read. A
# scheduled event not yet due has not arrived; a cancelled one never will.
WINDOW_COUNTS = """
SELECT type, count(*) FROM events INDEXED BY events_held_by
WHERE held_by = ? AND status NOT IN ('scheduled', 'cancelled') GROUP BY type
"""
CLOSE_WINDOW = "DELETE FROM push_windows WHERE id = ?"


def hold(
    conn: sqlite3.Connection,
    events: Sequence[NewEvent],
    agents: Mapping[str, str],
    nows: Sequence[int],
) -> list[NewEvent]:
    """The events with the windows that hold them (``holds.decide``), the windows they open
    written: in the transaction that stores them. A window the writer's connection remembers
    (``OpenWindows``) is not read again: a held publish then costs no statement to find it."""
    remembered = conn.open_windows if isinstance(conn, WriterConnection) else OpenWindows()
    found = {}
    for agent_id, rule, now in looks(events, agents, nows):
        window_id = remembered.open_at(agent_id, rule, now)
        if window_id is None:
            row = conn.execute(OPEN_WINDOW, (agent_id, rule, now, now)).fetchone()
            if row is None:
                continue
            window_id = row[0]
            remembered.remember(agent_id, rule, (window_id, row[1], row[2]))
        found[agent_id, rule, now] = window_id
    decided, opened = decide(events, agents, found, nows)
    if opened:
        conn.executemany(INSERT_WINDOW, opened)
        for window_id, agent_id, _, rule, opened_at, until in opened:
            remembered.remember(agent_id, rule, (window_id, opened_at, until))
    return decided


class PushWindowStore:
    """The quiet hours' and digests' windows of ``SQLiteStore``."""

    _run: Callable[[Operation[Any]], Awaitable[Any]]
    now: Callable[[], int]

    async def timed_rules(self) -> dict[str, str]:
        def select(conn: sqlite3.Connection) -> dict[str, str]:
            return {handle: preferences for handle, preferences in conn.execute(TIMED_RULES)}

        result: dict[str, str] = await self._run(select)
        return result

    async def due_windows(self, limit: int) -> list[PushWindow]:
        now = self.now()

        def select(conn: sqlite3.Connection) -> list[PushWindow]:
            rows = conn.execute(DUE_WINDOWS, (now, limit))
            return [
                PushWindow(id_, agent_id, handle, HoldReason(reason), opened_at, until)
                for id_, agent_id, handle, reason, opened_at, until in rows
            ]

        result: list[PushWindow] = await self._run(select)
        return result

    async def next_window_end(self) -> int | None:
        def select(conn: sqlite3.Connection) -> int | None:
            found: int | None = conn.execute(NEXT_WINDOW_END).fetchone()[0]
            return found

        result: int | None = await self._run(select)
        return result

    async def window_counts(self, window_id: str) -> dict[str, int]:
        def select(conn: sqlite3.Connection) -> dict[str, int]:
            return {type_: n for type_, n in conn.execute(WINDOW_COUNTS, (window_id,))}

        result: dict[str, int] = await self._run(select)
        return result

    async def close_window(self, window_id: str) -> None:
        def delete(conn: sqlite3.Connection) -> None:
            conn.execute(CLOSE_WINDOW, (window_id,))
            if isinstance(conn, WriterConnection):
                conn.open_windows.closed(window_id)

        await self._run(delete)
