"""What a publisher sends: one event (``POST /v1/events`` with an object, ``Hub.publish``) or a
batch of them (with an array), checked in one call however long the batch. An event's ``to`` is
one handle or a list of them: the event is stored once for each, in the list's order."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from itertools import chain
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, TypeAdapter, ValidationError
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import to_json

from herald import json_input
from herald.errors import InvalidInput, TooLarge
from herald.inputs.fields import (
    DEPTH_CHECKED,
    DedupeKey,
    Delay,
    DeliverAt,
    EventData,
    EventPriority,
    EventType,
    Form,
    Handle,
    Text,
    Ttl,
)
from herald.inputs.refusals import Input, Says, checked, refuse
from herald.inputs.topics import TopicName
from herald.models import NewEvent, Priority
from herald.validation import MAX_BATCH, MAX_DEDUPE_KEY, MAX_DEPTH, MAX_EVENT_BYTES

assert MAX_DEPTH + 2 <= json_input.MAX_DEPTH, "data within its depth is within the body's"


Handles = Annotated[list[Handle], Field(min_length=1, max_length=MAX_BATCH)]
Lists = Mapping[int, Sequence[str]]
"""The handles of each event of a publish whose ``to`` is a list, by the event's index: the event
is stored once for each handle, in order (``spread``). An event not in it is for its ``to``."""


class EventInput(Input):
    """One event to publish."""

    where: ClassVar[str] = "event"
    shape: ClassVar[str] = "a JSON object with to, type and text"

    to: Annotated[
        Handle | Handles,
        Field(
            description=(
                "the handle of the agent the event is for, or a list of up to 1,000 handles,"
                " each given once: the event is stored once for each agent, in the list's order"
            )
        ),
        Says(
            "must be an agent handle matching [a-z0-9_-]{1,64}, or a list of 1-1000 of them"
            " (each once)"
        ),
    ]
    type: EventType
    text: Annotated[Text, Field(description="a one-line summary that every client can show")]
    data: EventData | None = None
    dedupe_key: DedupeKey | None = None
    ttl_s: Ttl | None = None
    deliver_at: DeliverAt | None = None
    delay_s: Delay | None = None
    reply: Annotated[Form | None, Field(description="a form schema: the answer it asks for")] = None
    priority: EventPriority = Priority.NORMAL
    sender: Annotated[
        Handle | None,
        Field(alias="from", description="the agent that gets the replies"),
        Says("must be the handle of the agent that gets the replies (a-z, 0-9, _ -)"),
    ] = None


class _OneAddressee(EventInput):
    """An event for one agent: what the one pass (``read_publish``) takes, and what herald's own
    callers (``parse_new_event``) build. An event for a list is taken by the full checks."""

    to: Annotated[Handle, Field(description="the handle of the agent the event is for")]


class PublishQuery(Input):
    """``POST /v1/events``'s query parameters: ``dry_run=true`` checks the events as a publish
    would and stores nothing."""

    where: ClassVar[str] = "query"
    item: ClassVar[str] = "parameter"

    dry_run: Annotated[Literal["true", "false"], Says("must be true or false")] = "false"


def _storable(event: _OneAddressee) -> NewEvent:
    """The checked event as the store takes it, once it is shown to be what every backend can
    store and every client read back: JSON text, no NUL, at most 256 KiB in all. (Done here, not
    in a validator of the model, so that the JSON made for the check is kept: private attributes
    would cost more than the rest of the checks.)"""
    return _new_event(event, event.to)


def _storable_listed(event: EventInput) -> tuple[NewEvent, list[str] | None]:
    """``_storable`` of an event whose ``to`` may be a list: the event (for the list's first
    handle) and the list. Each copy stores one handle: the longest is the one measured."""
    if isinstance(event.to, str):
        return _new_event(event, event.to), None
    seen: set[str] = set()
    for handle in event.to:
        if handle in seen:
            raise refuse(
                f".to holds {handle!r} more than once; name each agent once (it gets one event)"
            )
        seen.add(handle)
    new = _new_event(event, max(event.to, key=len))
    return replace(new, to=event.to[0]), event.to


def _new_event(event: EventInput, to: str) -> NewEvent:
    if event.deliver_at is not None and event.delay_s is not None:
        raise refuse(
            ": give deliver_at (a time) or delay_s (seconds from now) to schedule it, not both"
        )
    data_json = (
        "null" if event.data is None else _json(event.data, " holds what JSON text cannot carry")
    )
    reply_json = None
    if event.reply is not None:
        reply_json = _json(
            event.reply,
            ".reply holds what JSON text cannot carry (NaN, Infinity or an unpaired surrogate)",
        )
    # PostgreSQL refuses NUL in text and JSONB.
    if (
        "\x00" in event.text
        or "\x00" in (event.dedupe_key or "")
        or "\\u0000" in data_json
        or "\x00" in data_json
    ):
        raise refuse(" holds a NUL character (U+0000), which herald does not store")
    # Everything the event stores counts: a form or a key is held in memory as much as data.
    parts = (
        to,
        event.type,
        event.text,
        data_json,
        reply_json,
        event.dedupe_key,
        event.sender,
    )
    try:
        size = sum(len(part.encode()) for part in parts if part is not None)
    except UnicodeEncodeError as exc:
        raise refuse(f" holds what JSON text cannot carry: {exc}") from exc
    if size > MAX_EVENT_BYTES:
        raise refuse(
            f" is {size} bytes (text, data, reply form and the rest together); the limit"
            f" is {MAX_EVENT_BYTES} (256 KiB)",
            too_large=True,
        )
    return NewEvent(
        to,
        event.type,
        event.text,
        event.data,
        event.dedupe_key,
        event.ttl_s,
        data_json,
        reply_json,
        sender=event.sender,
        deliver_at=None if event.deliver_at is None else round(event.deliver_at.timestamp() * 1000),
        delay_s=event.delay_s,
        priority=event.priority,
    )


class TopicEventInput(EventInput):
    """One event to publish to a topic: stored once for each agent subscribed to it."""

    shape: ClassVar[str] = "a JSON object with topic, type and text"

    # The topic's subscribers are its addressees: to is no field of it (parse_topic_event
    # refuses a body with both). A narrower type than EventInput's, on purpose.
    to: Annotated[
        SkipJsonSchema[None],
        Field(exclude=True),
        Says("is not taken with topic: send to or topic, not both"),
    ] = None  # type: ignore[assignment]
    topic: Annotated[
        TopicName,
        Field(
            description=(
                "a declared topic: the event is stored once for each agent subscribed to it"
                " at that moment (instead of to)"
            )
        ),
    ]


PublishInput = (
    EventInput
    | TopicEventInput
    | Annotated[list[EventInput], Field(min_length=1, max_length=MAX_BATCH)]
)
"""What ``POST /v1/events`` takes: one event, or a batch (checked by ``parse_publish``), or one
event to a topic (``parse_topic_event``)."""


def is_topic_publish(raw: Any) -> bool:
    """Whether a publish body (JSON, parsed) is one event to a topic."""
    return isinstance(raw, dict) and "topic" in raw


def parse_topic_event(raw: dict[str, Any]) -> tuple[str, NewEvent]:
    """Check one event to a topic: the topic's name, and the event (its ``to`` left empty: each
    subscriber's handle is set as it is stored).

    Raises:
        InvalidInput: ``to`` is given too (a publish names agents or a topic, not both), or a
            field is missing, unknown or malformed; the message names it.
        TooLarge: the event is over 256 KiB.
    """
    if "to" in raw:
        raise InvalidInput(
            "event has both to and topic: send to (agents' handles) or topic (its subscribers),"
            " not both"
        )
    event = checked(_TOPIC_ONE, TopicEventInput, raw, "event")
    topic: str = raw["topic"]
    return topic, event


_STORABLE: Any = Annotated[_OneAddressee, AfterValidator(_storable)]
"""An event for one agent checked whole, made a ``NewEvent``."""
_ONE: TypeAdapter[NewEvent] = TypeAdapter(_STORABLE)
_BATCH: TypeAdapter[list[NewEvent]] = TypeAdapter(list[_STORABLE])
_TOPIC_STORABLE: Any = Annotated[TopicEventInput, AfterValidator(lambda e: _new_event(e, ""))]
"""An event to a topic checked whole, made a ``NewEvent`` without its ``to``."""
_TOPIC_ONE: TypeAdapter[NewEvent] = TypeAdapter(_TOPIC_STORABLE)
_LISTED: Any = Annotated[EventInput, AfterValidator(_storable_listed)]
"""An ``EventInput`` checked whole: its ``NewEvent`` and its list of handles, if it has one."""
_LISTED_ONE: TypeAdapter[tuple[NewEvent, list[str] | None]] = TypeAdapter(_LISTED)
_LISTED_BATCH: TypeAdapter[list[tuple[NewEvent, list[str] | None]]] = TypeAdapter(list[_LISTED])


def parse_new_event(raw: Any, where: str = "event") -> NewEvent:
    """Check one event for one agent and turn it into a NewEvent.

    Raises:
        InvalidInput: a field is missing, unknown or malformed; the message names it.
        TooLarge: the event is over 256 KiB.
    """
    return checked(_ONE, _OneAddressee, raw, where)


def parse_batch(raw: list[Any]) -> list[NewEvent]:
    """Check a batch of events, each for one agent.

    Raises:
        InvalidInput: the batch is empty or one event is malformed (named by its index).
        TooLarge: more than 1,000 events, or one event over 256 KiB.
    """
    _check_length(raw)
    return checked(_BATCH, _OneAddressee, raw, "events")


def parse_publish(raw: Any) -> tuple[list[NewEvent], bool, Lists | None]:
    """Check a publish body (an object or an array, JSON already parsed), whose events' ``to``
    may be lists: its events (one for each item), whether it is a batch, and the handles of
    each event for a list (None: there is none).

    Raises:
        InvalidInput: as ``parse_new_event`` or ``parse_batch``, or a list names an agent twice.
        TooLarge: as they do, or the publish would store over 1,000 events in all.
    """
    batch = isinstance(raw, list)
    if batch:
        _check_length(raw)
        items = checked(_LISTED_BATCH, EventInput, raw, "events")
    else:
        items = [checked(_LISTED_ONE, EventInput, raw, "event")]
    events = [event for event, _ in items]
    lists = {index: handles for index, (_, handles) in enumerate(items) if handles is not None}
    if not lists:
        return events, batch, None
    if (stored := stored_count(events, lists)) > MAX_BATCH:
        raise TooLarge(
            f"a publish stores at most {MAX_BATCH} events, one for each handle of a list;"
            f" this one would store {stored}"
        )
    return events, batch, lists


def _check_length(raw: list[Any]) -> None:
    if not raw:
        raise InvalidInput("a batch must hold at least one event")
    if len(raw) > MAX_BATCH:
        raise TooLarge(f"a batch holds at most {MAX_BATCH} events; this one has {len(raw)}")


def spread(events: Sequence[NewEvent], lists: Lists | None) -> list[NewEvent]:
    """The events as stored: each of those for a list once for each of its handles, in order."""
    if lists is None:
        return list(events)
    stored: list[NewEvent] = []
    for index, event in enumerate(events):
        handles = lists.get(index)
        if handles is None:
            stored.append(event)
        else:
            stored.extend(event.for_handle(handle) for handle in handles)
    return stored


def stored_count(events: Sequence[NewEvent], lists: Lists | None) -> int:
    """How many events ``spread`` makes of ``events``."""
    if lists is None:
        return len(events)
    return len(events) - len(lists) + sum(len(handles) for handles in lists.values())


_ONE_PASS: TypeAdapter[_OneAddressee] = TypeAdapter(_OneAddressee)
_BATCH_PASS: TypeAdapter[list[_OneAddressee]] = TypeAdapter(
    Annotated[list[_OneAddressee], Field(min_length=1, max_length=MAX_BATCH)]
)
_SURE_BYTES = MAX_EVENT_BYTES // 2
"""An event's size that its fields' lengths alone show to be within the limit; a larger one is
measured by the full check (its data is spelled as ``_storable`` spells it)."""
_MOST_NAME_CHARS = 2 * 64 + 128 + MAX_DEDUPE_KEY
"""At most the characters of an event's two handles (``HANDLE_PATTERN``: 64 each), its type
(``TYPE_PATTERN``: 128) and its dedupe key together."""


def read_publish(body: bytes) -> tuple[list[NewEvent], bool] | None:
    """A publish body (its bytes, as sent) parsed and checked in one pass: its events, and
    whether it is a batch (an array). None when this pass cannot tell that the body is taken
    whole (an event for a list of handles is left to them too): the full checks
    (``json_input.loads``, then ``parse_publish``) then take it, and name its fault if it has
    one. What this pass takes, they take too, as the same events (the JSON text of their data
    may be spelled otherwise, with the same value)."""
    if json_input.unsure(body):
        return None
    batch = body.lstrip()[:1] == b"["
    try:
        if batch:
            items = _BATCH_PASS.validate_json(body, context=DEPTH_CHECKED)
        else:
            items = [_ONE_PASS.validate_json(body, context=DEPTH_CHECKED)]
    except ValidationError:
        return None
    # The parser is pydantic's: it keeps the last of a key given twice and does not bound
    # nesting or numbers as herald does, so what it made is looked at for those here, the
    # depth of the data too (the body's, which is two levels more, is then within its own).
    found = json_input.plain(
        [part for item in items for part in (item.data, item.reply) if part is not None],
        MAX_DEPTH,
        long_ints=len(body) > json_input.SHORTEST_LONG_INT,
    )
    if found is None:
        return None
    keys, strings = found
    keys += sum(len(item.model_fields_set) for item in items)
    if not json_input.keys_once(body, keys, chain(strings, _field_strings(items))):
        return None
    events = []
    for item in items:
        event = _sure_storable(item)
        if event is None:
            return None
        events.append(event)
    return events, batch


def _field_strings(items: list[_OneAddressee]) -> Iterator[str]:
    for item in items:
        yield from (item.to, item.type, item.text)
        if item.dedupe_key is not None:
            yield item.dedupe_key
        if item.sender is not None:
            yield item.sender


def _sure_storable(event: _OneAddressee) -> NewEvent | None:
    """``_storable`` for an event whose strings are known to hold no NUL and to be Unicode (its
    body passed ``json_input.unsure``); None if its size is not surely within the limit."""
    if event.deliver_at is not None or event.delay_s is not None:
        return None  # a schedule is checked by the full checks (both given is refused there)
    data_json = b"null" if event.data is None else to_json(event.data)
    reply_json = None if event.reply is None else to_json(event.reply)
    # At most 4 bytes a character in UTF-8.
    most = len(data_json) + len(reply_json or b"") + 4 * (len(event.text) + _MOST_NAME_CHARS)
    if most > _SURE_BYTES:
        return None
    return NewEvent(  # in order: a keyword costs a tenth of the rest of this function
        event.to,
        event.type,
        event.text,
        event.data,
        event.dedupe_key,
        event.ttl_s,
        data_json.decode(),
        None if reply_json is None else reply_json.decode(),
        event.sender,
        None,
        None,
        None,
        event.priority,
    )


def _json(value: Any, refusal: str) -> str:
    try:
        text = _COMPACT_FINITE.encode(value)
        text.encode()
    except (ValueError, UnicodeEncodeError) as exc:
        raise refuse(f"{refusal}: {exc}") from exc
    return text


# Made once: json.dumps makes an encoder at each call given any option (a third of its time here).
_COMPACT_FINITE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class CheckedBatches:
    """The batch bodies a dry run found well formed lately (their SHA-256), so that a publish of
    the very same bytes, as ``herald send --file`` sends after checking its file, is not checked
    field by field a second time: what a body's fields are, and whether they pass, is a function
    of its bytes alone. What depends on the hub (the key's scope, payload schemas, addressees)
    is checked again at every publish. The most recent ``most`` bodies are remembered (32 bytes
    each); a publish of one forgotten is checked in full, as any other."""

    def __init__(self, most: int = 4096) -> None:
        self._most = most
        self._digests: OrderedDict[bytes, None] = OrderedDict()

    def remember(self, body: bytes) -> None:
        """``body`` parsed as a batch (``parse_batch``) without a refusal."""
        digest = hashlib.sha256(body).digest()
        self._digests[digest] = None
        self._digests.move_to_end(digest)
        while len(self._digests) > self._most:
            self._digests.popitem(last=False)

    def parsed(self, body: bytes) -> list[NewEvent] | None:
        """The events of ``body`` if it is a batch remembered, as ``parse_batch`` made them;
        None otherwise (check it in full)."""
        if not self._digests or hashlib.sha256(body).digest() not in self._digests:
            return None
        return [_well_formed(item) for item in json.loads(body.decode("utf-8-sig"))]


def _well_formed(item: dict[str, Any]) -> NewEvent:
    """The event of an item of a batch that passed ``parse_batch``: its fields as given (strict
    checks convert none), its data and form as the one pass (``read_publish``) writes them."""
    data, reply = item.get("data"), item.get("reply")
    return NewEvent(
        item["to"],
        item["type"],
        item["text"],
        data,
        item.get("dedupe_key"),
        item.get("ttl_s"),
        "null" if data is None else to_json(data).decode(),
        None if reply is None else to_json(reply).decode(),
        item.get("from"),
        priority=Priority(item.get("priority", Priority.NORMAL)),
    )
