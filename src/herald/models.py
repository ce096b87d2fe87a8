"""The data herald keeps: agents, events, replies, delivery attempts, live sessions, the
endpoints that agents without a connection are pushed to, and the event types the operator
declares. Plain values: no I/O, no checks of input (those are in ``herald.validation``)."""

from __future__ import annotations

import enum
import fnmatch
import functools
import json
import re
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from pydantic_core import from_json

from herald.times import iso_ms, ms_from_iso

if TYPE_CHECKING:  # the shapes' schemas are made of this module's enums
    from herald import answers


class EventStatus(enum.StrEnum):
    PENDING = "pending"
    SENT = "sent"
    DELIVERED = "delivered"
    EXPIRED = "expired"
    DEAD = "dead"
    """Handed out as many times as the hub allows (``--max-deliveries``) and never
    acknowledged: offered no more until the operator redelivers it."""
    SCHEDULED = "scheduled"
    """Published for a later time (``deliver_at``): offered by no way until it is due, when it
    becomes pending with its agent's next seq."""
    CANCELLED = "cancelled"
    """Withdrawn by the operator before it was due, or while pending before anything handed it
    out: kept, never offered."""

    @property
    def is_open(self) -> bool:
        """Still owed to its agent."""
        return self in (EventStatus.PENDING, EventStatus.SENT)


COUNTED_STATUSES = (
    EventStatus.PENDING,
    EventStatus.SENT,
    EventStatus.DELIVERED,
    EventStatus.EXPIRED,
    EventStatus.DEAD,
)
"""The statuses each agent's row counts its events by (a scheduled or cancelled event is in
none of them)."""


class Priority(enum.StrEnum):
    """How much an event matters to its agent: a low one is never pushed (drained, read from
    the inbox or MCP Events only); an urgent one passes the agent's quiet hours and digests."""

    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"
    URGENT = "urgent"


@dataclass(frozen=True)
class Agent:
    id: str
    handle: str
    key_hash: str
    created_at: int
    webhook_url: str | None = None
    """Its webhook endpoint's URL, as the store read it with the agent."""
    delivery_json: str = "{}"
    last_seq: int = 0
    """The seq of the agent's newest event when this record was read."""
    preferences_json: str = "{}"
    """Its own rules for what is pushed to it (``Preferences``), as JSON."""

    @property
    def delivery(self) -> dict[str, Any]:
        """Per-agent delivery overrides (see ``herald.capabilities``)."""
        value = json.loads(self.delivery_json)
        return value if isinstance(value, dict) else {}

    def to_json(self) -> answers.Agent:
        return {
            "id": self.id,
            "handle": self.handle,
            "webhook_url": self.webhook_url,
            # checked as DeliveryOverrides when it was set
            "delivery": cast("answers.AgentDelivery", self.delivery),
            "last_seq": self.last_seq,
            "created_at": iso_ms(self.created_at),
            # checked as PreferencesInput when they were set
            "preferences": cast("answers.AgentPreferences", stored_json(self.preferences_json)),
        }


@dataclass(slots=True)
class NewEvent:
    """An event as a publisher hands it in, checked; the store gives it an id and a seq.

    A value, changed only by ``dataclasses.replace``, but not declared frozen: a frozen
    dataclass sets each field through ``object.__setattr__``, which made building one five
    times dearer, and a batch builds one per event."""

    to: str
    type: str
    text: str
    data: dict[str, Any] | list[Any] | None = None
    dedupe_key: str | None = None
    ttl_s: float | None = None
    data_json: str = field(default="null", repr=False)
    reply_schema_json: str | None = None
    sender: str | None = None
    reply_to: str | None = None
    deliver_at: int | None = None
    """When it is due (ms since the epoch): stored ``scheduled`` until then. Set by the hub,
    from ``deliver_at`` or ``delay_s`` as published."""
    delay_s: float | None = None
    """As published: due this long after the publish (the hub makes it ``deliver_at``)."""
    priority: Priority = Priority.NORMAL
    thread: str | None = None
    hold: Hold | None = None
    """The agent's rule that may hold it back from being pushed (quiet hours, a digest), as
    the hub read it at the publish (``herald.push_windows``): the store decides with it, in the
    transaction that stores the event, which window holds it (``held_by``)."""
    held_by: str | None = None
    """The window that holds it back (set by the store)."""
    topic: str | None = None
    """The topic whose publish made this copy (set by the store for each subscriber's copy,
    ``Store.append_to_topic``); None for an event published to its agent."""

    def with_hold(self, hold: Hold | None, held_by: str | None = None) -> NewEvent:
        """The same event with the rule that may hold it back and the window that holds it."""
        return self._copy(self.to, hold, held_by)

    def for_handle(self, handle: str) -> NewEvent:
        """The same event for the agent ``handle``: a copy for each handle of a list (each
        copy is held by its own agent's rules, set later)."""
        return self._copy(handle, None, None)

    def _copy(self, to: str, hold: Hold | None, held_by: str | None) -> NewEvent:
        # Its fields in order: ``dataclasses.replace`` cost a list's copy six times as much,
        # and each held publish 2 µs.
        return NewEvent(
            to,
            self.type,
            self.text,
            self.data,
            self.dedupe_key,
            self.ttl_s,
            self.data_json,
            self.reply_schema_json,
            self.sender,
            self.reply_to,
            self.deliver_at,
            self.delay_s,
            self.priority,
            self.thread,
            hold,
            held_by,
            self.topic,
        )

    def stored(self, event_id: str, agent_id: str, seq: int, now: int) -> Event:
        """The event as the store keeps it, once its id, agent and seq are known. A scheduled
        one's time to live counts from when it is due."""
        due = self.deliver_at
        ttl_from = now if due is None else due
        expires_at = ttl_from + int(self.ttl_s * 1000) if self.ttl_s is not None else None
        # Made as ``Event.__init__`` leaves it, its fields set at once: that ``__init__`` sets
        # each of them through ``object.__setattr__`` (it is frozen), which cost each event
        # stored twice as much as this (the store's rows are read into events so too:
        # ``Table._make``).
        made: Event = _new_object(Event)
        made.__dict__.update(
            id=event_id,
            agent_id=agent_id,
            seq=seq,
            type=self.type,
            text=self.text,
            data_json=self.data_json,
            created_at=now,
            status=EventStatus.PENDING if due is None else EventStatus.SCHEDULED,
            dedupe_key=self.dedupe_key,
            expires_at=expires_at,
            status_at=now,
            sender=self.sender,
            reply_to=self.reply_to,
            reply_schema_json=self.reply_schema_json,
            deliver_at=due,
            priority=self.priority,
            thread=self.thread,
            held_by=self.held_by,
            topic=self.topic,
        )
        return made


_new_object = object.__new__


def is_scheduled(event: NewEvent) -> bool:
    """Whether the event was published for later (``deliver_at`` or ``delay_s``)."""
    return event.deliver_at is not None or event.delay_s is not None


def stored_json(text: str) -> Any:
    """JSON herald stored (an event's data), read back: by pydantic_core's parser, a fifth of
    ``json.loads``'s cost (paid for each event handed out). What it refuses and ``json`` takes,
    which an older herald may have kept (a lone surrogate, nesting past its depth), is read by
    ``json``: the same values either way."""
    try:
        return from_json(text)
    except ValueError:
        return json.loads(text)


@dataclass(frozen=True)
class Event:
    id: str
    agent_id: str
    seq: int
    type: str
    text: str
    data_json: str
    created_at: int
    status: EventStatus
    dedupe_key: str | None = None
    expires_at: int | None = None
    status_at: int | None = None
    sender: str | None = None
    reply_to: str | None = None
    reply_schema_json: str | None = None
    deliver_at: int | None = None
    """When a scheduled event is (or was) due; None for one published to go at once."""
    priority: Priority = Priority.NORMAL
    thread: str | None = None
    """The conversation between two agents this message belongs to (``herald.loop_guard``):
    a new ``send_message`` starts one, a reply carries the one of the event it answers; None
    for events a publisher stores."""
    held_by: str | None = None
    """The window of its agent's quiet hours or digest that held it back: kept, drained and
    acknowledged like any other, never pushed (a ``herald.summary`` event counts it when the
    window ends); None for an event pushed as usual."""
    topic: str | None = None
    """The topic it was published to (this is its agent's copy); None for an event published
    to its agent directly."""

    @property
    def data(self) -> Any:
        return stored_json(self.data_json)

    @property
    def reply_schema(self) -> dict[str, Any] | None:
        """The form an interactive event asks its agent to fill in, or None."""
        return stored_json(self.reply_schema_json) if self.reply_schema_json else None

    @property
    def interactive(self) -> bool:
        return self.reply_schema_json is not None

    @staticmethod
    def from_json(raw: dict[str, Any]) -> Event:
        """An event as the HTTP API shows it, read back (by herald's own clients); one pushed
        without its status (a webhook's body) is pending."""
        reply = raw.get("reply")
        expires = raw.get("expires_at")
        return Event(
            id=raw["id"],
            agent_id=raw["agent"],
            seq=raw["seq"],
            type=raw["type"],
            text=raw["text"],
            data_json=json.dumps(raw.get("data"), separators=(",", ":"), ensure_ascii=False),
            created_at=ms_from_iso(raw["created_at"]),
            status=EventStatus(raw.get("status", EventStatus.PENDING)),
            dedupe_key=raw.get("dedupe_key"),
            expires_at=ms_from_iso(expires) if expires else None,
            sender=raw.get("from"),
            reply_to=raw.get("reply_to"),
            reply_schema_json=json.dumps(reply, separators=(",", ":")) if reply else None,
            priority=Priority(raw.get("priority", Priority.NORMAL)),
            thread=raw.get("thread"),
            topic=raw.get("topic"),
        )

    def to_json(self) -> answers.Event:
        answer = cast("answers.Event", self.to_agent_json())  # a new dict: given its status
        answer["status"] = self.status.value
        if self.deliver_at is not None:
            answer["deliver_at"] = iso_ms(self.deliver_at)
        return answer

    def to_agent_json(self) -> answers.AgentEvent:
        """The event as it is pushed to its agent (a webhook's body): what the drain and the
        stream show, less ``status``, which only records how far its delivery got."""
        return {
            "id": self.id,
            "agent": self.agent_id,
            "seq": self.seq,
            "type": self.type,
            "text": self.text,
            "data": self.data,
            "dedupe_key": self.dedupe_key,
            "created_at": iso_ms(self.created_at),
            "expires_at": iso_ms(self.expires_at) if self.expires_at is not None else None,
            "from": self.sender,
            "reply_to": self.reply_to,
            "reply": self.reply_schema,
            "priority": self.priority.value,
            "thread": self.thread,
            "topic": self.topic,
        }


@dataclass(frozen=True)
class Reply:
    """An agent's answer to an event. Routed to the event's sender: an agent gets it as an event
    (``routed_event_id``); an application through ``Hub.on_reply`` and the event's API view."""

    id: str
    event_id: str
    agent_id: str
    text: str
    data_json: str
    created_at: int
    routed_event_id: str | None = None

    @staticmethod
    def from_json(raw: dict[str, Any]) -> Reply:
        return Reply(
            id=raw["id"],
            event_id=raw["event_id"],
            agent_id=raw["agent"],
            text=raw["text"],
            data_json=json.dumps(raw.get("data"), separators=(",", ":"), ensure_ascii=False),
            created_at=ms_from_iso(raw["created_at"]),
            routed_event_id=raw.get("routed_event_id"),
        )

    def to_json(self) -> answers.Reply:
        return {
            "id": self.id,
            "event_id": self.event_id,
            "agent": self.agent_id,
            "text": self.text,
            "data": json.loads(self.data_json),
            "created_at": iso_ms(self.created_at),
            "routed_event_id": self.routed_event_id,
        }


@dataclass(frozen=True)
class Attempt:
    """One try at getting an event to its agent, successful or not."""

    event_id: str
    at: int
    mechanism: str
    outcome: str
    session: str | None = None
    error: str | None = None

    def to_json(self) -> answers.Attempt:
        return {
            "at": iso_ms(self.at),
            "mechanism": self.mechanism,
            "session": self.session,
            "outcome": self.outcome,
            "error": self.error,
        }


@dataclass(frozen=True)
class SessionRecord:
    """A live session as the store keeps it, so that every process sharing the store sees it:
    held by one process, which refreshes ``expires_at`` while the session lives. A session whose
    process died disappears once its expiry passes."""

    id: str
    agent_id: str
    process: str
    """Which herald process holds the connection."""
    transport: str
    era: str
    connected_at: int
    seen_at: int
    expires_at: int
    client_name: str | None = None
    client_version: str | None = None
    capabilities_json: str = "{}"
    can_push: bool = False

    @property
    def capabilities(self) -> dict[str, Any]:
        value = json.loads(self.capabilities_json)
        return value if isinstance(value, dict) else {}

    def to_json(self) -> answers.Session:
        return {
            "id": self.id,
            "agent": self.agent_id,
            "process": self.process,
            "transport": self.transport,
            "era": self.era,
            "client": {"name": self.client_name, "version": self.client_version},
            "capabilities": self.capabilities,
            "can_push": self.can_push,
            "connected_at": iso_ms(self.connected_at),
            "seen_at": iso_ms(self.seen_at),
            "expires_at": iso_ms(self.expires_at),
        }


@dataclass(frozen=True)
class EventType:
    """An event type the operator declared: what its events mean, and optionally the JSON Schema
    their ``data`` must be valid against (checked as they are published)."""

    name: str
    description: str
    payload_schema_json: str | None
    created_at: int
    updated_at: int

    @property
    def payload_schema(self) -> dict[str, Any] | None:
        value = json.loads(self.payload_schema_json) if self.payload_schema_json else None
        return value if isinstance(value, dict) else None

    def to_json(self) -> answers.EventType:
        return {
            "name": self.name,
            "description": self.description,
            "payload_schema": self.payload_schema,
            "created_at": iso_ms(self.created_at),
            "updated_at": iso_ms(self.updated_at),
        }


@dataclass(frozen=True)
class Topic:
    """A topic the operator declared, and how many agents subscribe to it now (by its name or a
    glob that matches it)."""

    name: str
    description: str
    created_at: int
    updated_at: int
    subscribers: int = 0

    def to_json(self) -> answers.Topic:
        return {
            "name": self.name,
            "description": self.description,
            "subscribers": self.subscribers,
            "created_at": iso_ms(self.created_at),
            "updated_at": iso_ms(self.updated_at),
        }


@dataclass(frozen=True)
class TopicSubscription:
    """An agent subscribed to a topic's name or to a glob of names (``pattern``)."""

    agent_id: str
    handle: str
    pattern: str
    created_at: int

    @staticmethod
    def from_json(raw: dict[str, Any]) -> TopicSubscription:
        return TopicSubscription(
            raw["agent"], raw["handle"], raw["topic"], ms_from_iso(raw["created_at"])
        )

    def to_json(self) -> answers.TopicSubscription:
        return {
            "agent": self.agent_id,
            "handle": self.handle,
            "topic": self.pattern,
            "created_at": iso_ms(self.created_at),
        }


@dataclass(frozen=True)
class PublisherKey:
    """A key an application publishes with instead of the admin key, kept only as a hash: its
    ``scopes`` (what it may do: ``publish``), and, if set, the only ``handles`` it may publish
    to and the only event types (globs, ``*`` and ``?``) it may publish; ``senders`` are the
    handles (globs) its events may name in ``from``, the agent that gets the replies (none:
    its events name no sender)."""

    id: str
    name: str
    key_hash: str
    scopes_json: str
    handles_json: str | None
    types_json: str | None
    created_at: int
    senders_json: str = "[]"
    topics_json: str | None = None

    @property
    def scopes(self) -> list[str]:
        return list(json.loads(self.scopes_json))

    @property
    def handles(self) -> list[str] | None:
        return None if self.handles_json is None else list(json.loads(self.handles_json))

    @property
    def types(self) -> list[str] | None:
        return None if self.types_json is None else list(json.loads(self.types_json))

    @property
    def senders(self) -> list[str]:
        return list(json.loads(self.senders_json))

    @property
    def topics(self) -> list[str] | None:
        return None if self.topics_json is None else list(json.loads(self.topics_json))

    def to_json(self) -> answers.PublisherKey:
        """What the admin sees of the key: never the key, nor its hash."""
        return {
            "id": self.id,
            "name": self.name,
            "scopes": self.scopes,
            "handles": self.handles,
            "types": self.types,
            "senders": self.senders,
            "topics": self.topics,
            "created_at": iso_ms(self.created_at),
        }


@dataclass(frozen=True)
class Published:
    """The answer to one publish: the stored event, and whether this call created it."""

    event: Event
    created: bool


@dataclass(frozen=True)
class Drained:
    """What a drain hands back: events oldest first, and the cursor to send next time.
    ``more``: the drain's look stopped at its bound (``HubConfig.scan_events``) and its cursor
    moved to where the look ended, so more may follow at once; ``looked``: how many seqs the
    look read (what a poll costs its key, ``herald.http.limits.PollCost``)."""

    events: list[Event]
    cursor: int
    more: bool = False
    looked: int = 0


@dataclass(frozen=True)
class Acknowledged:
    """What an acknowledgement did: how many events it marked delivered; ``truncated``: its
    cursor was a position from another history of the store (given before a restore, when seqs
    were handed out again), which acknowledges nothing."""

    count: int
    truncated: bool = False

    def to_json(self) -> answers.Acked:
        answer: answers.Acked = {"acked": self.count}
        if self.truncated:
            answer["truncated"] = True
        return answer

    @staticmethod
    def from_json(raw: dict[str, Any]) -> Acknowledged:
        return Acknowledged(int(raw["acked"]), bool(raw.get("truncated", False)))


@dataclass(frozen=True)
class History:
    """A page of an agent's acknowledged events, newest first, and the cursor of the page
    after (``next``; None: this is the last). A page looks through a bounded number of events
    (``HubConfig.scan_events``): it may be short, even empty, and still have a ``next``."""

    events: list[Event]
    next: str | None

    def to_json(self) -> answers.EventPage:
        return {"events": [event.to_json() for event in self.events], "next": self.next}

    @staticmethod
    def from_json(raw: dict[str, Any]) -> History:
        return History([Event.from_json(e) for e in raw["events"]], raw["next"])


@dataclass(frozen=True)
class EventMatch:
    """Which of an agent's events a subscription takes: those whose type matches one of
    ``types`` (globs where ``*`` is any run of characters and ``?`` one character; none: every
    type), and, with ``sender``, only those from that handle."""

    types: tuple[str, ...] = ()
    sender: str | None = None

    @property
    def everything(self) -> bool:
        return not self.types and self.sender is None

    def matches(self, event: Event) -> bool:
        if self.sender is not None and event.sender != self.sender:
            return False
        return not self.types or any(fnmatch.fnmatchcase(event.type, t) for t in self.types)


EVERY_EVENT = EventMatch()


class HoldReason(enum.StrEnum):
    """Why an event is held back from being pushed, as its summary says."""

    QUIET_HOURS = "quiet_hours"
    DIGEST = "digest"


@dataclass(slots=True)
class Hold:
    """A rule of its agent that holds an event back, as the hub read it at the publish: the
    store finds the rule's window open for the agent (``rule`` names it), or opens one that
    ends at ``until``. The event is held by an open window; the one that opens it is held too
    in quiet hours, and pushed in a digest (the first of a burst).

    A value, never changed, but not declared frozen (as ``NewEvent``): each held publish
    builds one, and a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``, which made it three times dearer."""

    reason: HoldReason
    rule: str
    until: int


@dataclass(frozen=True)
class PushWindow:
    """An agent's quiet hours or digest window, open from ``opened_at`` until ``until``: the
    events it holds are summed up in one push when it ends."""

    id: str
    agent_id: str
    handle: str
    reason: HoldReason
    opened_at: int
    until: int


@dataclass(frozen=True)
class QuietHours:
    """No push but urgent from ``start`` to ``end`` (minutes after midnight, ``end`` maybe the
    next day), on the wall clock of the IANA time zone ``zone``."""

    zone: str
    start: int
    end: int


@dataclass(frozen=True)
class Digest:
    """Events of ``types`` (globs) come in bursts: the first is pushed, the rest of
    ``window_s`` seconds are held, and summed up in one push at the window's end."""

    types: tuple[str, ...]
    window_s: int

    @functools.cached_property
    def rule(self) -> str:
        """The name of its windows: the same types share them. (Made once: each held publish
        names it.)"""
        return "digest " + json.dumps(self.types, separators=(",", ":"))

    @functools.cached_property
    def matches(self) -> TypeMatch:
        """Whether a type is one of its ``types``."""
        return globs_matcher(self.types)


TypeMatch = Callable[[str], bool]
"""Whether an event type matches (a ``globs_matcher``)."""


def globs_matcher(globs: Sequence[str]) -> TypeMatch:
    """Whether a type matches one of ``globs`` (as ``fnmatch.fnmatchcase``: ``*`` any run of
    characters, ``?`` one, ``[...]`` a set), in one compiled pattern."""
    if not globs:
        return _no_type
    pattern = re.compile("|".join(fnmatch.translate(glob) for glob in globs))
    return lambda type_: pattern.match(type_) is not None


def _no_type(type_: str) -> bool:
    return False


def _minutes(hh_mm: str) -> int:
    hours, minutes = hh_mm.split(":")
    return int(hours) * 60 + int(minutes)


@dataclass(frozen=True)
class Preferences:
    """An agent's own rules for what is pushed to it (set by the operator or by the agent):
    the event types it muted are kept and drained, never pushed; in its quiet hours, and in a
    digest's window, events are kept and drained, pushed as one summary at the end."""

    muted: EventMatch | None = None
    """The muted types' globs; None: nothing is muted."""
    quiet_hours: QuietHours | None = None
    digests: tuple[Digest, ...] = ()

    @staticmethod
    def from_json(text: str) -> Preferences:
        """The preferences the store keeps (checked when they were set)."""
        raw = stored_json(text)
        if not isinstance(raw, dict):
            return NO_PREFERENCES
        muted = tuple(raw.get("muted", ()))
        quiet = raw.get("quiet_hours")
        return Preferences(
            muted=EventMatch(types=muted) if muted else None,
            quiet_hours=QuietHours(quiet["zone"], _minutes(quiet["start"]), _minutes(quiet["end"]))
            if quiet
            else None,
            digests=tuple(Digest(tuple(d["types"]), d["window_s"]) for d in raw.get("digests", ())),
        )

    @property
    def timed(self) -> bool:
        """Whether it has rules that hold events back for a time (quiet hours, digests)."""
        return self.quiet_hours is not None or bool(self.digests)

    def mutes(self, event: Event | NewEvent) -> bool:
        return self._muted_type(event.type)

    def type_rules(self, type_: str) -> tuple[bool, Digest | None]:
        """Whether the type is muted, and the first digest whose types match it (None: none
        does): remembered by type, as each publish to the agent asks (its globs matched again
        each time cost a held publish a tenth of its rules' Python)."""
        known = self._type_rules.get(type_)
        if known is None:
            if len(self._type_rules) >= REMEMBERED_TYPES:
                self._type_rules.clear()
            digest = next((d for d in self.digests if d.matches(type_)), None)
            known = self._type_rules[type_] = (self._muted_type(type_), digest)
        return known

    @functools.cached_property
    def _type_rules(self) -> dict[str, tuple[bool, Digest | None]]:
        return {}

    @functools.cached_property
    def _muted_type(self) -> TypeMatch:
        """Whether a type is muted: the globs compiled once, as every publish to the agent
        and every push asks (``fnmatch`` one glob at a time cost a publish a microsecond)."""
        return globs_matcher(self.muted.types if self.muted is not None else ())


NO_PREFERENCES = Preferences()
REMEMBERED_TYPES = 1000
"""The most event types whose rules one agent's preferences remember (``type_rules``): past
it they are matched anew."""


@dataclass(frozen=True)
class StartPosition:
    """Where a subscription starts: just before the agent's oldest open matching event (its
    newest seq when none is open), how many open matching events wait after it, and how many
    it skips as too old. ``more``: the look for that oldest event stopped at its bound
    (``HubConfig.scan_events``) with none found; the cursor is where it stopped, and more
    events are to be looked at after it at once."""

    cursor: int
    waiting: int
    skipped: int
    more: bool = False


# Endpoints: where herald pushes to agents that hold no connection (a signed webhook, an
# OpenClaw gateway). How they are checked, sent to and retried is in ``herald.webhooks``.


class Kind(enum.StrEnum):
    WEBHOOK = "webhook"
    OPENCLAW = "openclaw"
    SUBSCRIPTION = "subscription"
    """An MCP Events webhook subscription (``events/subscribe``): an agent may have many."""


class State(enum.StrEnum):
    ACTIVE = "active"
    DISABLED = "disabled"


class EndpointStatus(enum.StrEnum):
    """What an endpoint is doing, as shown: its ``State``, with an active endpoint whose requests
    fail (``failing_since``) shown ``failing``."""

    ACTIVE = "active"
    FAILING = "failing"
    DISABLED = "disabled"


REFUSED_PREFIX = "address refused: "
"""How the ``disabled_reason`` of an endpoint disabled for its address begins: such an endpoint
is re-enabled once ``herald serve --webhook-allow`` allows its address."""


@dataclass(frozen=True)
class Endpoint:
    id: str
    agent_id: str
    kind: Kind
    url: str
    secret: str
    """A webhook's signing secret, or an OpenClaw gateway's hooks token. Never shown again."""
    created_at: int
    mode: str | None = None
    previous_secret: str | None = None
    previous_until: int | None = None
    state: State = State.ACTIVE
    disabled_reason: str | None = None
    failing_since: int | None = None
    last_error: str | None = None
    last_attempt_at: int | None = None
    expires_at: int | None = None
    """When a subscription's grant runs out (None: never); other endpoints never expire."""
    last_ok_at: int | None = None
    """When a request to it last succeeded."""

    def signing_secrets(self, now: int) -> list[str]:
        """The secrets that sign now: during a rotation, the new one and the previous one."""
        if self.previous_secret and self.previous_until and now < self.previous_until:
            return [self.secret, self.previous_secret]
        return [self.secret]

    @property
    def status(self) -> EndpointStatus:
        if self.state is State.ACTIVE and self.failing_since is not None:
            return EndpointStatus.FAILING
        return EndpointStatus(self.state.value)

    def to_json(self) -> answers.Endpoint:
        return {
            "id": self.id,
            "kind": self.kind.value,
            "url": self.url,
            "mode": self.mode,
            "state": self.status.value,
            "disabled_reason": self.disabled_reason,
            "failing_since": iso_ms(self.failing_since) if self.failing_since else None,
            "last_error": self.last_error,
            "last_attempt_at": iso_ms(self.last_attempt_at) if self.last_attempt_at else None,
            "rotating_until": iso_ms(self.previous_until) if self.previous_until else None,
        }


@dataclass(frozen=True)
class WebhookSubscription:
    """What an MCP Events webhook subscription takes, beside its endpoint (same ``id``): the
    catalogue entry and arguments it was made with, the agent's events they match, the seq
    after which its deliveries start, and when its (agent, URL) was verified."""

    id: str
    agent_id: str
    name: str
    arguments_json: str
    types_json: str
    sender: str | None
    after_seq: int
    verified_at: int | None = None
    webhook_id: str = "event"
    """What its event deliveries' ``webhook-id`` is, as its client's profile asked
    (``herald.capabilities.WEBHOOK_IDS``): the event's id, or one of each delivery's own."""
    gap_at: int | None = None
    """When a gap arose that its endpoint has not been told of yet (events it was owed expired
    or were pruned, or one was given up on); None: none is owed."""
    held_until: int | None = None
    """Until when its deliveries are held back because the receiver asked (``Retry-After``)."""
    paced_until: int | None = None
    """Where its pace has reached, under a per-subscription rate (``herald serve
    --subscription-rate``): the moment the deliveries claimed so far would all have gone at that
    rate (``herald.store.rules.paced_allowance``)."""

    @property
    def match(self) -> EventMatch:
        return EventMatch(tuple(json.loads(self.types_json)), self.sender)

    @property
    def arguments(self) -> dict[str, Any]:
        value = json.loads(self.arguments_json)
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class OwedEvents:
    """The oldest matching events a webhook subscription still owes, as (seq, event id) in seq
    order, read at one moment; ``complete``: there are no more. The cursor a delivery carries
    is read off it (``cursor``)."""

    events: tuple[tuple[int, str], ...]
    last_seq: int
    """The agent's newest seq when they were read: events published later come after it."""
    complete: bool

    def cursor(self, sending: str | None, delivered: Set[str] = frozenset(), start: int = 0) -> int:
        """The seq before the oldest owed event other than ``sending`` (its body carries the
        cursor) and those ``delivered`` since: every matching event up to it was delivered or
        given up on. ``start``: how many of the oldest are known to be among ``delivered``
        (not looked at again)."""
        events = self.events
        for index in range(start, len(events)):
            seq, event_id = events[index]
            if event_id != sending and event_id not in delivered:
                return seq - 1
        # Each one read is done; those not read come after the last one read.
        return self.last_seq if self.complete else self.events[-1][0]


@dataclass(frozen=True)
class OneClaim:
    """One claim of one delivery: its endpoint and event, and the latest it runs out (a claim
    of the same delivery made later runs out after it)."""

    endpoint_id: str
    event_id: str
    runs_out_by: int


@dataclass(frozen=True)
class Delivery:
    """One event to one endpoint: how many tries so far, and when the next one is due."""

    endpoint_id: str
    event_id: str
    attempts: int
    next_at: int
    state: str
    last_error: str | None = None

    def to_json(self) -> answers.EndpointDelivery:
        waiting = self.state == "waiting"
        return {
            "endpoint": self.endpoint_id,
            "state": self.state,
            "tries": self.attempts,
            "next_attempt_at": iso_ms(self.next_at) if waiting else None,
            "last_error": self.last_error,
        }


@dataclass(frozen=True)
class Finished:
    """What came of one attempt at a delivery, for ``Store.finish_deliveries``."""

    delivery: Delivery
    attempt: Attempt
    next_at: int | None
    """When to try again; None: no more tries (the delivery is done if it succeeded, else dead)."""
    event_status: str | None
    """What the event becomes if it is still open (delivered or sent); None: unchanged."""
    endpoint_ok: bool
    disable_reason: str | None = None
    """Disable the endpoint for good (410 Gone, a forbidden address)."""
    disable_failing_since: int | None = None
    """Disable the endpoint if it has been failing since before this time."""
    subscription: bool = False
    """An MCP Events webhook subscription's attempt: counted in its rolling window."""
    held_until: int | None = None
    """The receiver asked herald to wait (``Retry-After``) until then."""

    @property
    def state(self) -> str:
        if self.next_at is not None:
            return "waiting"
        return "done" if self.endpoint_ok else "dead"
