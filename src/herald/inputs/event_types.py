"""What the admin sends to declare an event type: what its events mean, and the JSON Schema their
data must be valid against (the name is the route's)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, Field, ValidationInfo

from herald.inputs.refusals import Input, Says, refuse, refused_by

MAX_DESCRIPTION_CHARS = 2000


def _storable_text(value: str) -> str:
    if "\x00" in value:  # PostgreSQL stores no NUL
        raise refuse(" holds a NUL character (U+0000), which herald does not store")
    try:
        value.encode()
    except UnicodeEncodeError as exc:
        raise refuse(f" holds what JSON text cannot carry: {exc}") from exc
    return value


def _checked_schema(value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
    # Imported at the first schema declared: jsonschema is most of the cost of importing it,
    # which every herald serve would pay at start, most of them never to check a schema.
    from herald.payload_schemas import check_payload_schema

    refused_by(check_payload_schema, value, info.field_name or "payload_schema")
    return value


Description = Annotated[
    str,
    Field(min_length=1, max_length=MAX_DESCRIPTION_CHARS),
    AfterValidator(_storable_text),
    Says(
        f"must be a string of 1-{MAX_DESCRIPTION_CHARS} characters saying what an event of"
        " this type means"
    ),
]
PayloadSchema = Annotated[
    dict[str, Any],
    AfterValidator(_checked_schema),
    Says(
        'must be a JSON Schema (draft 2020-12) object, such as {"type": "object",'
        ' "properties": {"count": {"type": "integer"}}}, or null for none'
    ),
]


class EventTypeInput(Input):
    """``PUT /v1/event-types/{name}``: the type's description and, optionally, the schema its
    events' ``data`` must be valid against. Both replace what was declared before."""

    where: ClassVar[str] = "event_type"
    shape: ClassVar[str] = (
        'a JSON object such as {"description": "a build failed", "payload_schema": {...}}'
    )

    description: Description
    payload_schema: PayloadSchema | None = None
