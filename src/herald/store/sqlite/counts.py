"""The counts kept on SQLite as events and attempts are written: each agent's events by status in
its row, with when its oldest open event was published (migration 0013), and attempts by way and
outcome in ``attempt_counts``.

A publish counts its events in the UPDATE that takes their seqs, a record of pushes in one UPDATE of
its own (``attempts.mark_pushed``), a batch of delivery results too (``endpoints.COUNT_FINISHED``,
with ``OLDEST_OPEN_AFTER_FINISH``). Every other statement that changes an event's status, or deletes
finished events, tells a ``StatusChanges`` what it changed (it knows, or reads first, each event's
status before), and ``apply`` adds that up in one UPDATE per agent. SQLite has no trigger per
statement: the triggers per row that did this (until migration 0014) cost an acknowledgement of a
hundred events about as much again as the acknowledgement itself, and a count of attempts one upsert
per attempt."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from herald.models import Attempt
from herald.store.sqlite.rows import OPEN

OPEN_STATUSES = ("pending", "sent")

# The oldest open event is looked for again (one seek in the open events' index) only for an
# agent whose events opened or closed.
ADD_COUNTS = f"""
UPDATE agents SET
    pending_events = pending_events + :pending,
    sent_events = sent_events + :sent,
    delivered_events = delivered_events + :delivered,
    expired_events = expired_events + :expired,
    dead_events = dead_events + :dead,
    oldest_open_at = CASE WHEN NOT :reopened THEN oldest_open_at ELSE (
        SELECT e.created_at FROM events e INDEXED BY events_open
        WHERE e.agent_id = agents.id AND e.{OPEN}
        ORDER BY e.seq LIMIT 1
    ) END
WHERE id = :agent
"""
ADD_ATTEMPTS = """
INSERT INTO attempt_counts (mechanism, outcome, recorded) VALUES (?, ?, ?)
ON CONFLICT (mechanism, outcome) DO UPDATE SET recorded = recorded + excluded.recorded
"""


class StatusChanges:
    """What one statement changed, per agent, until ``apply`` writes it to the agents' rows."""

    def __init__(self) -> None:
        self._deltas: dict[str, Counter[str]] = {}
        self._reopened: set[str] = set()

    def changed(self, agent_id: str, old: str, new: str, count: int = 1) -> None:
        """``count`` events of the agent went from status ``old`` to ``new``."""
        if old == new or count == 0:
            return
        deltas = self._deltas.setdefault(agent_id, Counter())
        deltas[old] -= count
        deltas[new] += count
        if (old in OPEN_STATUSES) != (new in OPEN_STATUSES):
            self._reopened.add(agent_id)

    def deleted(self, agent_id: str, status: str, count: int = 1) -> None:
        """``count`` events of the agent in ``status`` were deleted."""
        self._deltas.setdefault(agent_id, Counter())[status] -= count
        if status in OPEN_STATUSES:
            self._reopened.add(agent_id)

    def apply(self, conn: sqlite3.Connection) -> None:
        rows = [
            {
                "agent": agent_id,
                "pending": deltas["pending"],
                "sent": deltas["sent"],
                "delivered": deltas["delivered"],
                "expired": deltas["expired"],
                "dead": deltas["dead"],
                "reopened": agent_id in self._reopened,
            }
            for agent_id, deltas in sorted(self._deltas.items())
        ]
        conn.executemany(ADD_COUNTS, rows)
        self._deltas.clear()
        self._reopened.clear()


def changes_of(rows: Iterable[Any], new: str) -> StatusChanges:
    """The changes to ``new`` of rows of (agent id, old status, count)."""
    changes = StatusChanges()
    for agent_id, old, count in rows:
        changes.changed(agent_id, old, new, count)
    return changes


def attempt_counts(attempts: Sequence[Attempt]) -> list[tuple[str, str, int]]:
    """The ``ADD_ATTEMPTS`` rows that count ``attempts`` in ``attempt_counts``: one upsert per
    way and outcome, (way, outcome, how many)."""
    counted = Counter((a.mechanism, a.outcome) for a in attempts)
    return [(m, o, n) for (m, o), n in sorted(counted.items())]
