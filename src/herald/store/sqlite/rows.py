"""The connection's operations, the columns the store reads, and the rows it answers with."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from herald.models import Event, EventStatus
from herald.store.tables import Table

T = TypeVar("T")
Operation = Callable[[sqlite3.Connection], T]

EVENT_COLUMNS = (
    "id, agent_id, seq, type, text, data, created_at, status, dedupe_key, expires_at, status_at,"
    " sender, reply_to, reply_schema"
)


def agent_columns(table: str) -> str:
    """The values of ``Agent``'s fields, in order, from the agents table named ``table`` in the
    query. Its webhook_url is its webhook endpoint's: the agents.webhook_url column is no longer
    kept (a second copy went stale when the webhook changed)."""
    return (
        f"{table}.id, {table}.handle, {table}.key_hash, {table}.created_at,"
        f" (SELECT hook.url FROM endpoints hook WHERE hook.agent_id = {table}.id"
        " AND hook.kind = 'webhook'),"
        f" {table}.delivery, {table}.last_seq"
    )


AGENT_COLUMNS = agent_columns("agents")
OPEN = "status IN ('pending', 'sent')"
UNEXPIRED = "(expires_at IS NULL OR expires_at > :now)"


def column_list(table: Table[Any], alias: str = "") -> str:
    """The table's columns, for a SELECT or an INSERT: ``id, seq`` (or ``e.id, e.seq``)."""
    return ", ".join(f"{alias}.{name}" if alias else name for name in table.names)


def insert_sql(table: Table[Any], verb: str = "INSERT") -> str:
    """An INSERT of one row of the table, its values in the order of its columns."""
    marks = ", ".join("?" * len(table.names))
    return f"{verb} INTO {table.name} ({column_list(table)}) VALUES ({marks})"


def event(row: Sequence[Any]) -> Event:
    values = list(row)
    values[7] = EventStatus(values[7])
    return Event(*values)


def event_row(event: Event) -> tuple[Any, ...]:
    """An event as the values of ``EVENT_COLUMNS``, in order."""
    return (
        event.id,
        event.agent_id,
        event.seq,
        event.type,
        event.text,
        event.data_json,
        event.created_at,
        event.status.value,
        event.dedupe_key,
        event.expires_at,
        event.status_at,
        event.sender,
        event.reply_to,
        event.reply_schema_json,
    )


def delivered(event: Event, now: int) -> Event:
    return replace(event, status=EventStatus.DELIVERED, status_at=now)


def chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def as_json(rows: Sequence[Any]) -> str:
    """Rows as one JSON array, for a statement that reads them with ``json_each``: one statement
    for a whole batch, where ``executemany`` would run one per row, each a round trip between
    SQLite and Python that must win the GIL back from the event loop."""
    return json.dumps(rows, separators=(",", ":"), ensure_ascii=False)
