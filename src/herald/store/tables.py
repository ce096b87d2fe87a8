"""Each table's columns, named once, for every backend: the SQL that reads or writes a table's
rows (its column lists, placeholders and casts) is made from these, and rows become models by
column name. A column added to a table is added here, in the schema and in the model."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from typing import Any, Generic, Protocol, TypeVar

from herald.models import SessionRecord

M = TypeVar("M")


class Row(Protocol):
    """A row whose values are read by column name: ``sqlite3.Row``, ``asyncpg.Record``, a dict."""

    def __getitem__(self, name: str, /) -> Any: ...


class Type(enum.Enum):
    """How a column is stored; PostgreSQL casts by it, SQLite keeps JSON as text and booleans
    as 0 or 1."""

    TEXT = "text"
    INT = "bigint"
    BOOL = "boolean"
    JSON = "jsonb"


@dataclass(frozen=True)
class Column:
    name: str
    type: Type = Type.TEXT
    field: str = ""
    """The model's field, when its name differs from the column's."""
    read: Callable[[Any], Any] | None = None
    """Turns the stored value into the field's (an enum, a bool); None: as it is."""

    @property
    def attribute(self) -> str:
        return self.field or self.name


@dataclass(frozen=True)
class Table(Generic[M]):
    """A table and the model its rows are."""

    name: str
    model: Callable[..., M]
    columns: tuple[Column, ...]
    extra: tuple[Column, ...] = field(default=())
    """Fields of the model that are not columns of the table but read with its rows, each
    from an expression the backend supplies (an agent's webhook URL, from its endpoint)."""

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.columns)

    @cached_property
    def _values(self) -> Callable[[M], tuple[Any, ...]]:
        getter = attrgetter(*(column.attribute for column in self.columns))
        if len(self.columns) == 1:
            return lambda model: (getter(model),)
        return getter

    def values(self, model: M) -> tuple[Any, ...]:
        """The model's values of the table's columns, in order (enums are strings: stored as
        they are)."""
        return self._values(model)

    @cached_property
    def _plain(self) -> tuple[tuple[str, str], ...]:
        return tuple((c.name, c.attribute) for c in (*self.columns, *self.extra) if not c.read)

    @cached_property
    def _converted(self) -> tuple[tuple[str, str, Callable[[Any], Any]], ...]:
        return tuple((c.name, c.attribute, c.read) for c in (*self.columns, *self.extra) if c.read)

    def record(self, row: Row, prefix: str = "") -> M:
        """The model a row holds, its columns read by name (each ``prefix`` + name)."""
        values = {attribute: row[prefix + name] for name, attribute in self._plain}
        for name, attribute, read in self._converted:
            value = row[prefix + name]
            values[attribute] = None if value is None else read(value)
        return self.model(**values)


SESSIONS = Table(
    "sessions",
    SessionRecord,
    (
        Column("id"),
        Column("agent_id"),
        Column("process"),
        Column("transport"),
        Column("era"),
        Column("connected_at", Type.INT),
        Column("seen_at", Type.INT),
        Column("expires_at", Type.INT),
        Column("client_name"),
        Column("client_version"),
        Column("capabilities", Type.JSON, field="capabilities_json"),
        Column("can_push", Type.BOOL, read=bool),
    ),
)
