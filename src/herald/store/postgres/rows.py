"""Pooled connections, the operations run on them, and the rows they answer with."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

import asyncpg

from herald.models import Agent, Delivery, Endpoint, Event, EventStatus, Kind, State
from herald.store.tables import Table, Type

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

T = TypeVar("T")
Connection: TypeAlias = "PoolConnectionProxy[asyncpg.Record]"
Operation: TypeAlias = Callable[[Connection], Awaitable[T]]


class Runner(Protocol):
    """Runs an operation on a pooled connection, in a transaction if asked."""

    async def __call__(self, operation: Operation[T], *, transaction: bool = False) -> T: ...


def column_list(table: Table[Any], alias: str = "", prefix: str = "") -> str:
    """The table's columns for a SELECT, JSON as text, each named ``prefix`` + its name:
    ``id, data::text AS data`` (or ``e.id AS e_id, e.data::text AS e_data``)."""
    source = f"{alias}." if alias else ""
    return ", ".join(
        f"{source}{c.name}{'::text' if c.type is Type.JSON else ''}"
        + (f" AS {prefix}{c.name}" if prefix or c.type is Type.JSON else "")
        for c in table.columns
    )


def names(table: Table[Any]) -> str:
    """The table's column names, for an INSERT: ``id, agent_id, ...``."""
    return ", ".join(table.names)


def placeholders(table: Table[Any], first: int = 1) -> str:
    """The parameters of one row of the table, numbered from ``first``, JSON cast to JSONB."""
    return ", ".join(
        f"${n}{'::jsonb' if c.type is Type.JSON else ''}"
        for n, c in enumerate(table.columns, start=first)
    )


def event(row: asyncpg.Record) -> Event:
    return Event(
        id=row["id"],
        agent_id=row["agent_id"],
        seq=row["seq"],
        type=row["type"],
        text=row["text"],
        data_json=row["data"],
        created_at=row["created_at"],
        status=EventStatus(row["status"]),
        dedupe_key=row["dedupe_key"],
        expires_at=row["expires_at"],
        status_at=row["status_at"],
        sender=row["sender"],
        reply_to=row["reply_to"],
        reply_schema_json=row["reply_schema"],
    )


def endpoint(values: Iterable[Any]) -> Endpoint:
    """An endpoint from the values of ``ENDPOINT_COLUMNS``, in order."""
    fields = list(values)
    fields[2] = Kind(fields[2])
    fields[9] = State(fields[9])
    return Endpoint(*fields)


def claimed_delivery(row: asyncpg.Record) -> tuple[Delivery, Endpoint, Event, Agent]:
    """A row of ``CLAIM_DELIVERIES``: delivery, endpoint, event and agent columns in turn."""
    values = tuple(row)
    fields = list(values[20:34])  # EVENT_COLUMNS, in the order of Event's fields
    fields[7] = EventStatus(fields[7])
    return Delivery(*values[:6]), endpoint(values[6:20]), Event(*fields), Agent(*values[34:])


def count(status: str) -> int:
    """The row count of a command status such as ``UPDATE 3``."""
    return int(status.rsplit(" ", 1)[-1])
