"""Recording delivery attempts, and acks, which record one for each event they finish."""

from __future__ import annotations

from collections.abc import Sequence

from herald.models import EVERY_EVENT, Attempt, EventMatch
from herald.store.postgres import queries
from herald.store.postgres.rows import Connection, arrays
from herald.store.rules import ack_attempts, check_cursor, like_patterns
from herald.store.tables import ATTEMPTS


async def acknowledge(
    conn: Connection,
    agent_id: str,
    ids: list[str],
    up_to_seq: int | None,
    consumer: str | None,
    now: int,
    unheld: bool = False,
    match: EventMatch = EVERY_EVENT,
) -> list[int]:
    """``Store.ack`` on ``conn``; returns the ``created_at`` of each event it finished."""
    if up_to_seq is not None:
        check_cursor(up_to_seq, await conn.fetchval(queries.LAST_SEQ, agent_id))
    rows = await conn.fetch(
        queries.ACK, agent_id, ids, up_to_seq, consumer, now, unheld, *matching(match)
    )
    await insert_attempts(conn, ack_attempts([row[0] for row in rows], now, consumer))
    return [row[1] for row in rows]


async def insert_attempts(conn: Connection, attempts: Sequence[Attempt]) -> None:
    if attempts:
        await conn.execute(queries.INSERT_ATTEMPTS, *arrays(ATTEMPTS, attempts))


def matching(match: EventMatch) -> tuple[list[str], str | None]:
    """The parameters of ``queries.MATCHING``."""
    return like_patterns(match.types), match.sender
