"""Loop guards on SQLite (``herald.loop_guard``): a message between agents is counted against
its sender's limits in the transaction that stores it (the one writer runs them one at a time)."""

from __future__ import annotations

import sqlite3

from herald.loop_guard import MINUTE_MS, GuardedSend, LoopLimits, verdict

LIMITS = "SELECT exchanges, window_s, per_minute FROM loop_guard_limits WHERE agent_id = ?"

# The exchanges-th newest message between the two agents within the window, and the
# per_minute-th newest the sender sent in the last minute (null: fewer than that).
NTH_MESSAGES = """
SELECT
    (SELECT created_at FROM events
     WHERE thread IS NOT NULL AND created_at > :since
       AND ((sender = :sender AND agent_id = (SELECT id FROM agents WHERE handle = :to))
         OR (sender = :to AND agent_id = (SELECT id FROM agents WHERE handle = :sender)))
     ORDER BY created_at DESC LIMIT 1 OFFSET :exchanges - 1),
    (SELECT created_at FROM events
     WHERE thread IS NOT NULL AND sender = :sender AND created_at > :minute
     ORDER BY created_at DESC LIMIT 1 OFFSET :per_minute - 1)
"""

SET_LIMITS = """
INSERT INTO loop_guard_limits (agent_id, exchanges, window_s, per_minute) VALUES (?, ?, ?, ?)
ON CONFLICT (agent_id) DO UPDATE SET
    exchanges = excluded.exchanges, window_s = excluded.window_s, per_minute = excluded.per_minute
"""


def check(conn: sqlite3.Connection, send: GuardedSend, now: int) -> None:
    """Refuse the send (``LoopGuardTripped``) if it is over a limit; in the send's transaction."""
    limits = limits_of(conn, send.sender_id, send.defaults)
    nth_exchange, nth_sent = conn.execute(
        NTH_MESSAGES,
        {
            "sender": send.sender_handle,
            "to": send.to_handle,
            "since": now - limits.window_s * 1000,
            "exchanges": max(limits.exchanges, 1),
            "minute": now - MINUTE_MS,
            "per_minute": max(limits.per_minute, 1),
        },
    ).fetchone()
    verdict(send, limits, nth_exchange, nth_sent, now)


def limits_of(conn: sqlite3.Connection, agent_id: str, defaults: LoopLimits) -> LoopLimits:
    row = conn.execute(LIMITS, (agent_id,)).fetchone()
    return defaults if row is None else defaults.raised(*row)
