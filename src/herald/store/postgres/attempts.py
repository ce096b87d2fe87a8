"""Acknowledgements, which record an attempt for each event they finish, and recording attempts
with the transaction's journal row."""

from __future__ import annotations

from collections.abc import Sequence

from herald.feed import JournalEntry
from herald.models import EVERY_EVENT, Attempt, EventMatch
from herald.store.journal import attempt_groups, record
from herald.store.postgres import queries
from herald.store.postgres.journal import insert_attempts
from herald.store.postgres.rows import Connection
from herald.store.rules import check_cursor, like_patterns


async def acknowledge(
    conn: Connection,
    agent_id: str,
    ids: list[str],
    up_to_seq: int | None,
    consumer: str | None,
    now: int,
    unheld: bool = False,
    match: EventMatch = EVERY_EVENT,
) -> list[tuple[str, int]]:
    """Mark the agent's events delivered as ``Store.ack`` says; returns the id and
    ``created_at`` of each (their attempts are the caller's to record, with whatever else its
    transaction records)."""
    if up_to_seq is not None:
        check_cursor(up_to_seq, await conn.fetchval(queries.LAST_SEQ, agent_id))
    if up_to_seq is not None and consumer is not None and not ids and not unheld:
        rows = await conn.fetch(
            queries.ACK_HELD, agent_id, up_to_seq, consumer, now, *matching(match)
        )
        return [(row[0], row[1]) for row in rows]
    rows = await conn.fetch(
        queries.ACK, agent_id, ids, up_to_seq, consumer, now, unheld, *matching(match)
    )
    return [(row[0], row[1]) for row in rows]


async def write_attempts(
    conn: Connection,
    attempts: Sequence[Attempt],
    now: int,
    kind: str,
    agent_id: str | None,
) -> None:
    """Insert the attempts of an operation, and its journal row, which names them, at once."""
    entry = JournalEntry(attempts=attempt_groups(attempts))
    await insert_attempts(conn, attempts, record(now, kind, agent_id, entry))


def matching(match: EventMatch) -> tuple[list[str], str | None]:
    """The parameters of ``queries.MATCHING``."""
    return like_patterns(match.types), match.sender
