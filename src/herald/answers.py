"""The JSON herald answers with over HTTP, one ``TypedDict`` for each shape: what the ``to_json``
methods of ``herald.models`` and ``herald.overview`` return and what the handlers of
``herald.http`` build, so that mypy holds them to it, and what ``/openapi.json`` describes (its
schemas are generated from these types: a field's docstring is its description).

Every field is always there, null when it has no value; a shape that adds fields to another
extends it. Times are ISO 8601 in UTC with milliseconds (``Instant``)."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, WithJsonSchema, with_config
from typing_extensions import TypedDict

from herald.models import EndpointStatus, EventStatus, Kind, Priority

shape = with_config(ConfigDict(use_attribute_docstrings=True))
"""Each shape's decorator: its fields' docstrings become their descriptions."""

Instant = Annotated[
    str,
    WithJsonSchema(
        {"type": "string", "format": "date-time", "examples": ["2025-01-31T09:30:00.000Z"]}
    ),
]
JsonObject = dict[str, Any]


def one_of(values: type[enum.StrEnum]) -> WithJsonSchema:
    """The schema of a string that is one of an enum's values."""
    return WithJsonSchema({"type": "string", "enum": [member.value for member in values]})


@shape
class Health(TypedDict):
    """herald is up."""

    status: Literal["ok"]
    version: str
    """herald's version."""


@shape
class Ready(TypedDict):
    """herald is up and reaches its store."""

    status: Literal["ready"]


@shape
class ErrorDetail(TypedDict):
    code: str
    """What went wrong, for programs: ``invalid_input``, ``unauthorized``, ``forbidden``,
    ``not_found``, ``conflict``, ``too_large``, ``rate_limited``, ``store_unavailable``..."""
    message: str
    """What went wrong and what to do about it, for people."""


@shape
class Error(TypedDict):
    """Every error herald answers with, whatever the route."""

    error: ErrorDetail


# Agents


@shape
class AgentDelivery(TypedDict, total=False):
    """An agent's own say on how it is reached; only the keys set override herald's defaults."""

    channel: bool
    elicitation: bool
    stream: bool
    log: bool
    ack_timeout_s: float
    """Seconds an event pushed to a session may wait for its ack before it is offered again."""


@shape
class QuietHours(TypedDict):
    """No push but urgent between ``start`` and ``end`` (``"HH:MM"``, ``end`` before ``start``:
    the next day) on the wall clock of ``zone``; then one ``herald.summary`` push."""

    zone: str
    """An IANA time zone, such as Europe/Berlin."""
    start: str
    end: str


@shape
class Digest(TypedDict):
    """Events of ``types`` in bursts: the first pushed, the rest of ``window_s`` seconds kept
    unpushed and summed up in one ``herald.summary`` push at the window's end."""

    types: list[str]
    window_s: int


@shape
class AgentPreferences(TypedDict, total=False):
    """An agent's own rules for what is pushed to it; a key left out is no rule."""

    muted: list[str]
    """Globs of the event types never pushed to it (kept, and drained)."""
    quiet_hours: QuietHours
    digests: list[Digest]


@shape
class Agent(TypedDict):
    """An agent: an addressable recipient of events."""

    id: str
    """``agt_...``"""
    handle: str
    """Its name, unique: a-z, 0-9, _ and -."""
    webhook_url: str | None
    """Its webhook endpoint's URL, if it has one."""
    delivery: AgentDelivery
    last_seq: int
    """The seq of its newest event."""
    created_at: Instant
    preferences: AgentPreferences
    """Its own rules for what is pushed to it."""


@shape
class LoopGuardLimits(TypedDict):
    """An agent's loop guard limits: the exchanges two agents may have in ``window_s``
    seconds, and the messages it may send a minute."""

    exchanges: int
    window_s: int
    per_minute: int


@shape
class AgentUpdated(Agent, total=False):
    """An agent as ``PATCH /v1/agents/{id}`` answers: with its loop guard limits when the
    request set them."""

    loop_guard: LoopGuardLimits


@shape
class AgentSummary(Agent):
    """An agent with its open events, live sessions and last activity, read at one moment."""

    pending: int
    """Its open events (pending or sent, not yet acknowledged)."""
    live_sessions: int
    last_activity_at: Instant | None
    """The newest of its last publish and its sessions' last sign of life."""


@shape
class AgentDetail(AgentSummary):
    """One agent as ``GET /v1/agents/{id}`` answers: its summary, and the loop guard limits that
    hold for its sends (its own where the operator set them, else the serve-wide ones)."""

    loop_guard: LoopGuardLimits


@shape
class AgentPage(TypedDict):
    """A page of agents by handle."""

    agents: list[AgentSummary]
    next: str | None
    """The ``cursor`` of the page after; null: this is the last page. A page narrowed by type or
    status looks through a bounded number of events: it may be short (even empty) and still
    have a next, where its look ended."""


@shape
class ClientInfo(TypedDict):
    name: str | None
    version: str | None


@shape
class Session(TypedDict):
    """A live session of an agent, in any process sharing the store."""

    id: str
    agent: str
    """The agent's id."""
    process: str
    """Which herald process holds the connection."""
    transport: str
    era: str
    """The MCP protocol era the client speaks."""
    client: ClientInfo
    capabilities: JsonObject
    """What the session can take (channel, elicitation, stream, log...)."""
    can_push: bool
    connected_at: Instant
    seen_at: Instant
    expires_at: Instant


@shape
class Sessions(TypedDict):
    sessions: list[Session]


# Endpoints


@shape
class Endpoint(TypedDict):
    """An agent's webhook or OpenClaw endpoint. Its secret or token is never shown again."""

    id: str
    """``end_...``"""
    kind: Annotated[str, one_of(Kind)]
    url: str
    mode: str | None
    """An OpenClaw endpoint's mode: ``wake`` or ``agent``."""
    state: Annotated[str, one_of(EndpointStatus)]
    """``failing``: active, but its requests fail (since ``failing_since``, ``last_error``)."""
    disabled_reason: str | None
    failing_since: Instant | None
    last_error: str | None
    last_attempt_at: Instant | None
    rotating_until: Instant | None
    """Until when the previous webhook secret still signs, during a rotation."""


@shape
class SignedEndpoint(Endpoint):
    """A webhook endpoint with its signing secret, shown once."""

    secret: str
    """``whsec_...``: verify each delivery's ``webhook-signature`` with it."""


@shape
class SetWebhook(SignedEndpoint):
    """A webhook endpoint as it was set."""

    warning: str | None
    """Why the URL may not be reached (it does not resolve, say); null when herald sees none."""


@shape
class SetOpenClaw(Endpoint):
    """An OpenClaw endpoint as it was set."""

    warning: str | None
    """Why the URL may not be reached (it does not resolve, say); null when herald sees none."""


@shape
class ShownEndpoint(Endpoint):
    """An endpoint with when its earliest waiting delivery is due."""

    next_attempt_at: Instant | None
    """null: no delivery waits."""


@shape
class Endpoints(TypedDict):
    endpoints: list[ShownEndpoint]


@shape
class ListedEndpoint(ShownEndpoint):
    agent_handle: str


@shape
class EndpointPage(TypedDict):
    """A page of endpoints by id."""

    endpoints: list[ListedEndpoint]
    next: str | None
    """The ``cursor`` of the page after; null: this is the last page. A page narrowed by type or
    status looks through a bounded number of events: it may be short (even empty) and still
    have a next, where its look ended."""


@shape
class CreatedAgent(Agent):
    """A new agent with its key, shown once."""

    api_key: str
    """``herald_agent_...``: the agent's key, shown only now."""
    webhook: SetWebhook | None
    """Its webhook, when ``webhook_url`` was given."""


@shape
class RotatedKey(Agent):
    """An agent with its new key, shown once."""

    api_key: str
    """``herald_agent_...``: the agent's new key, shown only now."""
    previous_valid_until: Instant | None
    """Until when the old key keeps working; null: it stopped at once."""


# Events

AgentEvent = TypedDict(
    "AgentEvent",
    {
        "id": Annotated[str, Field(description="``evt_...``")],
        "agent": Annotated[str, Field(description="The id of the agent it is for.")],
        "seq": Annotated[int, Field(description="Its place among its agent's events, from 1.")],
        "type": Annotated[str, Field(description="What kind of event it is (dm.received).")],
        "text": Annotated[str, Field(description="A one-line summary every client can show.")],
        "data": dict[str, Any] | list[Any] | None,
        "dedupe_key": str | None,
        "created_at": Instant,
        "expires_at": Annotated[
            Instant | None, Field(description="When it expires if not delivered; null: never.")
        ],
        "from": Annotated[str | None, Field(description="The agent that gets its replies.")],
        "reply_to": Annotated[str | None, Field(description="The event this one answers.")],
        "reply": Annotated[
            JsonObject | None, Field(description="The form it asks its agent to fill in.")
        ],
        "priority": Annotated[
            str,
            one_of(Priority),
            Field(description="low (never pushed), normal, high or urgent (passes quiet hours)."),
        ],
        "thread": Annotated[
            str | None,
            Field(
                description="The conversation between two agents it belongs to (a message or a"
                " reply between agents); null for a publisher's event."
            ),
        ],
        "topic": Annotated[
            str | None,
            Field(
                description="The topic it was published to (this is its agent's copy); null"
                " for an event published to its agent."
            ),
        ],
    },
)
"""An event as its agent gets it (a webhook's body)."""


class EventWithStatus(AgentEvent):
    """What ``Event`` always holds (its optional key is its own)."""

    status: Annotated[str, one_of(EventStatus)]


@shape
class Event(EventWithStatus, total=False):
    """An event and how far its delivery got."""

    deliver_at: Instant
    """A scheduled event's due time (published with ``deliver_at`` or ``delay_s``): it is
    ``scheduled`` until then, its ``seq`` a placeholder below zero, then pending with its
    agent's next seq."""


@shape
class Reply(TypedDict):
    """An agent's answer to an event."""

    id: str
    """``rpl_...``"""
    event_id: str
    agent: str
    """The id of the agent that answered."""
    text: str
    data: JsonObject | None
    created_at: Instant
    routed_event_id: str | None
    """The event that carried the reply to the sender, when the sender is an agent."""


@shape
class Attempt(TypedDict):
    """One try at getting an event to its agent."""

    at: Instant
    mechanism: str
    """The way it was tried: channel, elicitation, stream, log, webhook..."""
    session: str | None
    outcome: str
    error: str | None


@shape
class EndpointDelivery(TypedDict):
    """An event's delivery to one webhook or OpenClaw endpoint."""

    endpoint: str
    """The endpoint's id."""
    state: str
    """``waiting`` (for its next try), ``done`` or ``dead`` (no more tries)."""
    tries: int
    next_attempt_at: Instant | None
    last_error: str | None


@shape
class EventDetail(Event):
    """An event with its attempts, replies and endpoint deliveries."""

    attempts: list[Attempt]
    replies: list[Reply]
    deliveries: list[EndpointDelivery]
    waiting: str | None
    """Why nothing has tried a pending event yet, from its agent's sessions and endpoints now
    (null once anything has, when it is not pending, and to the agent's own key)."""


@shape
class EventPage(TypedDict):
    """A page of events, newest first."""

    events: list[Event]
    next: str | None
    """The ``cursor`` of the page after; null: this is the last page. A page narrowed by type or
    status looks through a bounded number of events: it may be short (even empty) and still
    have a next, where its look ended."""


class ReceiptFields(TypedDict):
    """What ``Receipt`` always holds (its optional key is its own). Its field's description is
    in its type: a parent's docstrings are not its child's."""

    id: str
    seq: int
    duplicate: Annotated[
        bool,
        Field(
            description="An event with the same dedupe_key was published before: this is that one."
        ),
    ]


@shape
class Receipt(ReceiptFields, total=False):
    """A published event."""

    deliver_at: Instant
    """The event is scheduled: offered from this time on (its ``seq`` until then is a
    placeholder below zero)."""


@shape
class Checked(TypedDict):
    """A dry run's answer: every event would be taken; none was stored."""

    checked: int
    """How many events were checked (an event for a list of handles counts once for each)."""


@shape
class Receipts(TypedDict):
    """A published batch, or an event for a list of handles: a receipt for each event stored,
    in the order sent (an event for a list gives one for each handle, in the list's order)."""

    events: list[Receipt]


@shape
class Drained(TypedDict):
    """The agent's next open events, oldest first."""

    events: list[Event]
    cursor: int
    """Send it back as ``cursor`` to acknowledge these events."""


@shape
class StreamToken(TypedDict):
    """A token with which a web page follows the agent's stream: ``GET
    /channel/stream?token=...``, and no other route."""

    token: str
    """``herald_stream_...``: give it to the page only, never the agent's key."""
    expires_at: Instant
    """After it the stream refuses it (401), as it does once the agent's key is rotated; a
    stream opened by then goes on until the agent's key stops working."""


class AckedCount(TypedDict):
    """What ``Acked`` always holds (its optional keys are its own). Its field's description is
    in its type: a parent's docstrings are not its child's."""

    acked: Annotated[int, Field(description="How many events this call acknowledged.")]


@shape
class Acked(AckedCount, total=False):
    truncated: bool
    """Present (true) when the cursor was a position from another history of the store (given
    before a restore): it acknowledged nothing, as the events it stood for may be other events
    now. Acknowledge by ids, or with a cursor given since."""


# The catalogue, keys, counts


@shape
class EventType(TypedDict):
    """An event type the operator declared."""

    name: str
    description: str
    payload_schema: JsonObject | None
    """The JSON Schema (draft 2020-12) its events' data must be valid against."""
    created_at: Instant
    updated_at: Instant


@shape
class EventTypes(TypedDict):
    event_types: list[EventType]


@shape
class Topic(TypedDict):
    """A topic the operator declared."""

    name: str
    description: str
    subscribers: int
    """How many agents a publish to it now reaches: those with a pattern that matches it."""
    created_at: Instant
    updated_at: Instant


@shape
class Topics(TypedDict):
    topics: list[Topic]


@shape
class TopicSubscription(TypedDict):
    """An agent's subscription: a topic's name, or a glob of names (``*`` and ``?``)."""

    agent: str
    """The agent's id."""
    handle: str
    topic: str
    """The topic's name or glob the agent subscribed to."""
    created_at: Instant


@shape
class TopicSubscriptions(TypedDict):
    subscriptions: list[TopicSubscription]


@shape
class TopicPublished(TypedDict):
    """A publish to a topic: one event for each agent subscribed at that moment, stored in one
    transaction (none subscribed: none stored, and ``reached`` is 0)."""

    topic: str
    reached: int
    """How many agents the event was stored for."""
    events: list[Receipt]
    """A receipt for each event stored (each agent's own), by the agents' handles."""
    note: str | None
    """What a publish that reached no agent means, and how to subscribe one; null otherwise."""


@shape
class PublisherKey(TypedDict):
    """A key an application publishes with: never the key itself."""

    id: str
    name: str
    scopes: list[str]
    """What it may do: ``publish``."""
    handles: list[str] | None
    """The only agents it may publish to; null: every agent."""
    types: list[str] | None
    """The only event types (globs) it may publish; null: every type."""
    senders: list[str]
    """The handles (globs) its events may name in ``from``; empty: none."""
    topics: list[str] | None
    """The only topics (globs) it may publish to, and then no agent directly unless
    ``handles`` are listed too; null: any topic, unless ``handles`` are listed."""
    created_at: Instant


@shape
class CreatedPublisherKey(PublisherKey):
    key: str
    """``herald_pub_...``: shown only now."""


@shape
class PublisherKeys(TypedDict):
    keys: list[PublisherKey]


@shape
class EventCounts(TypedDict):
    pending: int
    sent: int
    delivered: int
    expired: int
    dead: int
    scheduled: int
    """Published for later (deliver_at or delay_s) and not yet due."""
    cancelled: int
    """Cancelled before they were due, or recalled before anything handed them out; kept for
    the retention from when they were cancelled."""


@shape
class AttemptCount(TypedDict):
    mechanism: str
    outcome: str
    count: int


@shape
class PendingAgent(TypedDict):
    id: str
    handle: str
    pending: int


@shape
class SessionCount(TypedDict):
    transport: str
    era: str
    count: int


@shape
class EndpointCount(TypedDict):
    kind: str
    state: Annotated[str, one_of(EndpointStatus)]
    """As an endpoint shows it: ``failing`` ones are not counted ``active``."""
    count: int


@shape
class ClientCount(TypedDict):
    client: str | None
    """The client's name as it gave it (null: it gave none)."""
    era: str
    count: int


@shape
class OldestPending(TypedDict):
    id: str
    agent: str
    """The agent's id."""
    handle: str
    created_at: Instant


@shape
class TripAgent(TypedDict):
    id: str
    handle: str


@shape
class LoopGuardTrip(TypedDict):
    """A message between agents a loop guard refused (nothing of it was stored), as the feed's
    ``loop_guard`` item shows it."""

    kind: Literal["loop_guard"]
    at: Instant
    """When it was refused."""
    agent: TripAgent
    """The agent that sent it."""
    to: str
    """The handle of the agent it was for."""
    thread: str
    limit: Annotated[str, WithJsonSchema({"type": "string", "enum": ["exchanges", "per_minute"]})]
    """The limit it was over: the exchanges of the two agents in a window, or the messages the
    sender sends a minute."""
    maximum: int


@shape
class LoopGuardTrips(TypedDict):
    """The messages loop guards refused, newest first."""

    trips: list[LoopGuardTrip]
    """The newest trips the journal keeps (it keeps them as long as events); one whose sender
    was deleted since is left out."""
    last_day: int
    """How many messages loop guards refused in the last 24 hours."""


@shape
class Stats(TypedDict):
    """Counts of the whole herald, each read from the agents' rows or a small table."""

    events: EventCounts
    """Events stored, by status; one past its expiry counts until the upkeep marks it, within
    seconds."""
    published: int
    """Events published since the store was made, to the agents it has now (pruned ones
    included): two readings give the publish rate in between."""
    attempts_recorded: list[AttemptCount]
    """Attempts recorded since the store was made, by way and outcome (pruned ones included)."""
    top_pending: list[PendingAgent]
    """The agents with the most open, unexpired events, most first."""
    sessions: list[SessionCount]
    endpoints: list[EndpointCount]
    clients: list[ClientCount]
    """Live sessions by client and era."""
    oldest_pending: OldestPending | None
    """The oldest open, unexpired event (null: none is open)."""
