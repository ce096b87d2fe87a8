"""The rules on what comes in that a type alone cannot say: the bounds of an event, its data's
depth, a reply form (what an elicitation can show) and a form's answer. Each refusal names the
field and says what to send. The models of ``herald.inputs`` apply them."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from herald.errors import InvalidInput

MAX_EVENT_BYTES = 256 * 1024
MAX_BATCH = 1000
HANDLE_PATTERN = re.compile(r"[a-z0-9_-]{1,64}")
TYPE_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
TOPIC_PATTERN = re.compile(r"[A-Za-z0-9_.:/-]{1,128}")
"""A topic's name: an event type's characters and ``/`` (``repo/herald``)."""
MAX_DEDUPE_KEY = 256
MAX_TTL_S = 365 * 24 * 3600
MAX_DELAY_S = 30 * 24 * 3600
"""The furthest ahead an event may be scheduled (``delay_s``, ``deliver_at``): 30 days."""
PAST_TOLERANCE_S = 5
"""How far in the past a ``deliver_at`` may be (a publisher's clock a little behind herald's):
such an event is due at once."""
MAX_DEPTH = 64
"""How deeply an event's data (or reply form) may nest: objects and arrays in each other."""

_FORM_TYPES = {"string", "number", "integer", "boolean"}
_FORM_FORMATS = {"email", "uri", "date", "date-time"}
_FORM_KEYWORDS = {
    "type",
    "title",
    "description",
    "enum",
    "enumNames",
    "format",
    "default",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
}


def check_depth(value: Any, where: str) -> None:
    """Refuse JSON nested deeper than ``MAX_DEPTH``: every client must be able to take back
    what herald accepts, and JSON libraries stop at depths of a few hundred (some well below).

    Raises:
        InvalidInput: naming the limit.
    """
    level: list[Any] = [value]
    depth = 0
    while level:
        containers = [v for v in level if isinstance(v, (dict, list))]
        if not containers:
            return
        depth += 1
        if depth > MAX_DEPTH:
            raise InvalidInput(f"{where} nests deeper than {MAX_DEPTH} levels; flatten it")
        level = [
            child
            for container in containers
            for child in (container.values() if isinstance(container, dict) else container)
        ]


def check_form_schema(schema: Any, where: str) -> None:
    """Check that ``schema`` is what an MCP elicitation form may ask for: an object of flat
    primitive properties (string, number, integer, boolean, or a string enum).

    Raises:
        InvalidInput: naming the property that breaks the rule.
    """
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise InvalidInput(
            f'{where} must be a form schema: {{"type": "object", "properties": ...}}'
        )
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        raise InvalidInput(f"{where}.properties must name at least one field")
    for name, prop in properties.items():
        if not isinstance(prop, dict) or not _one_of(prop.get("type"), _FORM_TYPES):
            raise InvalidInput(
                f"{where}.properties.{name} must have a type of string, number, integer or boolean"
                " (forms hold flat fields only)"
            )
        unknown = sorted(set(prop) - _FORM_KEYWORDS)
        if unknown:
            raise InvalidInput(f"{where}.properties.{name} has unsupported keyword(s) {unknown}")
        if "format" in prop and not _one_of(prop["format"], _FORM_FORMATS):
            raise InvalidInput(
                f"{where}.properties.{name}.format must be one of {sorted(_FORM_FORMATS)}"
            )
        if "enum" in prop and not (
            isinstance(prop["enum"], list)
            and prop["enum"]
            and all(isinstance(v, str) for v in prop["enum"])
        ):
            raise InvalidInput(f"{where}.properties.{name}.enum must be a list of strings")
        for bound in ("minimum", "maximum"):
            if bound in prop and not _is_number(prop[bound]):
                raise InvalidInput(f"{where}.properties.{name}.{bound} must be a number")
        for bound in ("minLength", "maxLength"):
            if bound in prop and not (_is_number(prop[bound]) and isinstance(prop[bound], int)):
                raise InvalidInput(f"{where}.properties.{name}.{bound} must be an integer")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(_one_of(name, properties) for name in required):
        raise InvalidInput(f"{where}.required must list properties of the form")
    extra = sorted(set(schema) - {"type", "properties", "required", "title", "description"})
    if extra:
        raise InvalidInput(f"{where} has unsupported keyword(s) {extra}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _one_of(value: Any, names: Collection[str]) -> bool:
    # Only a string can be one: a list or an object, unhashable, must not reach ``in``.
    return isinstance(value, str) and value in names


_ANSWER_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
}


def check_form_answer(form: dict[str, Any], answer: dict[str, Any], where: str) -> None:
    """Check that ``answer`` fills in ``form`` (a schema ``check_form_schema`` accepted): only
    its fields, each of its type and within its enum, bounds and lengths, the required ones
    all there. The sender reads the answer by its own form; one that does not fit it would be
    misread.

    Raises:
        InvalidInput: naming the field at fault and what the form asks for.
    """
    properties: dict[str, Any] = form.get("properties", {})
    unknown = sorted(set(answer) - set(properties))
    if unknown:
        raise InvalidInput(
            f"{where} has field(s) the form does not ask for: {', '.join(unknown)};"
            f" it asks for {', '.join(sorted(properties))}"
        )
    missing = sorted(set(form.get("required", [])) - set(answer))
    if missing:
        raise InvalidInput(f"{where} lacks the required field(s) {', '.join(missing)}")
    for name, value in answer.items():
        _check_answer_field(properties[name], value, f"{where}.{name}")


def _check_answer_field(prop: dict[str, Any], value: Any, where: str) -> None:
    kind = prop["type"]
    wrong_bool = isinstance(value, bool) and kind != "boolean"
    if wrong_bool or not isinstance(value, _ANSWER_TYPES[kind]):
        raise InvalidInput(f"{where} must be a {kind}, as the form asks")
    if "enum" in prop and value not in prop["enum"]:
        raise InvalidInput(f"{where} must be one of {prop['enum']}")
    # A bound that is not a number (in a form stored before bounds were checked) bounds nothing.
    size = value if _is_number(value) else len(value) if isinstance(value, str) else None
    low, high = ("minimum", "maximum") if _is_number(value) else ("minLength", "maxLength")
    if size is not None and _is_number(prop.get(low)) and size < prop[low]:
        raise InvalidInput(f"{where} must be at least {prop[low]}" + _unit(value))
    if size is not None and _is_number(prop.get(high)) and size > prop[high]:
        raise InvalidInput(f"{where} must be at most {prop[high]}" + _unit(value))


def _unit(value: Any) -> str:
    return " characters long" if isinstance(value, str) else ""
