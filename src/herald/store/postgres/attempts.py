"""Recording delivery attempts, and acks, which record one for each event they finish."""

from __future__ import annotations

from collections.abc import Sequence

from herald.errors import CursorAhead
from herald.models import Attempt
from herald.store.postgres import queries
from herald.store.postgres.rows import Connection


async def acknowledge(
    conn: Connection,
    agent_id: str,
    ids: list[str],
    up_to_seq: int | None,
    consumer: str | None,
    now: int,
    unheld: bool = False,
) -> int:
    if up_to_seq is not None:
        newest = await conn.fetchval(queries.LAST_SEQ, agent_id)
        if newest is not None and up_to_seq > newest:
            raise CursorAhead(up_to_seq, newest)
    rows = await conn.fetch(queries.ACK, agent_id, ids, up_to_seq, consumer, now, unheld)
    done = [row[0] for row in rows]
    await insert_attempts(
        conn, [Attempt(event_id, now, "ack", "delivered", consumer) for event_id in done]
    )
    return len(done)


async def insert_attempts(conn: Connection, attempts: Sequence[Attempt]) -> None:
    if not attempts:
        return
    await conn.execute(
        queries.INSERT_ATTEMPTS,
        [a.event_id for a in attempts],
        [a.at for a in attempts],
        [a.mechanism for a in attempts],
        [a.outcome for a in attempts],
        [a.session for a in attempts],
        [a.error for a in attempts],
    )
