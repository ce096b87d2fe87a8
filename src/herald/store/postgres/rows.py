"""Pooled connections, the operations run on them, the SQL of each table's columns, and the rows
they answer with: ``asyncpg.Record``s, read by column name."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

import asyncpg

from herald.models import Agent, Delivery, Endpoint, Event
from herald.store.tables import AGENTS, DELIVERIES, ENDPOINTS, EVENTS, M, Table, Type

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

T = TypeVar("T")
Connection: TypeAlias = "PoolConnectionProxy[asyncpg.Record]"
Operation: TypeAlias = Callable[[Connection], Awaitable[T]]


class Runner(Protocol):
    """Runs an operation on a pooled connection, in a transaction if asked (or run again, as a
    transaction is, if it is one statement)."""

    async def __call__(
        self, operation: Operation[T], *, transaction: bool = False, one_statement: bool = False
    ) -> T: ...


def column_list(table: Table[Any], alias: str = "", prefix: str = "") -> str:
    """The table's columns and extra values for a SELECT, JSON as text, each named ``prefix`` +
    its name: ``id, data::text AS data`` (or ``e.id AS e_id, e.data::text AS e_data``)."""
    source = f"{alias}." if alias else ""
    stored = [
        f"{source}{c.name}{'::text' if c.type is Type.JSON else ''}"
        + (f" AS {prefix}{c.name}" if prefix or c.type is Type.JSON else "")
        for c in table.columns
    ]
    extra = [
        f"{c.expression.format(table=alias or table.name)} AS {prefix}{c.name}" for c in table.extra
    ]
    return ", ".join(stored + extra)


def names(table: Table[Any]) -> str:
    """The table's column names, for an INSERT: ``id, agent_id, ...``."""
    return ", ".join(table.names)


def placeholders(table: Table[Any], first: int = 1) -> str:
    """The parameters of one row of the table, numbered from ``first``, JSON cast to JSONB."""
    return ", ".join(
        f"${n}{'::jsonb' if c.type is Type.JSON else ''}"
        for n, c in enumerate(table.columns, start=first)
    )


def unnest_insert(table: Table[Any]) -> str:
    """An INSERT of many rows of the table at once, each column's values one array parameter in
    the order of its columns (see ``arrays``)."""
    arrays = ", ".join(
        f"${n}::{'text' if c.type is Type.JSON else c.type.value}[]"
        for n, c in enumerate(table.columns, start=1)
    )
    values = ", ".join(f"{c.name}::jsonb" if c.type is Type.JSON else c.name for c in table.columns)
    return (
        f"INSERT INTO {table.name} ({names(table)}) SELECT {values}"
        f" FROM unnest({arrays}) AS batch ({names(table)})"
    )


def copies_insert(table: Table[Any], differing: Sequence[str]) -> str:
    """An INSERT of many rows of the table that share all values but those of the columns
    ``differing``: each of those one array parameter, in order, then each other column's one
    value, in the order of the columns (see ``copies_values``)."""
    varying = [c for c in table.columns if c.name in differing]
    assert [c.name for c in varying] == list(differing), "the differing columns, in order"
    arrays = ", ".join(f"${n}::{c.type.value}[]" for n, c in enumerate(varying, start=1))
    shared = iter(range(len(varying) + 1, len(table.columns) + 1))
    values = ", ".join(
        f"copy.{c.name}"
        if c.name in differing
        else f"${next(shared)}::{'jsonb' if c.type is Type.JSON else c.type.value}"
        for c in table.columns
    )
    return (
        f"INSERT INTO {table.name} ({names(table)}) SELECT {values}"
        f" FROM unnest({arrays}) AS copy ({', '.join(differing)})"
    )


def copies_values(table: Table[M], models: Sequence[M], differing: Sequence[str]) -> list[Any]:
    """The parameters of ``copies_insert``: the models' values of the ``differing`` columns,
    one list each, then the first model's value of each other column (the same in all)."""
    positions = [table.names.index(name) for name in differing]
    rows = [table.values(model) for model in models]
    first = rows[0]
    return [[row[i] for row in rows] for i in positions] + [
        value for i, value in enumerate(first) if i not in positions
    ]


def arrays(table: Table[M], models: Sequence[M]) -> list[list[Any]]:
    """The models' values as one list per column, for ``unnest_insert``."""
    return [list(column) for column in zip(*map(table.values, models), strict=True)]


def event(row: asyncpg.Record) -> Event:
    return EVENTS.record(row)


def endpoint(row: asyncpg.Record) -> Endpoint:
    return ENDPOINTS.record(row)


def claimed_delivery(row: asyncpg.Record) -> tuple[Delivery, Endpoint, Event, Agent]:
    """A row of ``CLAIM_DELIVERIES``: the delivery's columns (``d_``), its endpoint's (``w_``),
    its event's (``e_``) and its agent's (``a_``)."""
    return (
        DELIVERIES.record(row, "d_"),
        ENDPOINTS.record(row, "w_"),
        EVENTS.record(row, "e_"),
        AGENTS.record(row, "a_"),
    )


def count(status: str) -> int:
    """The row count of a command status such as ``UPDATE 3``."""
    return int(status.rsplit(" ", 1)[-1])
