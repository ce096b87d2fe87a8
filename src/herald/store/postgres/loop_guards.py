"""Loop guards on PostgreSQL (``herald.loop_guard``): a message between agents is counted
against its sender's limits in the transaction that stores it, under advisory locks on the two
agents' pair and on the sender, so that sends from any process are counted one after another."""

from __future__ import annotations

from herald.loop_guard import MINUTE_MS, GuardedSend, LoopLimits, verdict
from herald.store.postgres.rows import Connection

LOOP_GUARD_LOCK_CLASS = 0x6C6F6F70
"""The first half of the key of every loop guard lock; the second is ``hashtext`` of the pair
of handles, or of the sender's handle (a pair key holds a space, a handle cannot)."""

LOCK = f"SELECT pg_advisory_xact_lock({LOOP_GUARD_LOCK_CLASS}, hashtext($1))"

LIMITS = "SELECT exchanges, window_s, per_minute FROM loop_guard_limits WHERE agent_id = $1"

# The exchanges-th newest message between the two agents within the window, and the
# per_minute-th newest the sender sent in the last minute (null: fewer than that).
NTH_MESSAGES = """
SELECT
    (SELECT created_at FROM events
     WHERE thread IS NOT NULL AND created_at > $3
       AND ((sender = $1 AND agent_id = (SELECT id FROM agents WHERE handle = $2))
         OR (sender = $2 AND agent_id = (SELECT id FROM agents WHERE handle = $1)))
     ORDER BY created_at DESC OFFSET $4 - 1 LIMIT 1),
    (SELECT created_at FROM events
     WHERE thread IS NOT NULL AND sender = $1 AND created_at > $5
     ORDER BY created_at DESC OFFSET $6 - 1 LIMIT 1)
"""

SET_LIMITS = """
INSERT INTO loop_guard_limits (agent_id, exchanges, window_s, per_minute) VALUES ($1, $2, $3, $4)
ON CONFLICT (agent_id) DO UPDATE SET
    exchanges = excluded.exchanges, window_s = excluded.window_s, per_minute = excluded.per_minute
"""


async def check(conn: Connection, send: GuardedSend, now: int) -> None:
    """Refuse the send (``LoopGuardTripped``) if it is over a limit; in the send's transaction."""
    pair = " ".join(sorted((send.sender_handle, send.to_handle)))
    await conn.execute(LOCK, pair)
    await conn.execute(LOCK, send.sender_handle)
    limits = await limits_of(conn, send.sender_id, send.defaults)
    row = await conn.fetchrow(
        NTH_MESSAGES,
        send.sender_handle,
        send.to_handle,
        now - limits.window_s * 1000,
        max(limits.exchanges, 1),
        now - MINUTE_MS,
        max(limits.per_minute, 1),
    )
    assert row is not None  # a SELECT without FROM answers one row
    verdict(send, limits, row[0], row[1], now)


async def limits_of(conn: Connection, agent_id: str, defaults: LoopLimits) -> LoopLimits:
    row = await conn.fetchrow(LIMITS, agent_id)
    return defaults if row is None else defaults.raised(*row)
