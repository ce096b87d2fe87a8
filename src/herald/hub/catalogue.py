"""The event types the operator declares, as the hub keeps them: the catalogue part of the hub
(``hub.event_types``), and the check of each published event against its type's payload schema.

Publishing is hot, so the catalogue is kept in memory; an event whose type declares no payload
schema is published without a check, one whose type does is checked in a child process, bounded
in time (``herald.hub.payload_checks``: a check can take exponential time).

The copy is read again after every change made through it; when another process sharing the
store changed it (PostgreSQL's NOTIFY, a hint); and, as a safety net for a hint that is lost or a
backend that has none, at its next use once it is 5 s old by the hub's clock.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from herald.errors import HeraldError, InvalidInput, NotFound, StoreUnavailable
from herald.hub.payload_checks import CHECK_TIMEOUT_S, Check, PayloadChecker
from herald.inputs.event_types import EventTypeInput
from herald.inputs.refusals import parse
from herald.models import EventType, NewEvent
from herald.reserved import RESERVED_PREFIX, RESERVED_TYPES, refuse_reserved_declaration
from herald.store import Store
from herald.validation import TYPE_PATTERN

log = logging.getLogger("herald")

MAX_AGE_MS = 5_000
"""How old the copy may be before its next use reads the catalogue again."""
MAX_TYPE_CLASSES = 50
"""Type classes of declared types kept as metric labels at most (the first by name)."""


def type_class(name: str) -> str:
    """The part of an event type before its first dot: ``deploy`` for ``deploy.failed``."""
    return name.partition(".")[0]


OWN_TYPE_CLASSES = frozenset(
    {type_class(name) for name in RESERVED_TYPES} | {type_class(RESERVED_PREFIX)}
)
"""The classes of the types herald itself sends."""


class Catalogue:
    """The declared event types, and the payload schemas that publishing checks data against.

    ``add_listener`` callbacks run after every change this process sees: its own at once,
    another process's when it is heard of or read. ``check_timeout_s`` bounds the checks of one
    publish (``PayloadChecker``)."""

    def __init__(self, store: Store, *, check_timeout_s: float = CHECK_TIMEOUT_S) -> None:
        self._store = store
        self._types: dict[str, EventType] = {}
        self._schemas: dict[str, str] = {}
        self._checker = PayloadChecker(check_timeout_s)
        self._last_read: builtins.list[EventType] | None = None
        # A change known to have happened bumps ``_wanted``; the copy covers ``_covered``.
        self._wanted = 0
        self._covered = -1
        self._read_at = 0
        self._lock = asyncio.Lock()
        self._listeners: builtins.list[Callable[[], None]] = []
        self._catching_up: asyncio.Task[None] | None = None
        self.type_classes = OWN_TYPE_CLASSES
        """The type classes a publish is counted under in the metrics (``herald.metrics``):
        herald's own and those of the declared types; any other type counts as ``other``."""

    async def open(self) -> None:
        """Read the catalogue a first time: what is heard of later is compared with it."""
        await self._read_again()

    async def close(self) -> None:
        task, self._catching_up = self._catching_up, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._checker.close()

    # What the operator does

    async def put(
        self, name: str, description: str, payload_schema: dict[str, Any] | None
    ) -> tuple[EventType, bool]:
        """Declare an event type, or replace its description and payload schema. Returns it,
        and whether it is new. From now on, an event of the type must have ``data`` valid
        against ``payload_schema`` (JSON Schema, draft 2020-12), if one is given.

        Raises:
            InvalidInput: a malformed or reserved name, description or schema (TooLarge: a
                schema over 64 KiB of JSON).
        """
        _check_name(name)
        refuse_reserved_declaration(name)
        body = parse(EventTypeInput, {"description": description, "payload_schema": payload_schema})
        schema_json = (
            None
            if body.payload_schema is None
            else json.dumps(body.payload_schema, separators=(",", ":"), ensure_ascii=False)
        )
        declared = await self._store.put_event_type(name, body.description, schema_json)
        await self._changed_here()
        return declared

    async def get(self, name: str) -> EventType:
        """Raises: NotFound."""
        found = (await self._current()).get(name)
        if found is None:
            raise NotFound(f"no event type is declared with the name {name!r}")
        return found

    async def list(self) -> builtins.list[EventType]:
        """Every declared event type, by name."""
        return builtins.list((await self._current()).values())

    async def declared_now(self, name: str) -> bool:
        """Whether the store holds the type now, whatever this process's copy says (before
        ending what depends on it: another process may have declared it a moment ago)."""
        return await self._store.get_event_type(name) is not None

    async def delete(self, name: str) -> None:
        """Forget an event type: its events are published unchecked from now on.

        Raises:
            NotFound: no type is declared with that name.
        """
        if not TYPE_PATTERN.fullmatch(name) or not await self._store.delete_event_type(name):
            raise NotFound(f"no event type is declared with the name {name!r}")
        await self._changed_here()

    def declared(self, name: str) -> bool:
        """Whether ``name`` is declared, as this process last read the catalogue (a listener
        asks this: it runs after the copy was read again)."""
        return name in self._types

    def add_listener(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` (it must not block) after every change of the catalogue."""
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[], None]) -> None:
        self._listeners.remove(callback)

    # What publishing does

    async def check(self, events: Sequence[NewEvent], where: str = "event") -> None:
        """Check each event's data against its type's payload schema, if the type declares one.
        A refusal calls one event alone ``where`` (``event.data``), one of several by its index
        (``events[3].data``).

        Raises:
            InvalidInput: an event's data is not valid; the message names its path and what is
                wrong. Or the checks took over ``check_timeout_s``, naming the event under way.
            RateLimited: other publishes' checks held the checker for ``check_timeout_s``.
        """
        if not self._is_fresh():
            await self._read_again()
        schemas = self._schemas
        if not schemas:
            return
        many = len(events) > 1
        checks = [
            Check(
                schema,
                event.data_json,
                f"events[{index}].data" if many else f"{where}.data",
                event.type,
            )
            for index, event in enumerate(events)
            if (schema := schemas.get(event.type)) is not None
        ]
        if checks:
            await self._checker.check(checks)

    async def refresh(self) -> None:
        """Read the catalogue again if the copy is 5 s old (the hub's upkeep calls it, so that a
        change no one heard of reaches the listeners even while nothing is published)."""
        if not self._is_fresh():
            await self._read_again()

    def heard(self) -> None:
        """Another process changed the catalogue (a hint from the store): read it again soon."""
        self._wanted += 1
        if self._catching_up is None or self._catching_up.done():
            self._catching_up = asyncio.create_task(self._catch_up(), name="herald-catalogue")

    # The copy

    def _is_fresh(self) -> bool:
        return self._covered == self._wanted and self._store.now() - self._read_at < MAX_AGE_MS

    async def _current(self) -> dict[str, EventType]:
        if not self._is_fresh():
            await self._read_again()
        return self._types

    async def _read_again(self) -> bool:
        """Read the catalogue, unless a task did meanwhile; calls the listeners if it changed
        since the last read. Returns whether it did.

        Raises:
            StoreUnavailable: the store failed; the copy stays as it was (and stale).
        """
        async with self._lock:
            if self._is_fresh():
                return False
            wanted, now = self._wanted, self._store.now()
            listed = await self._store.list_event_types()
            previous, self._last_read = self._last_read, listed
            self._types = {declared.name: declared for declared in listed}
            declared_classes = sorted({type_class(declared.name) for declared in listed})
            self.type_classes = OWN_TYPE_CLASSES | set(declared_classes[:MAX_TYPE_CLASSES])
            self._schemas = {
                declared.name: schema
                for declared in listed
                if (schema := declared.payload_schema_json) is not None
            }
            self._covered, self._read_at = wanted, now
        changed = previous is not None and previous != listed
        if changed:
            self._announce()
        return changed

    async def _changed_here(self) -> None:
        self._wanted += 1
        try:
            announced = await self._read_again()
        except StoreUnavailable:  # the change is made: the copy is read at its next use
            announced = False
        if not announced:
            self._announce()

    async def _catch_up(self) -> None:
        try:
            while self._covered != self._wanted:
                await self._read_again()
        except HeraldError as exc:
            log.warning("reading the event types again failed (%s); read at their next use", exc)
        except Exception:  # a background task's top: a listener that failed is logged
            log.exception("a listener of the event-type catalogue failed")

    def _announce(self) -> None:
        for callback in builtins.list(self._listeners):
            callback()


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not TYPE_PATTERN.fullmatch(name):
        raise InvalidInput(
            f"event type name {name!r} must be 1-128 characters of letters, digits and _ . : -"
            " (for example build.failed)"
        )
