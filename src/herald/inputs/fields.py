"""The kinds of value herald's inputs are made of, each with its bounds and the words a refusal
of it ends with. Patterns are anchored: pydantic searches, herald's checks match whole values."""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationInfo,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import (
    CoreSchema,
    PydanticCustomError,
    PydanticUseDefault,
    core_schema,
)

from herald.endpoint_checks import check_secret, check_url
from herald.inputs.refusals import Says, refused_by
from herald.models import Priority
from herald.validation import (
    HANDLE_PATTERN,
    MAX_DEDUPE_KEY,
    MAX_DELAY_S,
    MAX_TTL_S,
    TYPE_PATTERN,
    check_depth,
    check_form_schema,
)

MAX_CURSOR = 2**62
TYPE_GLOB_PATTERN = re.compile(r"[A-Za-z0-9_.:*?-]{1,128}")
RFC3339_PATTERN = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
"""RFC 3339's date-time (section 5.6): its T and Z may be lower case, a space may stand for the
T. ``datetime.fromisoformat`` alone refuses the lower case and takes forms RFC 3339 has not
(an ISO week, a time without seconds, no dashes)."""
"""An event type (``validation.TYPE_PATTERN``) that may hold * and ?."""
GLOB_RULE = "1-128 letters, digits and _ . : - each, * for any run of characters, ? for one"
"""What an event-type glob may hold, said in every refusal of one (a list of globs is refused
as a whole, so its refusal says it too)."""
MAX_ACK_IDS = 1000
MAX_GRACE_S = 30 * 86400
MAX_ACK_TIMEOUT_S = 86400


def whole(pattern: re.Pattern[str]) -> str:
    """``pattern`` as pydantic (and JSON Schema) must be given it to match whole values."""
    return f"^(?:{pattern.pattern})$"


def _null_is_default(value: Any) -> Any:
    if value is None:
        raise PydanticUseDefault()
    return value


def _null_refused(value: Any) -> Any:
    if value is None:
        raise PydanticCustomError("null_given", "null is not a value here")
    return value


@dataclass(frozen=True)
class _NotNull:
    """A field's JSON Schema without the null of its ``X | None``: the type says the field may
    be left out, not that null is taken."""

    refuse: bool = True
    """Refuse null too (else a validator of the field's must)."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        inner = handler(source)
        return (
            core_schema.no_info_before_validator_function(_null_refused, inner)
            if self.refuse
            else inner
        )

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        found = handler(schema)
        kinds = [kind for kind in found.get("anyOf", ()) if kind != {"type": "null"}]
        if "anyOf" not in found or not kinds:
            return found
        rest = {key: value for key, value in found.items() if key != "anyOf"}
        return {**rest, **kinds[0]} if len(kinds) == 1 else {**rest, "anyOf": kinds}


NullIsDefault = BeforeValidator(_null_is_default)
"""A null is taken as the field left out (as MCP clients send unset arguments)."""
NullRefused = _NotNull()
"""The field may be left out, but not sent as null (refused with the words of its ``Says``);
its schema says so."""
NullRefusedBy = _NotNull(refuse=False)
"""The schema of ``NullRefused``, for a field whose own validator refuses null."""


DEPTH_CHECKED: Any = {"depth": "checked"}
"""The context of a validation whose caller checks the depth of data itself (the one pass over
a publish body does, for a whole batch at once): a check for each value costs more than the
rest of its validation."""


def _checked_depth(value: Any, info: ValidationInfo) -> Any:
    if info.context is not DEPTH_CHECKED:
        refused_by(check_depth, value, info.field_name or "value")
    return value


def _instant(value: Any) -> Any:
    """An RFC 3339 time with its offset, read as an aware datetime (the checks are strict: a
    string is converted here, once its offset is seen to be there)."""
    if isinstance(value, str):
        if RFC3339_PATTERN.fullmatch(value) is None:
            raise ValueError("not an RFC 3339 time")
        try:
            value = datetime.datetime.fromisoformat(value.upper())
        except ValueError:
            raise ValueError("not an RFC 3339 time") from None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise ValueError("no offset")
        try:
            value.timestamp()
        except (OverflowError, ValueError):  # a year 1 with an offset east of UTC, say
            raise ValueError("out of range") from None
    return value


def _checked_form(value: Any, info: ValidationInfo) -> Any:
    refused_by(check_depth, value, info.field_name or "reply")
    refused_by(check_form_schema, value, info.field_name or "reply")
    return value


def _checked_url(value: str, info: ValidationInfo) -> str:
    return str(refused_by(check_url, value, info.field_name or "url"))


def _checked_secret(value: str) -> str:
    return str(refused_by(lambda secret, _: check_secret(secret), value, "secret"))


Handle = Annotated[
    str,
    Field(pattern=whole(HANDLE_PATTERN)),
    Says("must be an agent handle matching [a-z0-9_-]{1,64}"),
]
EventType = Annotated[
    str,
    Field(pattern=whole(TYPE_PATTERN)),
    Says("must be 1-128 characters of letters, digits and _ . : - (for example dm.received)"),
]
Text = Annotated[str, Field(min_length=1), Says("must be a non-empty string")]
DedupeKey = Annotated[
    str,
    Field(min_length=1, max_length=MAX_DEDUPE_KEY),
    Says(f"must be a string of 1-{MAX_DEDUPE_KEY} characters"),
]
Ttl = Annotated[
    Annotated[int, Field(gt=0, le=MAX_TTL_S)] | Annotated[float, Field(gt=0, le=MAX_TTL_S)],
    Says(f"must be a number of seconds in (0, {MAX_TTL_S}]"),
]
Delay = Annotated[
    Annotated[int, Field(gt=0, le=MAX_DELAY_S)] | Annotated[float, Field(gt=0, le=MAX_DELAY_S)],
    Field(description="deliver the event this many seconds from now (up to 30 days)"),
    Says(f"must be a number of seconds in (0, {MAX_DELAY_S}] (at most 30 days)"),
]
DeliverAt = Annotated[
    datetime.datetime,
    BeforeValidator(_instant),
    Field(description="deliver the event at this time (RFC 3339 with its offset), 30 days ahead"),
    Says("must be an RFC 3339 time with its offset, such as 2026-12-08T09:00:00+01:00"),
]
EventData = Annotated[
    dict[str, Any] | list[Any],
    AfterValidator(_checked_depth),
    Says("must be a JSON object or array when given"),
]
ObjectData = Annotated[
    dict[str, Any], AfterValidator(_checked_depth), Says("must be an object when given")
]
Form = Annotated[
    dict[str, Any],
    AfterValidator(_checked_form),
    Says('must be a form schema: {"type": "object", "properties": ...}'),
]
Cursor = Annotated[
    int, Field(ge=0, le=MAX_CURSOR), Says(f"must be an integer from 0 to {MAX_CURSOR}")
]
Limit = Annotated[int, Field(ge=1, le=100), NullIsDefault, Says("must be an integer from 1 to 100")]
EventPriority = Annotated[
    Priority,
    Field(strict=False),  # taken from its value, a JSON string
    NullIsDefault,
    Says(
        "must be one of low, normal, high, urgent (low: never pushed; urgent: passes quiet hours)"
    ),
]
Consumer = Annotated[
    str,
    Field(min_length=1, max_length=128),
    Says("must be a string of 1-128 characters naming the drainer"),
]
Url = Annotated[
    str,
    AfterValidator(_checked_url),
    Says("must be an http or https URL of at most 2048 characters"),
]
Secret = Annotated[
    str,
    AfterValidator(_checked_secret),
    Says("must be a webhook secret: whsec_ followed by base64 of at least 24 bytes"),
]
