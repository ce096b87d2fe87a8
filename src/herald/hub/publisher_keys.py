"""Publisher keys: what an application publishes with, so that it never holds the admin key.
Each request's key is looked up by its hash in the store, never remembered: a key revoked by
any process stops at once in every one."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Sequence

from herald.errors import Forbidden, NotFound
from herald.ids import is_id, new_id
from herald.inputs.events import Lists
from herald.inputs.keys import PUBLISH, NewPublisherKeyInput
from herald.keys import PUBLISHER_PREFIX, hash_key, new_key
from herald.models import Event, NewEvent, PublisherKey
from herald.store import Store

KEY_ID_PREFIX = "key_"


class PublisherKeyBook:
    """The publisher-key part of the hub (``hub.publisher_keys``). Ids that cannot name a key
    are answered without asking the store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def create(self, spec: NewPublisherKeyInput) -> tuple[PublisherKey, str]:
        """Make a publisher key; returns it with the key itself, which is kept only hashed:
        show it once."""
        key = new_key(PUBLISHER_PREFIX)
        created = PublisherKey(
            new_id(KEY_ID_PREFIX),
            spec.name,
            hash_key(key),
            json.dumps(list(dict.fromkeys(spec.scopes))),
            None if spec.handles is None else json.dumps(list(dict.fromkeys(spec.handles))),
            None if spec.types is None else json.dumps(list(dict.fromkeys(spec.types))),
            self._store.now(),
            json.dumps(list(dict.fromkeys(spec.senders))),
            None if spec.topics is None else json.dumps(list(dict.fromkeys(spec.topics))),
        )
        await self._store.create_publisher_key(created)
        return created, key

    async def list(self) -> list[PublisherKey]:
        """Every publisher key, oldest first."""
        return await self._store.list_publisher_keys()

    async def revoke(self, key_id: str) -> None:
        """Delete a publisher key: from now on no process takes it.

        Raises:
            NotFound: no publisher key has that id.
        """
        if not is_id(key_id, KEY_ID_PREFIX) or not await self._store.delete_publisher_key(key_id):
            raise NotFound(f"no publisher key has the id {key_id!r}")

    async def for_key(self, key: str) -> PublisherKey | None:
        """The publisher key that ``key`` is, read from the store (None: it is not one, or it
        was revoked)."""
        if not key.startswith(PUBLISHER_PREFIX):
            return None
        return await self._store.publisher_key_by_hash(hash_key(key))


def check_scope(
    key: PublisherKey, events: Sequence[NewEvent], *, batch: bool, lists: Lists | None = None
) -> None:
    """Refuse the whole request unless ``key`` may publish every one of ``events`` (each for
    every handle of its list in ``lists``, if it has one).

    Raises:
        Forbidden: the key has no publish scope, is limited to topics (and lists no handles),
            or an event is for a handle, of a type or from a sender outside the key's; the
            message names the first such event (its index in a ``batch``), the handle it may
            not publish to, and what the key allows.
    """
    if PUBLISH not in key.scopes:
        raise Forbidden(f"the publisher key {key.name!r} has no publish scope")
    handles = key.handles
    if handles is None and key.topics is not None:
        raise Forbidden(
            f"the publisher key {key.name!r} publishes only to topics ({', '.join(key.topics)}):"
            ' send {"topic": ...} instead of to; nothing was published'
        )
    allowed_handles = None if handles is None else frozenset(handles)
    for index, event in enumerate(events):
        if allowed_handles is None:
            outside = None
        elif lists is not None and (listed := lists.get(index)) is not None:
            outside = next((h for h in listed if h not in allowed_handles), None)
        else:
            outside = None if event.to in allowed_handles else event.to
        refused = f"is for the agent {outside!r}" if outside is not None else _outside(key, event)
        if refused is None:
            continue
        where = f"events[{index}]" if batch else "event"
        raise Forbidden(
            f"{where} {refused}, which the publisher key {key.name!r} may not publish: it"
            f" {_allowance(key)}; nothing was published"
        )


def check_topic_scope(key: PublisherKey, topic: str, event: NewEvent) -> None:
    """Refuse a publish to ``topic`` unless ``key`` may make it: a key that lists topics, to
    one of them; one that lists handles but no topics, to none (a topic reaches agents the key
    does not name).

    Raises:
        Forbidden: the key has no publish scope, or the topic, the event's type or its sender
            are outside the key's; the message says what the key allows.
    """
    if PUBLISH not in key.scopes:
        raise Forbidden(f"the publisher key {key.name!r} has no publish scope")
    topics = key.topics
    if topics is None and key.handles is not None:
        refused: str | None = f"is for the topic {topic!r}"
    elif topics is not None and not _matches(topic, topics):
        refused = f"is for the topic {topic!r}"
    else:
        refused = _outside(key, event)
    if refused is not None:
        raise Forbidden(
            f"event {refused}, which the publisher key {key.name!r} may not publish: it"
            f" {_allowance(key)}; nothing was published"
        )


def check_cancel_scope(key: PublisherKey, event: Event, handle: str) -> None:
    """Refuse to cancel (or recall) ``event``, for the agent ``handle``, unless ``key`` may
    publish it: to that agent (a key that lists handles, and names it; one that lists neither
    handles nor topics), or to the topic it was published to (``Event.topic``: a key that lists
    topics, one of which matches it), of a type and naming a sender the key allows.

    Raises:
        Forbidden: the key has no publish scope, or may not publish such an event; the message
            says what the key allows.
    """
    if PUBLISH not in key.scopes:
        raise Forbidden(f"the publisher key {key.name!r} has no publish scope")
    handles, topics = key.handles, key.topics
    to_any = handles is None and topics is None
    by_topic = topics is not None and event.topic is not None and _matches(event.topic, topics)
    if to_any or (handles is not None and handle in handles) or by_topic:
        refused = _outside(key, event)
    elif topics is not None and event.topic is not None:
        refused = f"was published to the topic {event.topic!r}"
    else:
        refused = f"is for the agent {handle!r}"
        if topics is not None:
            refused += ", published to it directly, not to a topic"
    if refused is not None:
        raise Forbidden(
            f"event {event.id!r} {refused}, which the publisher key {key.name!r} may not"
            f" publish, so it may not cancel it: it {_allowance(key)}; nothing was cancelled"
        )


def _outside(key: PublisherKey, event: NewEvent | Event) -> str | None:
    """What of ``event`` (its type, its sender) the key may not publish; None: nothing."""
    types = key.types
    if types is not None and not _matches(event.type, types):
        return f"has the type {event.type!r}"
    if event.sender is not None and not _matches(event.sender, key.senders):
        return f"names {event.sender!r} as its sender (from)"
    return None


def _matches(value: str, globs: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(value, glob) for glob in globs)


def _allowance(key: PublisherKey) -> str:
    """What the key may publish. (A key that lists handles but no topics publishes to no topic:
    its refusal says "is for the topic ...".)"""
    handles, types, senders, topics = key.handles, key.types, key.senders, key.topics
    if handles is not None:
        to = "the agents " + ", ".join(handles)
    else:
        to = "any agent" if topics is None else "no agent directly"
    if topics is not None:
        to += " and the topics matching " + ", ".join(topics)
    of = "any type" if types is None else "types matching " + ", ".join(types)
    named = "no sender" if not senders else "senders matching " + ", ".join(senders)
    return f"publishes to {to}, events of {of}, naming {named} in from"
