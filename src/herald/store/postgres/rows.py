"""Pooled connections, the operations run on them, and the rows they answer with."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar

import asyncpg

from herald.events import Event, EventStatus

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

T = TypeVar("T")
Connection: TypeAlias = "PoolConnectionProxy[asyncpg.Record]"
Operation: TypeAlias = Callable[[Connection], Awaitable[T]]


class Runner(Protocol):
    """Runs an operation on a pooled connection, in a transaction if asked."""

    async def __call__(self, operation: Operation[T], *, transaction: bool = False) -> T: ...


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


def count(status: str) -> int:
    """The row count of a command status such as ``UPDATE 3``."""
    return int(status.rsplit(" ", 1)[-1])
