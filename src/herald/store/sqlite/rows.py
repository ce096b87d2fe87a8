"""The connection's operations, the SQL of each table's columns, and the rows it answers with.

Rows are ``sqlite3.Row``s, read by column name; column lists and placeholders are made from the
tables of ``herald.store.tables``."""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import replace
from itertools import compress
from operator import is_not
from typing import Any, TypeVar

from herald.models import Event, EventMatch, EventStatus
from herald.store.tables import AGENTS, EVENTS, M, Table

T = TypeVar("T")
Operation = Callable[[sqlite3.Connection], T]


def select_list(table: Table[Any], alias: str = "") -> str:
    """The table's columns and extra values, for a SELECT: ``id, seq`` (or ``e.id, e.seq``)."""
    source = alias or table.name
    stored = [f"{alias}.{name}" if alias else name for name in table.names]
    extra = [f"{c.expression.format(table=source)} AS {c.name}" for c in table.extra]
    return ", ".join(stored + extra)


def json_object(table: Table[Any], alias: str) -> str:
    """The columns and extra values of the table named ``alias`` in the query as one JSON
    object, keyed by column name."""
    pairs = [f"'{name}', {alias}.{name}" for name in table.names]
    pairs += [f"'{c.name}', {c.expression.format(table=alias)}" for c in table.extra]
    return f"json_object({', '.join(pairs)})"


def insert_sql(table: Table[Any], verb: str = "INSERT") -> str:
    """An INSERT of one row of the table, its values in the order of its columns."""
    marks = ", ".join("?" * len(table.names))
    return f"{verb} INTO {table.name} ({', '.join(table.names)}) VALUES ({marks})"


def insert_json_sql(table: Table[Any]) -> str:
    """An INSERT of many rows of the table at once, from one JSON array of ``table.values``
    arrays (see ``as_json``)."""
    values = ", ".join(f"value ->> {n}" for n in range(len(table.names)))
    return f"INSERT INTO {table.name} ({', '.join(table.names)}) SELECT {values} FROM json_each(?)"


ROWS_PER_INSERT = 64
"""The most rows one INSERT of ``insert_rows`` writes (an event has 21 values: 1,344 parameters,
under SQLite's 32,766)."""


@functools.lru_cache(maxsize=1024)
def insert_rows_sql(name: str, names: tuple[str, ...], count: int, given: tuple[bool, ...]) -> str:
    """An INSERT of ``count`` rows into the table ``name`` whose columns are ``names``, their
    values one after another: a parameter for each column ``given``, NULL written for the
    others. Remembered for the patterns of NULLs met most recently (1,024 statements)."""
    row = "(" + ", ".join("?" if value else "NULL" for value in given) + ")"
    return f"INSERT INTO {name} ({', '.join(names)}) VALUES {', '.join([row] * count)}"


def _given(rows: Sequence[Sequence[Any]]) -> tuple[bool, ...]:
    """Whether each column has a value (is not None) in any of the rows."""
    nulls = _NULLS.get(len(rows[0]))
    if nulls is None:
        nulls = _NULLS[len(rows[0])] = (None,) * len(rows[0])
    patterns = {tuple(map(is_not, row, nulls)) for row in rows}
    if len(patterns) == 1:
        return patterns.pop()
    return tuple(map(any, zip(*patterns, strict=True)))


_NULLS: dict[int, tuple[None, ...]] = {}


def insert_rows(conn: sqlite3.Connection, table: Table[Any], rows: Sequence[Sequence[Any]]) -> None:
    """Insert rows of the table (``table.values`` each), up to ``ROWS_PER_INSERT`` a statement:
    ``executemany`` would run a statement per row, each a hand-over of the GIL to the event
    loop's thread and a wait to win it back; reading them from JSON (``insert_json_sql``) costs
    a fifth more. A column None in every row of a statement is written NULL in its SQL, not
    bound: ``sqlite3`` binds a None through its adaptation (a lookup of adapters that fails,
    and an exception raised and cleared), and most of an event's columns are None."""
    for start in range(0, len(rows), ROWS_PER_INSERT):
        chunk = rows[start : start + ROWS_PER_INSERT]
        given = _given(chunk)
        sql = insert_rows_sql(table.name, table.names, len(chunk), given)
        conn.execute(sql, [value for row in chunk for value in compress(row, given)])


EVENT_COLUMNS = select_list(EVENTS)
AGENT_COLUMNS = select_list(AGENTS)
OPEN = "is_open = 1"
# A finished event: the condition of the index of finished events (migration 0031), written as
# it is there so that a query naming it reads that index.
FINISHED = "(status = 'delivered' OR status = 'expired' OR status = 'dead' OR status = 'cancelled')"
MUTED = (
    "EXISTS (SELECT 1 FROM agents m, json_each(m.preferences, '$.muted') g"
    " WHERE m.id = {events}.agent_id AND {events}.type GLOB g.value)"
)
"""Whether an event's type is one its agent muted (``Preferences``; GLOB, like herald's globs,
is case-sensitive with ``*`` and ``?``): never pushed, so never scheduled for a webhook nor
acknowledged by a pushed position. ``{events}``: the events' table or alias."""
"""An open event: pending or sent. Every statement that opens or closes an event sets
``is_open`` with its status (migration 0015 says why it is a column of its own)."""
UNEXPIRED = "(expires_at IS NULL OR expires_at > :now)"


def match_sql(match: EventMatch) -> tuple[str, dict[str, Any]]:
    """The condition (`` AND ...``, or nothing) and named parameters that keep the events that
    ``match``. GLOB, like herald's globs, is case-sensitive with ``*`` and ``?``."""
    if match.everything:
        return "", {}
    parts: list[str] = []
    params: dict[str, Any] = {}
    if match.types:
        names = {f"match_type{index}": glob for index, glob in enumerate(match.types)}
        parts.append("(" + " OR ".join(f"type GLOB :{name}" for name in names) + ")")
        params.update(names)
    if match.sender is not None:
        parts.append("sender = :match_sender")
        params["match_sender"] = match.sender
    return " AND " + " AND ".join(parts), params


def records(table: Table[M], cursor: sqlite3.Cursor) -> list[M]:
    """The models of a query's rows: each field's column found by name once per query (a
    ``sqlite3.Row`` compares names anew at each lookup)."""
    read = table.reader([column[0] for column in cursor.description])
    return [read(row) for row in cursor]


def record(table: Table[M], cursor: sqlite3.Cursor) -> M | None:
    """The model of a query's one row, or None."""
    found = records(table, cursor)
    return found[0] if found else None


def event(row: sqlite3.Row) -> Event:
    return EVENTS.record(row)


def delivered(event: Event, now: int) -> Event:
    return replace(event, status=EventStatus.DELIVERED, status_at=now)


def chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def as_json(rows: Sequence[Any]) -> str:
    """Rows as one JSON array, for a statement that reads them with ``json_each``: one statement
    for a whole batch, where ``executemany`` would run one per row, each a round trip between
    SQLite and Python that must win the GIL back from the event loop."""
    return json.dumps(rows, separators=(",", ":"), ensure_ascii=False)
