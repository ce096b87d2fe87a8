"""What an agent sends: the MCP tools' arguments and the ``/channel/*`` bodies, one model for
each thing it does whichever way it does it (the stdio bridge sends its tools' arguments on to
the channel routes)."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar

from pydantic import AfterValidator, ConfigDict, Field, field_validator, model_validator

from herald import cursors
from herald.inputs.events import parse_new_event
from herald.inputs.fields import (
    MAX_ACK_IDS,
    MAX_CURSOR,
    Consumer,
    Cursor,
    Delay,
    DeliverAt,
    EventPriority,
    EventType,
    Form,
    Handle,
    Limit,
    NullRefusedBy,
    ObjectData,
    Text,
    whole,
)
from herald.inputs.listing import DEFAULT_PAGE, AgentPageCursor, Page, TypeFilter
from herald.inputs.refusals import Input, Says, refuse, refused_by
from herald.inputs.topics import TopicGlob
from herald.models import NewEvent, Priority
from herald.reserved import (
    MAX_DESCRIPTION_CHARS,
    MAX_INPUT_PREVIEW_CHARS,
    MAX_TOOL_NAME_CHARS,
    PERMISSION_FORM,
    PERMISSION_TYPE,
    REQUEST_ID,
    refuse_reserved_type,
)

DEFAULT_MESSAGE_TYPE = "message.received"


def _not_reserved(type_: str) -> str:
    # refuse_reserved_type names the field as "<where>.type"; with where empty, ".type".
    refused_by(lambda value, _: refuse_reserved_type(value, ""), type_, ".type")
    return type_


EVENT_ID_HELP = "an event id, as in event_id=... of a notification"
EventId = Annotated[
    str,
    Field(min_length=1, description=EVENT_ID_HELP),
    Says("must be an event id, as in event_id=... of its notification"),
]


class InboxInput(Input):
    """The ``inbox`` tool: read the next open events."""

    where: ClassVar[str] = "inbox"

    limit: Limit = 20


class HistoryInput(Input):
    """The ``history`` tool: a page of the agent's acknowledged events, newest first, as
    ``GET /v1/events`` pages them (``before``: the ``next`` of the page before)."""

    where: ClassVar[str] = "history"

    before: (
        Annotated[
            AgentPageCursor,
            Field(
                description=(
                    "Where the page starts: the next of the page before (an opaque cursor, not"
                    " a seq or an event id); left out, the newest"
                )
            ),
        ]
        | None
    ) = None
    type: (
        Annotated[
            TypeFilter,
            Field(description="only events of this type, or of a glob of it (* and ?)"),
        ]
        | None
    ) = None
    topic: (
        Annotated[
            TopicGlob,
            Field(
                description="only events published to this topic, or to a topic its glob"
                " matches (* and ?)"
            ),
        ]
        | None
    ) = None
    limit: Page = DEFAULT_PAGE


class HistoryQuery(HistoryInput):
    """``GET /channel/history``'s query: the ``history`` tool's arguments."""

    where: ClassVar[str] = "query"
    item: ClassVar[str] = "parameter"


AckCursor = Annotated[
    Annotated[str, Field(pattern=whole(cursors.POSITION))]
    | Annotated[int, Field(ge=0, le=MAX_CURSOR)],
    Field(
        description=(
            "Acknowledge every event up to this one: the cursor herald gave with it (a"
            " notification's cursor, a stream event's id, an events/poll cursor), which says the"
            " history of the store it is from: one from before a restore acknowledges nothing"
            " (the answer says truncated). A bare seq acknowledges only what a heartbeat drain"
            " handed out (to consumer, or to the drain that named none), never pushed events."
        )
    ),
    Says(
        "must be the cursor herald gave with the last event to acknowledge (a notification's"
        f" cursor, a stream event's id), or a seq from 0 to {MAX_CURSOR} that a drain gave"
    ),
]
"""What ``ack`` takes as a cursor: a position (``herald.cursors``), or a drain's
bare seq. A bare seq is no place in one history, so it acknowledges only events a drainer was
handed (leased), which are the same events after a restore (a restored lease is the same event,
handed out before the backup); a position acknowledges pushed events too, and only when it is
from this history."""


class AckInput(Input):
    """The ``ack`` tool: events handled, by id or up to a seq."""

    where: ClassVar[str] = "ack"

    ids: (
        Annotated[
            list[Annotated[str, Field(description=EVENT_ID_HELP)]],
            Field(max_length=MAX_ACK_IDS),
            Says(f"must be a list of at most {MAX_ACK_IDS} event ids (ack more with a cursor)"),
        ]
        | None
    ) = None
    cursor: AckCursor | None = None

    @model_validator(mode="after")
    def _says_what(self) -> AckInput:
        if self.cursor is None and not self.ids:
            raise refuse(" needs ids or a cursor (every event up to it)")
        return self


class ChannelAckInput(AckInput):
    """``POST /channel/ack``: the ``ack`` tool's arguments, and the drainer whose events they
    are (the one a heartbeat named)."""

    # What AckInput checks, said in the schema. (Not in the tool's: MCP hosts refuse a tool
    # schema that is not a plain object.)
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": ["ids"], "properties": {"ids": {"type": "array", "minItems": 1}}},
                {"required": ["cursor"]},
            ]
        }
    )

    consumer: Consumer | None = None


class HeartbeatInput(Input):
    """``POST /channel/heartbeat``: acknowledge up to a cursor, drain the next events."""

    where: ClassVar[str] = "heartbeat"

    cursor: Annotated[Cursor | None, NullRefusedBy] = None
    limit: Limit = 20
    consumer: Consumer | None = None

    @field_validator("cursor", mode="before")
    @classmethod
    def _not_null(cls, cursor: object) -> object:
        if cursor is None:
            # Most likely a client's unset cursor: drained at most once, a crash would lose
            # the events. Leaving the field out says that on purpose.
            raise refuse(
                " is null: send 0 (or the cursor you got) to acknowledge what you handled, or"
                " leave cursor out to drain at most once"
            )
        return cursor


class ReplyInput(Input):
    """The ``reply`` tool and ``POST /channel/reply``: answer an event."""

    where: ClassVar[str] = "reply"

    event_id: EventId
    text: Text
    data: (
        Annotated[ObjectData, Field(description="structured answer, if the event asked for one")]
        | None
    ) = None


class SendMessageInput(Input):
    """The ``send_message`` tool and ``POST /channel/send``: write to another agent."""

    where: ClassVar[str] = "message"

    to: Annotated[Handle, Field(description="the other agent's handle")]
    text: Text
    data: ObjectData | None = None
    reply: (
        Annotated[
            Form,
            Field(description="a form schema: ask for a structured answer, which comes as a reply"),
        ]
        | None
    ) = None
    type: Annotated[
        EventType,
        AfterValidator(_not_reserved),
        Field(description="the event's type; herald's own (reply.received, herald.*) are refused"),
    ] = DEFAULT_MESSAGE_TYPE
    deliver_at: DeliverAt | None = None
    delay_s: Delay | None = None
    priority: EventPriority = Priority.NORMAL

    @model_validator(mode="after")
    def _one_time(self) -> SendMessageInput:
        if self.deliver_at is not None and self.delay_s is not None:
            raise refuse(
                ": give deliver_at (a time) or delay_s (seconds from now) to schedule it, not both"
            )
        return self


class PermissionInput(Input):
    """``POST /channel/permission``: a Claude Code permission prompt to relay to ``to``."""

    where: ClassVar[str] = "permission"

    to: Handle
    request_id: Annotated[
        str,
        Field(pattern=whole(REQUEST_ID)),
        Says("must be 5 letters a-z without l, as Claude Code sends it"),
    ]
    tool_name: Annotated[
        str,
        Field(min_length=1, max_length=MAX_TOOL_NAME_CHARS),
        Says(f"must be a string of 1-{MAX_TOOL_NAME_CHARS} characters"),
    ]
    description: Annotated[
        str,
        Field(max_length=MAX_DESCRIPTION_CHARS),
        Says(f"must be a string of 0-{MAX_DESCRIPTION_CHARS} characters"),
    ] = ""
    input_preview: Annotated[
        str,
        Field(max_length=MAX_INPUT_PREVIEW_CHARS),
        Says(f"must be a string of 0-{MAX_INPUT_PREVIEW_CHARS} characters"),
    ] = ""


def permission_request(asked: PermissionInput) -> NewEvent:
    """The ``permission.request`` event for the agent ``asked.to``: its text, data and allow/deny
    form, all made here from checked fields.

    Raises:
        InvalidInput: ``asked.to`` is not a handle (it is checked once more as an event's).
    """
    data = {
        "request_id": asked.request_id,
        "tool_name": asked.tool_name,
        "description": asked.description,
        "input_preview": asked.input_preview,
    }
    text = f"Claude Code asks to use {asked.tool_name}: {asked.description}. Allow or deny?"
    fields = {"type": PERMISSION_TYPE, "text": text, "data": data, "reply": PERMISSION_FORM}
    return parse_new_event({"to": asked.to, **fields}, "permission")


BARE_SEQ = re.compile(r"[0-9]{1,18}")
RESUME_POINT = re.compile(f"{BARE_SEQ.pattern}|{cursors.POSITION.pattern}")
"""Where a stream resumes, as ``Last-Event-ID`` or ``?after=`` send it: the id of the last event
it gave (a position), or a bare seq (0: from the oldest; any other, from no known history)."""


class ResumeInput(Input):
    """``GET /channel/stream``'s query: where a first connect resumes (a reconnect sends the
    ``Last-Event-ID`` header instead, which wins), and a web page's stream token."""

    where: ClassVar[str] = "query"
    item: ClassVar[str] = "parameter"

    after: (
        Annotated[
            str,
            Field(
                pattern=whole(RESUME_POINT),
                description=(
                    "The id of the last event the stream gave; 0: from the oldest. Another"
                    " number, or an id from another history of the store (before a restore),"
                    " resumes from the oldest pending event, after a truncated frame."
                ),
            ),
            Says("must be the id of the last event the stream gave, or 0"),
        ]
        | None
    ) = None
    token: (
        Annotated[
            str,
            Field(
                description=(
                    "A token of POST /channel/stream-token, for a web page's EventSource (which"
                    " cannot send Authorization), instead of the agent's key."
                ),
            ),
            Says("must be a token of POST /channel/stream-token"),
        ]
        | None
    ) = None
