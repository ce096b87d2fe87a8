"""``Hub.publish``'s keyword arguments for one agent, checked in plain Python: its arguments are
values already (no JSON to parse, nothing to convert), and pydantic's model, the dict built for
it and the errors' machinery cost a sequential publish about an eighth of its instructions.

This check only takes: it returns None whenever it cannot tell at once that the arguments are
taken whole (a form, a schedule, a value of another type, anything refused), and the full check
(``herald.inputs.events.parse_new_event``) then takes them, or names their fault in its own
words. What this check takes, the full check takes too, as the same event."""

from __future__ import annotations

from math import isfinite
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

from herald.models import NewEvent, Priority
from herald.validation import (
    HANDLE_PATTERN,
    MAX_DEDUPE_KEY,
    MAX_DEPTH,
    MAX_EVENT_BYTES,
    MAX_TTL_S,
    TYPE_PATTERN,
)

_handle = HANDLE_PATTERN.fullmatch
_type = TYPE_PATTERN.fullmatch
builtins_type = type
"""The built-in ``type``: an argument's name shadows it, as in ``Hub.publish``."""


def quick_new_event(
    to: Any,
    type: Any,
    text: Any,
    data: Any,
    dedupe_key: Any,
    ttl_s: Any,
    sender: Any,
) -> NewEvent | None:
    """The event ``parse_new_event`` would make of these arguments (with no form, no schedule,
    the normal priority); None when this check cannot tell that it would take them."""
    # Exact types: the full check is strict (no bool for a number, no subclass to convert).
    if not (
        str is builtins_type(to)
        and str is builtins_type(type)
        and str is builtins_type(text)
        and text
        and _handle(to)
        and _type(type)
    ):
        return None
    if sender is not None and not (str is builtins_type(sender) and _handle(sender)):
        return None
    if dedupe_key is not None and not (
        str is builtins_type(dedupe_key) and 0 < len(dedupe_key) <= MAX_DEDUPE_KEY
    ):
        return None
    if ttl_s is not None and not (
        builtins_type(ttl_s) in (int, float) and 0 < ttl_s <= MAX_TTL_S  # NaN: not taken
    ):
        return None
    data_json, data_bytes = "null", 4
    if data is not None:
        copied = _copied_json(data)
        if copied is None:
            return None
        data, data_json, data_bytes = copied
    if "\x00" in text or "\x00" in (dedupe_key or "") or "\\u0000" in data_json:
        return None  # refused (PostgreSQL stores no NUL): the full check says so
    # A handle and a type are ASCII (their patterns): a byte a character.
    size = len(to) + len(type) + data_bytes + (0 if sender is None else len(sender))
    for part in (text, dedupe_key):
        if part is None:
            continue
        if part.isascii():
            size += len(part)
            continue
        try:
            size += len(part.encode())
        except UnicodeEncodeError:  # an unpaired surrogate
            return None
    if size > MAX_EVENT_BYTES:
        return None
    return NewEvent(  # in order, as the one pass over a body builds it
        to, type, text, data, dedupe_key, ttl_s, data_json, None, sender, None, None, None,
        _NORMAL,
    )  # fmt: skip


_NORMAL = Priority.NORMAL


def _copied_json(data: Any) -> tuple[dict[str, Any] | list[Any], str, int] | None:
    """A copy of ``data`` as the full check makes one (a new dict or list, its values the same),
    its JSON text and that text's length in UTF-8, if it is a JSON object or array of plain
    values (text keys, finite numbers) within herald's depth; else None. Its text is spelled by
    ``pydantic_core`` (as a body's data is in the one pass over it), not by ``json``: the same
    value."""
    kind = builtins_type(data)
    if kind is dict:
        copy: dict[str, Any] | list[Any] = dict(data)
    elif kind is list:
        copy = list(data)
    else:
        return None
    if not _plain(copy):
        return None
    try:
        text = to_json(copy)
    except PydanticSerializationError:  # an unpaired surrogate, say
        return None
    return copy, text.decode(), len(text)


def _plain(value: dict[str, Any] | list[Any]) -> bool:
    """Whether ``value`` nests at most ``MAX_DEPTH`` levels (``validation.check_depth``) of
    dicts with text keys and lists, of text, whole numbers, finite floats, booleans and null."""
    level: list[Any] = [value]
    for _ in range(MAX_DEPTH):
        below: list[Any] = []
        for container in level:
            if builtins_type(container) is dict:
                if not all(str is builtins_type(key) for key in container):
                    return False
                values = container.values()
            else:
                values = container
            for item in values:
                kind = builtins_type(item)
                if kind is dict or kind is list:
                    below.append(item)
                elif kind is float:
                    if not isfinite(item):
                        return False
                elif kind not in _SCALARS:
                    return False
        if not below:
            return True
        level = below
    return False


_SCALARS = frozenset({str, int, bool, builtins_type(None)})
