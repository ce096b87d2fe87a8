"""The JSON Schemas of event payloads (draft 2020-12, checked by the ``jsonschema`` package): the
one the operator declares for an event type, checked as it is put, and an event's data checked
against it as the event is published (in a child process: ``serve_checks``). Each refusal names
the place at fault by its path."""

from __future__ import annotations

import functools
import json
import re
import signal
import sys
from collections.abc import Sequence
from typing import Any

# jsonschema ships no type information; what herald uses of it is wrapped here, typed.
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from jsonschema.exceptions import UnknownType, best_match  # type: ignore[import-untyped]
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from herald.errors import InvalidInput, TooLarge
from herald.validation import check_depth

MAX_SCHEMA_BYTES = 64 * 1024
"""A payload schema is held in memory by every process and shown to every agent that lists the
event types: a schema bigger than this describes more than an event should carry."""
DRAFT_URI = "https://json-schema.org/draft/2020-12/schema"
MAX_MESSAGE_CHARS = 300
"""jsonschema quotes the value at fault; a long one is cut, so the refusal stays readable."""

_PLAIN_KEY = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")
_META = Draft202012Validator(
    Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
)
"""What ``Draft202012Validator.check_schema`` checks with (its formats too: a ``pattern`` must
be a regular expression), asked for the best of its refusals rather than the first."""


def check_payload_schema(schema: Any, where: str) -> str:
    """Check what an operator declares as an event type's ``payload_schema``: a JSON object
    that is a valid JSON Schema (draft 2020-12), at most 64 KiB of JSON and ``MAX_DEPTH``
    levels deep, whose references point inside it (herald fetches nothing). Returns its JSON.

    Raises:
        InvalidInput: naming the place at fault and what is wrong (TooLarge: over 64 KiB).
    """
    if not isinstance(schema, dict):
        raise InvalidInput(
            f'{where} must be a JSON Schema object, such as {{"type": "object", "properties":'
            ' {"count": {"type": "integer"}}}'
        )
    check_depth(schema, where)
    text = _schema_json(schema, where)
    _check_schema(text, where)
    return text


@functools.lru_cache(maxsize=16)
def _check_schema(text: str, where: str) -> None:
    """The checks of a schema by its JSON: the slow part, so that a schema checked as a request
    body is not checked again as the hub takes it. (Only what passes is remembered.)"""
    schema = json.loads(text)
    declared = schema.get("$schema", DRAFT_URI)
    if declared not in (DRAFT_URI, DRAFT_URI + "#"):
        raise InvalidInput(
            f"{where}.$schema must be {DRAFT_URI} (or left out): herald checks payloads with"
            " JSON Schema draft 2020-12"
        )
    try:
        fault = best_match(_META.iter_errors(schema))
    except (RecursionError, OverflowError) as exc:  # Python's re, compiling a ``pattern``
        raise InvalidInput(
            f"{where} holds a regular expression Python cannot compile: {exc}"
        ) from exc
    if fault is not None:
        raise InvalidInput(
            f"{where}{json_path(fault.absolute_path)} is not valid JSON Schema (draft 2020-12):"
            f" {_short(fault.message)}"
        )
    _check_references(schema, where)


def _schema_json(schema: dict[str, Any], where: str) -> str:
    try:
        text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        size = len(text.encode())
    except (ValueError, UnicodeEncodeError) as exc:
        raise InvalidInput(f"{where} holds what JSON text cannot carry: {exc}") from exc
    if "\\u0000" in text or "\x00" in text:  # PostgreSQL stores no NUL
        raise InvalidInput(f"{where} holds a NUL character (U+0000), which herald does not store")
    if size > MAX_SCHEMA_BYTES:
        raise TooLarge(f"{where} is {size} bytes of JSON; the limit is {MAX_SCHEMA_BYTES} (64 KiB)")
    return text


def _check_references(schema: dict[str, Any], where: str) -> None:
    """Every ``$ref`` and ``$dynamicRef`` must point inside the schema, to a valid schema there:
    one that points elsewhere, or to a value that is no schema, would fail every publish of the
    type. Only the schema itself may have an ``$id``, so that each reference is read against
    it, as it is checked here."""
    base = DRAFT202012.id_of(schema) or ""
    resource = DRAFT202012.create_resource(schema)
    registry: Registry[Any] = Registry().with_resource(base, resource).crawl()
    resolver = registry.resolver(base)
    # Each schema once, whether it is reached inside another or by a reference: the schema as
    # a whole is valid, so each inside it is; one reached only by a reference is checked.
    known = {id(schema)}
    pending = [schema]
    while pending:
        current = pending.pop()
        if current is not schema and DRAFT202012.id_of(current) is not None:
            raise InvalidInput(
                f"{where} has an $id below its top ({current['$id']!r}): herald takes one"
                " document, with an $id at its top if any; put shared parts under $defs"
            )
        for keyword in ("$ref", "$dynamicRef"):
            reference = current.get(keyword)
            if not isinstance(reference, str):
                continue
            target = _target(resolver, keyword, reference, where)
            if target is None or id(target) in known:
                continue
            if best_match(_META.iter_errors(target)) is not None:
                raise InvalidInput(
                    f"{where} has a {keyword} {reference!r} that points to what is not a valid"
                    " schema"
                )
            known.add(id(target))
            pending.append(target)
        for inside in DRAFT202012.subresources_of(current):
            if isinstance(inside, dict) and id(inside) not in known:
                known.add(id(inside))
                pending.append(inside)


def _target(resolver: Any, keyword: str, reference: str, where: str) -> dict[str, Any] | None:
    """The schema a reference points to (None: ``true`` or ``false``).

    Raises:
        InvalidInput: it points outside the schema, to nothing, or to what is not a schema.
    """
    if not reference.startswith("#"):
        raise InvalidInput(
            f"{where} has a {keyword} {reference!r} that points outside it: herald fetches"
            " nothing; put what it refers to under $defs and refer to it as #/$defs/..."
        )
    try:
        found = resolver.lookup(reference).contents
    except (Unresolvable, LookupError, TypeError, ValueError) as exc:  # a pointer gone astray
        raise InvalidInput(
            f"{where} has a {keyword} {reference!r} that points to nothing in it"
        ) from exc
    if isinstance(found, bool):
        return None
    if not isinstance(found, dict):
        raise InvalidInput(
            f"{where} has a {keyword} {reference!r} that points to what is not a schema"
        )
    return found


def compile_schema(schema: dict[str, Any]) -> PayloadValidator:
    """What checks data against a schema ``check_payload_schema`` accepted."""
    return PayloadValidator(Draft202012Validator(schema))


def serve_checks(leash_s: float) -> None:
    """The loop of the child process that checks data for a hub (``herald.hub.payload_checks``):
    ``"ready"`` once started; then one request a line on stdin, ``[schema JSON, data JSON,
    where, event type]``, one answer a line on stdout, ``null`` or the refusal's message. It
    ends with its input; and, should the hub die while a check runs away, ``leash_s`` after the
    check began (the default action of SIGALRM ends it)."""

    @functools.lru_cache(maxsize=64)
    def compiled(schema_json: str) -> PayloadValidator:
        return compile_schema(json.loads(schema_json))

    leash = getattr(signal, "setitimer", None)  # Unix: elsewhere, only the hub's kill bounds it
    out = sys.stdout.buffer
    out.write(b'"ready"\n')
    out.flush()
    for line in sys.stdin.buffer:
        schema_json, data_json, where, type_name = json.loads(line)
        if leash is not None:
            leash(signal.ITIMER_REAL, leash_s)
        try:
            compiled(schema_json).check(json.loads(data_json), where, type_name)
            answer = None
        except InvalidInput as exc:
            answer = exc.message
        if leash is not None:
            leash(signal.ITIMER_REAL, 0)
        out.write(json.dumps(answer, ensure_ascii=False).encode() + b"\n")
        out.flush()


class PayloadValidator:
    """A compiled payload schema: one per declared event type, kept in memory."""

    def __init__(self, validator: Any) -> None:
        self._validator = validator

    def check(self, data: Any, where: str, type_name: str) -> None:
        """Check an event's ``data`` (called ``where``: ``event.data``, ``events[3].data``).

        Raises:
            InvalidInput: naming the path at fault, what is wrong, and the event type.
        """
        why = f"(event type {type_name} declares a payload_schema)"
        try:
            fault = best_match(self._validator.iter_errors(data))
        except OverflowError as exc:  # an integer too large to divide by a float multipleOf
            raise InvalidInput(f"{where} holds a number too large to check: {exc} {why}") from exc
        except (Unresolvable, UnknownType, RecursionError) as exc:  # stored unchecked
            raise InvalidInput(
                f"{where} cannot be checked: the payload_schema of event type {type_name} is"
                f" not one herald can apply ({exc}); the operator must declare it again"
            ) from exc
        if fault is not None:
            path = json_path(fault.absolute_path)
            raise InvalidInput(f"{where}{path}: {_short(fault.message)} {why}")


def json_path(parts: Sequence[str | int]) -> str:
    """The path of a place in a JSON value, to follow a name: ``.items[0].count``, or
    ``["odd key"]`` for a key that is not a plain name."""
    return "".join(
        f"[{part}]"
        if isinstance(part, int)
        else f".{part}"
        if _PLAIN_KEY.fullmatch(part)
        else f"[{json.dumps(part, ensure_ascii=False)}]"
        for part in parts
    )


def _short(message: str) -> str:
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    half = MAX_MESSAGE_CHARS // 2
    return f"{message[:half]} … {message[-half:]}"
