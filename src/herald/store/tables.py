"""Each table's columns, named once, for every backend: the SQL that reads or writes a table's
rows (its column lists, placeholders and casts) is made from these, and rows become models by
column name. A column added to a table is added here, in the schema and in the model."""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter, itemgetter
from typing import Any, Generic, Protocol, TypeVar

from herald.models import (
    Agent,
    Attempt,
    Delivery,
    Endpoint,
    Event,
    EventStatus,
    EventType,
    Kind,
    Priority,
    PublisherKey,
    Reply,
    SessionRecord,
    State,
    WebhookSubscription,
)

M = TypeVar("M")
E = TypeVar("E", bound=enum.Enum)


def by_value(kind: type[E]) -> Callable[[Any], E]:
    """A member of the enum by its stored value: one lookup, where calling the enum costs ten
    times as much (once per row read)."""
    return {member.value: member for member in kind}.__getitem__


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


StoredEnum = type[enum.StrEnum]
"""An enum whose members a column stores by value."""


@dataclass(frozen=True)
class Column:
    name: str
    type: Type = Type.TEXT
    field: str = ""
    """The model's field, when its name differs from the column's."""
    read: Callable[[Any], Any] | None = None
    """Turns the stored value into the field's (an enum, a bool); None: as it is."""
    expression: str = ""
    """For a value read with the rows but not stored in the table: the SQL that reads it, with
    ``{table}`` standing for the table's name or alias in the query."""
    enum: StoredEnum | None = None
    """The field's enum, stored as its member's value (and read back as its member)."""

    def __post_init__(self) -> None:
        if self.enum is not None:
            object.__setattr__(self, "read", by_value(self.enum))

    @property
    def attribute(self) -> str:
        return self.field or self.name


@dataclass(frozen=True)
class Table(Generic[M]):
    """A table and the model its rows are: every field of the model is one of its columns or
    extra values (checked when the table is made)."""

    name: str
    model: type[M]
    columns: tuple[Column, ...]
    extra: tuple[Column, ...] = field(default=())
    """Fields of the model that are not columns of the table but read with its rows, each
    from its ``expression`` (an agent's webhook URL, from its webhook endpoint)."""

    def __post_init__(self) -> None:
        covered = {column.attribute for column in (*self.columns, *self.extra)}
        fields = {f.name for f in dataclasses.fields(self.model)}  # type: ignore[arg-type]
        if covered != fields:
            raise TypeError(
                f"the {self.name} table's columns do not match {self.model.__name__}'s fields:"
                f" {sorted(covered ^ fields)}"
            )

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.columns)

    @cached_property
    def _getter(self) -> Callable[[M], Any]:
        return attrgetter(*(column.attribute for column in self.columns))

    @cached_property
    def _enum_positions(self) -> tuple[int, ...]:
        return tuple(index for index, column in enumerate(self.columns) if column.enum)

    def values(self, model: M) -> tuple[Any, ...]:
        """The model's values of the table's columns, in order, each an enum's member as its
        value: ``sqlite3`` binds only an exact int, float, str or bytes directly, and passes
        anything else (a ``StrEnum``'s member, None) through its adaptation, which costs a
        value many times a plain one's binding (``insert_rows`` binds no None)."""
        values = self._getter(model)
        if len(self.columns) == 1:
            values = (values,)
        positions = self._enum_positions
        if not positions:
            return values  # type: ignore[no-any-return]
        plain = list(values)
        for index in positions:
            member = plain[index]
            if member is not None:
                plain[index] = str(member)  # a StrEnum's str is its value, a plain str
        return tuple(plain)

    @cached_property
    def _by_field(self) -> list[tuple[Column, int]]:
        """Each column or extra value, with the position of its field in the model."""
        order = [f.name for f in dataclasses.fields(self.model)]  # type: ignore[arg-type]
        columns = sorted((*self.columns, *self.extra), key=lambda c: order.index(c.attribute))
        return [(column, index) for index, column in enumerate(columns)]

    @cached_property
    def _readers(self) -> dict[tuple[tuple[str, ...] | None, str], Callable[[Any], M]]:
        return {}

    def _reader(self, names: tuple[str, ...] | None, prefix: str) -> Callable[[Any], M]:
        """What makes the model of a row: by name, or (``names``: the row's columns in order)
        by the positions of its fields' names among ``names``."""
        reader = self._readers.get((names, prefix))
        if reader is None:
            keys = [prefix + column.name for column, _ in self._by_field]
            if names is not None:
                position = {name: index for index, name in enumerate(names)}
                keys = [position[key] for key in keys]  # type: ignore[misc]
            reads = tuple((index, column.read) for column, index in self._by_field if column.read)
            reader = self._readers[names, prefix] = functools.partial(
                self._build, itemgetter(*keys), reads
            )
        return reader

    def _build(
        self, read_all: Callable[[Any], Any], reads: tuple[tuple[int, Any], ...], row: Any
    ) -> M:
        values = read_all(row)
        if reads:
            values = list(values)
            for index, read in reads:
                if values[index] is not None:
                    values[index] = read(values[index])
        return self._make(values)

    @cached_property
    def _make(self) -> Callable[[Sequence[Any]], M]:
        """What makes the model of its fields' values, every one of them, in order. A frozen
        dataclass's ``__init__`` sets each field through ``object.__setattr__`` (half the cost
        of reading an event's row); one with no ``__post_init__`` and a ``__dict__`` is made
        with its fields set at once, as that ``__init__`` leaves them."""
        model: Any = self.model
        if hasattr(model, "__post_init__") or hasattr(model, "__slots__"):
            return lambda values: model(*values)
        names = tuple(f.name for f in dataclasses.fields(model))
        new = object.__new__

        def make(values: Sequence[Any]) -> M:
            made = new(model)
            made.__dict__.update(zip(names, values, strict=True))
            return made  # type: ignore[no-any-return]

        return make

    def record(self, row: Row, prefix: str = "") -> M:
        """The model a row holds, its columns read by name (each ``prefix`` + name)."""
        return self._reader(None, prefix)(row)

    def reader(self, names: Sequence[str], prefix: str = "") -> Callable[[Any], M]:
        """What makes the model of each row of a query whose columns are ``names``, in order:
        the fields' columns are found by name once, then read by position."""
        return self._reader(tuple(names), prefix)


AGENTS = Table(
    "agents",
    Agent,
    (
        Column("id"),
        Column("handle"),
        Column("key_hash"),
        Column("created_at", Type.INT),
        Column("delivery", Type.JSON, field="delivery_json"),
        Column("last_seq", Type.INT),
        Column("preferences", Type.JSON, field="preferences_json"),
    ),
    # The agents.webhook_url column is no longer kept (a second copy went stale when the
    # webhook changed): it is the webhook endpoint's. Read from the index on (agent_id, kind) of
    # the endpoints that are not subscriptions: SQLite uses it only if told that much.
    extra=(
        Column(
            "webhook_url",
            expression="(SELECT hook.url FROM endpoints hook WHERE hook.agent_id = {table}.id"
            " AND hook.kind = 'webhook' AND hook.kind <> 'subscription')",
        ),
    ),
)

EVENTS = Table(
    "events",
    Event,
    (
        Column("id"),
        Column("agent_id"),
        Column("seq", Type.INT),
        Column("type"),
        Column("text"),
        Column("data", Type.JSON, field="data_json"),
        Column("created_at", Type.INT),
        Column("status", enum=EventStatus),
        Column("dedupe_key"),
        Column("expires_at", Type.INT),
        Column("status_at", Type.INT),
        Column("sender"),
        Column("reply_to"),
        Column("reply_schema", Type.JSON, field="reply_schema_json"),
        Column("deliver_at", Type.INT),
        Column("priority", enum=Priority),
        Column("thread"),
        Column("held_by"),
        Column("topic"),
    ),
)

REPLIES = Table(
    "replies",
    Reply,
    (
        Column("id"),
        Column("event_id"),
        Column("agent_id"),
        Column("text"),
        Column("data", Type.JSON, field="data_json"),
        Column("created_at", Type.INT),
        Column("routed_event_id"),
    ),
)

ATTEMPTS = Table(
    "attempts",
    Attempt,
    (
        Column("event_id"),
        Column("at", Type.INT),
        Column("mechanism"),
        Column("outcome"),
        Column("session"),
        Column("error"),
    ),
)

ENDPOINTS = Table(
    "endpoints",
    Endpoint,
    (
        Column("id"),
        Column("agent_id"),
        Column("kind", enum=Kind),
        Column("url"),
        Column("secret"),
        Column("created_at", Type.INT),
        Column("mode"),
        Column("previous_secret"),
        Column("previous_until", Type.INT),
        Column("state", enum=State),
        Column("disabled_reason"),
        Column("failing_since", Type.INT),
        Column("last_error"),
        Column("last_attempt_at", Type.INT),
        Column("expires_at", Type.INT),
        Column("last_ok_at", Type.INT),
    ),
)

SUBSCRIPTIONS = Table(
    "subscriptions",
    WebhookSubscription,
    (
        Column("id"),
        Column("agent_id"),
        Column("name"),
        Column("arguments", Type.JSON, field="arguments_json"),
        Column("match_types", Type.JSON, field="types_json"),
        Column("match_sender", field="sender"),
        Column("after_seq", Type.INT),
        Column("verified_at", Type.INT),
        Column("webhook_id"),
        Column("gap_at", Type.INT),
        Column("held_until", Type.INT),
        Column("paced_until", Type.INT),
    ),
)

DELIVERIES = Table(
    "deliveries",
    Delivery,
    (
        Column("endpoint_id"),
        Column("event_id"),
        Column("attempts", Type.INT),
        Column("next_at", Type.INT),
        Column("state"),
        Column("last_error"),
    ),
)

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

EVENT_TYPES = Table(
    "event_types",
    EventType,
    (
        Column("name"),
        Column("description"),
        Column("payload_schema", Type.JSON, field="payload_schema_json"),
        Column("created_at", Type.INT),
        Column("updated_at", Type.INT),
    ),
)

PUBLISHER_KEYS = Table(
    "publisher_keys",
    PublisherKey,
    (
        Column("id"),
        Column("name"),
        Column("key_hash"),
        Column("scopes", Type.JSON, field="scopes_json"),
        Column("handles", Type.JSON, field="handles_json"),
        Column("types", Type.JSON, field="types_json"),
        Column("created_at", Type.INT),
        Column("senders", Type.JSON, field="senders_json"),
        Column("topics", Type.JSON, field="topics_json"),
    ),
)
