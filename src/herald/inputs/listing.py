"""What the admin asks of ``GET /v1/events``, ``GET /v1/agents`` and ``GET /v1/endpoints``:
filters, a page's size, and where the page starts (the cursor the page before answered with)."""

from __future__ import annotations

import base64
import binascii
import datetime
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field

from herald.errors import InvalidInput
from herald.ids import is_id
from herald.inputs.fields import GLOB_RULE, TYPE_GLOB_PATTERN, whole
from herald.inputs.refusals import Input, Says, refuse
from herald.inputs.topics import TopicGlob
from herald.overview import Position
from herald.validation import HANDLE_PATTERN

MAX_PAGE = 500
DEFAULT_PAGE = 50
DEFAULT_TRIPS = 20
_CURSOR = re.compile(r"(\d{1,15})\.(evt_[0-9A-Z]{26})")
_SEQ_CURSOR = re.compile(r"-?\d{1,18}")  # below zero: an event not yet numbered
RESTART = (
    " is a cursor of the order an agent's events were once listed in (by time; they are listed"
    " by seq now): start again from the first page, with no cursor"
)


def page_cursor(position: Position) -> str:
    """The cursor that starts the next page after ``position``: an event's ``(created_at,
    id)`` in the listing of every agent, its seq in the listing of one."""
    text = str(position) if isinstance(position, int) else f"{position[0]}.{position[1]}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _position(value: Any) -> Position:
    """A cursor read back: the ``(created_at, id)`` or the seq the page before ended at."""
    refused = refuse(
        " is not a cursor herald gave: send the next value of the page before, or leave it"
        " out for the first page"
    )
    if not isinstance(value, str) or len(value) > 64:
        raise refused
    try:
        text = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise refused from None
    if _SEQ_CURSOR.fullmatch(text):
        return int(text)
    found = _CURSOR.fullmatch(text)
    if found is None or not is_id(found[2], "evt_"):
        raise refused
    return int(found[1]), found[2]


def _agent_position(value: Any) -> int:
    """A cursor of one agent's listing read back: the seq the page before ended at."""
    position = _position(value)
    if not isinstance(position, int):
        raise refuse(RESTART)
    return position


def listing_position(agent: str | None, cursor: Position | None) -> Position | None:
    """Where a page of ``GET /v1/events`` starts: a seq when it lists one agent's events, a
    ``(created_at, id)`` when it lists every agent's.

    Raises:
        InvalidInput: the cursor is of the other listing.
    """
    if agent is not None and isinstance(cursor, tuple):
        raise InvalidInput("query.cursor" + RESTART)
    if agent is None and isinstance(cursor, int):
        raise InvalidInput(
            "query.cursor is a cursor of one agent's events: send it with that"
            " agent, or leave it out for the first page"
        )
    return cursor


def _moment(value: Any) -> int:
    """An ISO 8601 time in milliseconds since the epoch (UTC when it names no zone)."""
    refused = refuse(" must be an ISO 8601 time such as 2025-01-31T09:30:00Z or 2025-01-31")
    if not isinstance(value, str) or len(value) > 64:
        raise refused
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise refused from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return round(moment.timestamp() * 1000)


def whole_number(value: Any) -> Any:
    """A query's whole number, written in digits, as one (anything else is left to refuse)."""
    return int(value) if isinstance(value, str) and value.isascii() and value.isdigit() else value


Moment = Annotated[
    int,
    BeforeValidator(_moment, json_schema_input_type=str),
    Says("must be an ISO 8601 time such as 2025-01-31T09:30:00Z or 2025-01-31"),
]
PageCursor = Annotated[
    tuple[int, str] | int,
    BeforeValidator(_position, json_schema_input_type=str),
    Says("must be the next value of the page before, or left out for the first page"),
]
AgentPageCursor = Annotated[
    int,
    BeforeValidator(_agent_position, json_schema_input_type=str),
    Says("must be the next value of the page before, or left out for the first page"),
]
Page = Annotated[
    int,
    Field(ge=1, le=MAX_PAGE),
    BeforeValidator(whole_number),
    Says(f"must be a whole number from 1 to {MAX_PAGE}"),
]
AgentName = Annotated[
    str,
    Field(pattern=f"{whole(HANDLE_PATTERN)}|^agt_[0-9A-Z]{{26}}$"),
    Says("must be an agent's id (agt_...) or handle"),
]
TypeFilter = Annotated[
    str,
    Field(pattern=whole(TYPE_GLOB_PATTERN)),
    Says(f"must be an event type, or a glob of one: {GLOB_RULE}"),
]
Status = Annotated[
    Literal["pending", "sent", "delivered", "expired", "dead", "scheduled", "cancelled"],
    Says("must be one of pending, sent, delivered, expired, dead, scheduled, cancelled"),
]


class EventListingInput(Input):
    """``GET /v1/events``'s query parameters."""

    where: ClassVar[str] = "query"
    item: ClassVar[str] = "parameter"

    agent: AgentName | None = None
    status: Status | None = None
    type: TypeFilter | None = None
    topic: TopicGlob | None = None
    since: Moment | None = None
    until: Moment | None = None
    cursor: PageCursor | None = None
    limit: Page = DEFAULT_PAGE


EndpointCursor = Annotated[
    str,
    Field(pattern=r"^end_[0-9A-Z]{26}$"),
    Says("must be the next value of the page before, or left out for the first page"),
]


class EndpointListingInput(Input):
    """``GET /v1/endpoints``'s query parameters: ``failing=true`` for only the endpoints that
    are disabled or failing."""

    where: ClassVar[str] = "query"
    item: ClassVar[str] = "parameter"

    failing: Annotated[Literal["true", "false"], Says("must be true or false")] = "false"
    cursor: EndpointCursor | None = None
    limit: Page = DEFAULT_PAGE


Handle = Annotated[
    str,
    Field(pattern=whole(HANDLE_PATTERN)),
    Says("must be the next value of the page before, or left out for the first page"),
]
HandlePart = Annotated[
    str,
    Field(pattern=whole(HANDLE_PATTERN)),
    Says("must be part of a handle: 1 to 64 of a-z, 0-9, _ and -"),
]


class AgentListingInput(Input):
    """``GET /v1/agents``'s query parameters: ``search`` keeps the agents whose handle
    contains it."""

    where: ClassVar[str] = "query"
    item: ClassVar[str] = "parameter"

    search: HandlePart | None = None
    cursor: Handle | None = None
    limit: Page = DEFAULT_PAGE


class TripListingInput(Input):
    """``GET /v1/loop-guards``'s query parameters: how many of the newest trips to list."""

    where: ClassVar[str] = "query"
    item: ClassVar[str] = "parameter"

    limit: Page = DEFAULT_TRIPS
