"""The hub: what herald does, however it is reached (HTTP, MCP, the bridge).

It owns the store and the keys, and gives each operation its rules: publish answers only after
commit, an agent reads and acknowledges only its own events, a drain with a cursor is at least
once and one without is at most once.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, TypeVar, overload

from herald import cursors
from herald.capabilities import parse_overrides
from herald.config import DEFAULTS
from herald.errors import (
    Conflict,
    InvalidInput,
    LoopGuardTripped,
    NoSuchHandle,
    NoSuchTopic,
    NotFound,
    StoreUnavailable,
)
from herald.feed import LoopGuardTrip
from herald.hub.admin_key import ADMIN_KEY_SETTING, AdminKey
from herald.hub.catalogue import Catalogue
from herald.hub.endpoints import AnyEndpoints, EndpointBook
from herald.hub.feed import Feed
from herald.hub.key_watch import KeyWatch
from herald.hub.overview import Overview
from herald.hub.preferences import PreferenceBook
from herald.hub.presence import Presence
from herald.hub.publisher_keys import PublisherKeyBook, check_cancel_scope
from herald.hub.pushes import PushRecorder
from herald.hub.schedules import DUE_BATCH, DUE_INTERVAL_S, timed
from herald.hub.subscriptions import AGENT_DELETED, SubscriptionBook
from herald.hub.topics import TopicBook
from herald.ids import is_id, new_id
from herald.inputs.agents import KeyRotationInput
from herald.inputs.channel import PermissionInput, permission_request
from herald.inputs.events import (
    Lists,
    parse_new_event,
    parse_publish,
    parse_topic_event,
    spread,
)
from herald.inputs.keyword_event import quick_new_event
from herald.inputs.listing import DEFAULT_PAGE, page_cursor
from herald.inputs.refusals import parse
from herald.keys import AGENT_PREFIX, hash_key, new_key
from herald.loop_guard import GuardedSend, LoopLimits
from herald.metrics import Metrics
from herald.models import (
    EVERY_EVENT,
    Acknowledged,
    Agent,
    Attempt,
    Drained,
    Event,
    EventMatch,
    EventStatus,
    History,
    Hold,
    NewEvent,
    Preferences,
    Published,
    PublisherKey,
    Reply,
    StartPosition,
    is_scheduled,
)
from herald.overview import EventQuery
from herald.push_windows import hold_for, summary
from herald.reserved import refuse_reserved_type, refuse_reserved_types
from herald.store import Store, copy_sqlite_store, store_exists, store_from_url
from herald.store.rules import ACK, DELIVERED, LEASED
from herald.tasks import running
from herald.times import Clock
from herald.validation import HANDLE_PATTERN, check_form_answer

log = logging.getLogger("herald")
T = TypeVar("T")
DEFAULT_LOOP_LIMITS = LoopLimits.of(DEFAULTS.hub)

SIGNING_KEY_SETTING = "signing_key"
HEARTBEAT = "heartbeat"
"""The way a drain is recorded under: ``POST /channel/heartbeat``'s."""
ACK_HELP = "send the cursor herald gave with the event (a notification's cursor, a stream id)"
"""What a refused ``ack`` cursor is told to send instead."""
DEFAULT_CONSUMER = "default"
KEY_CACHE_MS = 1_000
KEY_CACHE_SIZE = 10_000
READY_TIMEOUT_S = 3.0
SUBSCRIBERS_READ_AT_MOST = 3
"""A scheduled topic publish reads the subscribers again if one is deleted before its copies
are stored, this many times at most."""


class Hub:
    """herald's operations over one store.

    Args:
        store: an unopened or opened store; ``open()`` opens it.
        lease_s: how long a drained event stays reserved for its consumer before it is offered
            again (at least once).
        retention_s: how long delivered and expired events are kept before pruning.
        maintenance_interval_s: how often ``run_maintenance`` expires and prunes.
        payload_check_s: the longest one publish's payload schema checks may take.
        scan_events: the most events one narrowed read looks at (``HubConfig.scan_events``).
        max_deliveries: how many times an event is handed out unacknowledged before it becomes
            dead (``HubConfig.max_deliveries``; 0: no limit).

    What it does is counted in ``metrics`` (``herald.metrics``), a registry of the hub's own:
    two hubs in one process never mix their counts.
    """

    def __init__(
        self,
        store: Store,
        *,
        lease_s: float = DEFAULTS.hub.lease_s,
        retention_s: float = DEFAULTS.hub.retention_s,
        maintenance_interval_s: float = DEFAULTS.hub.maintenance_interval_s,
        payload_check_s: float = DEFAULTS.hub.payload_check_s,
        scan_events: int = DEFAULTS.hub.scan_events,
        max_deliveries: int = DEFAULTS.hub.max_deliveries,
        loop_limits: LoopLimits = DEFAULT_LOOP_LIMITS,
    ) -> None:
        self._store = store
        self.loop_limits = loop_limits
        """The serve-wide loop guard limits (``herald.loop_guard``); an agent may have its own."""
        store.max_deliveries = max_deliveries
        self.metrics = Metrics()
        store.on_acknowledged = self._count_acknowledged
        # Told by the store as each commit of new events is made, before their publishes are
        # answered: the events' pushes and streams do not wait behind those answers.
        store.on_appended = self._committed
        any_endpoints = AnyEndpoints(store)
        self.endpoints = EndpointBook(
            store, any_endpoints, on_enabled=lambda agent_id: self._announce({agent_id})
        )
        self.overview = Overview(store, scan_events)
        self.presence = Presence(store)
        self.preferences = PreferenceBook(store)
        self.subscriptions = SubscriptionBook(store, any_endpoints)
        self.event_types = Catalogue(store, check_timeout_s=payload_check_s)
        self.key_watch = KeyWatch(store)
        self.publisher_keys = PublisherKeyBook(store)
        self.topics = TopicBook(store)
        self.feed = Feed(store)
        self.pushes = PushRecorder(self._record_pushes)
        """Records what streams push, in the background (``hub.pushes``)."""
        self.lease_ms = int(lease_s * 1000)
        self.retention_ms = int(retention_s * 1000)
        self.maintenance_interval_s = maintenance_interval_s
        self.scan_events = scan_events
        self._admin_key = AdminKey(store)
        self._listeners: list[Callable[[set[str]], None]] = []
        self._commit_listeners: list[Callable[[list[Event]], None]] = []
        self._inbox_listeners: list[Callable[[set[str]], None]] = []
        self._signing_key: bytes | None = None
        self._known_keys: dict[str, tuple[Agent, int]] = {}
        self._reply_handlers: list[Callable[[Event, Reply], Awaitable[None]]] = []
        self._history: str | None = None
        self._next_due: int | None = None
        """When this process's store has an event due next (None: none), as far as it knows:
        read at the first look and after each release, moved by this process's schedules.
        Only a store this process serves alone (SQLite) is known so; a shared one is read at
        every look."""
        self._next_due_known = False
        self._next_window: int | None = None
        """When this process's store has a quiet hours or digest window end next (None: none),
        as far as it knows (as ``_next_due``)."""
        self._next_window_known = False
        # Another process's publish (heard on PostgreSQL) journaled it: the feed looks again.
        self.add_listener(lambda _agents: self.feed.wake())

    @property
    def store(self) -> Store:
        """The store itself, for tests and tools that inspect it; the code of herald reaches it
        only through the hub, whose rules a direct call skips."""
        return self._store

    @property
    def clock(self) -> Clock:
        return self._store.clock

    def now(self) -> int:
        """Milliseconds since the epoch by the store's clock: the time every record is kept in."""
        return self._store.now()

    @classmethod
    def from_url(cls, url: str, *, clock: Clock = time.time, **options: Any) -> Hub:
        return cls(store_from_url(url, clock=clock), **options)

    @staticmethod
    async def store_exists(url: str) -> bool:
        """Whether the store ``url`` names was made: an operator's command that must not make
        one asks first (``herald.store.store_exists``).

        Raises:
            InvalidInput: the URL is malformed.
            StoreUnavailable: the PostgreSQL database cannot be reached.
        """
        return await store_exists(url)

    @staticmethod
    def copy_sqlite_store(source: str, destination: str) -> int:
        """Copy the SQLite store file ``source`` (which a herald may be serving) as of one
        snapshot into the new file ``destination``, as a history of its own, and check the copy
        (``herald.store.copy_sqlite_store``). Returns how many events the copy holds.

        Raises:
            HeraldError: ``source`` is missing or not a herald store, or the copy cannot be
                written or fails its check.
        """
        return copy_sqlite_store(source, destination)

    async def open(self) -> None:
        await self._store.open()
        await self._store.listen(
            self._announce,
            self.event_types.heard,
            on_subscription_deleted=self.subscriptions.deleted,
            on_inbox=self._inbox_changed,
        )
        await self.event_types.open()

    async def close(self) -> None:
        await self.pushes.written()
        await self.key_watch.close()
        await self.event_types.close()
        await self._store.close()

    async def check_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Read from the store, as every request does, within ``timeout_s``.

        Raises:
            StoreUnavailable: the store failed or did not answer in time.
        """
        try:
            async with asyncio.timeout(timeout_s):
                await self._store.get_setting(ADMIN_KEY_SETTING)
        except TimeoutError as exc:
            raise StoreUnavailable(f"the store did not answer within {timeout_s:g} s") from exc

    async def __aenter__(self) -> Hub:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # Keys

    async def setup_admin_key(self, given: str | None = None) -> str | None:
        """Settle the admin key: ``given`` (from HERALD_ADMIN_KEY) if set, which replaces the
        stored one; else the one stored; else a new one. Returns the key only when it was
        generated now, to be shown once.

        Raises:
            InvalidInput: ``given`` is under 32 characters or not all visible ASCII.
        """
        return await self._admin_key.setup(given)

    async def rotate_admin_key(self) -> str:
        """A new admin key, replacing the stored one for good: every process sharing the store
        stops taking the old one within a second. Returned to be shown once."""
        return await self._admin_key.rotate()

    async def signing_key(self) -> bytes:
        """A random key kept in the store, the same in every process that shares it: it signs
        what herald hands a client only to be given back (an MCP ``requestState``), so that a
        retry may reach any process. Made by the first process that needs it."""
        if self._signing_key is None:
            stored = await self._store.set_setting_if_absent(
                SIGNING_KEY_SETTING, secrets.token_hex(32)
            )
            self._signing_key = bytes.fromhex(stored)
        return self._signing_key

    async def is_admin_key(self, key: str) -> bool:
        """Whether ``key`` is the admin key as the store has it (a copy at most a second old).

        Raises:
            StoreUnavailable: the copy was due to be read again and the store failed.
        """
        return await self._admin_key.accepts(key)

    async def agent_for_key(self, key: str) -> Agent | None:
        """The agent a key belongs to. Known keys are remembered for a second by the store's
        clock: every request carries one, and a round trip to the store each time would cost
        more than the request. (Deleting an agent or rotating its key here forgets its key at
        once; in another process, within a second.) A key replaced by a rotation with a grace
        is not remembered: each use asks the store, so that it stops when its grace ends."""
        if not key.startswith(AGENT_PREFIX):
            return None
        key_hash = hash_key(key)
        now = self.now()
        cached = self._known_keys.get(key_hash)
        # A clock set back ends what was remembered too, or it could be kept for good.
        if cached is not None and cached[1] <= now < cached[1] + KEY_CACHE_MS:
            return cached[0]
        agent = await self._store.agent_by_key_hash(key_hash)
        if agent is not None and agent.key_hash == key_hash:
            if len(self._known_keys) >= KEY_CACHE_SIZE:
                self._known_keys.clear()
            self._known_keys[key_hash] = (agent, now)
        return agent

    # Agents

    async def create_agent(
        self, handle: str, *, delivery: dict[str, Any] | None = None
    ) -> tuple[Agent, str]:
        """Create an agent; returns it with its API key, which is kept only hashed: show it once.
        Its webhook is one of its endpoints (``herald.webhooks.manage.set_webhook``).

        Raises:
            InvalidInput: the handle or the delivery overrides are malformed.
            Conflict: the handle is taken.
        """
        if not isinstance(handle, str) or not HANDLE_PATTERN.fullmatch(handle):
            raise InvalidInput("handle must be 1-64 characters of a-z, 0-9, _ and -")
        delivery_json = parse_overrides(delivery) if delivery is not None else "{}"
        key = new_key(AGENT_PREFIX)
        agent = Agent(
            new_id("agt_"), handle, hash_key(key), self._store.now(), delivery_json=delivery_json
        )
        await self._store.create_agent(agent)
        return agent, key

    async def rotate_agent_key(
        self, id_or_handle: str, grace_s: float = 0
    ) -> tuple[Agent, str, int | None]:
        """A new key for the agent, kept only hashed: show it once. The key it replaces keeps
        working for ``grace_s`` (0: it stops at once; at most 7 days) in every process sharing
        the store; a key replaced by an earlier rotation stops now. Returns the agent, the key,
        and until when the replaced key works (ms since the epoch; None: it stopped).

        Raises:
            InvalidInput: ``grace_s`` is not a number of seconds from 0 to 7 days.
            NotFound: no agent has that id or handle.
        """
        grace_ms = int(parse(KeyRotationInput, {"grace_s": grace_s}).grace_s * 1000)
        agent = await self.agent_by_id_or_handle(id_or_handle)
        key = new_key(AGENT_PREFIX)
        previous_until = self.now() + grace_ms if grace_ms > 0 else None
        if not await self._store.rotate_agent_key(agent.id, hash_key(key), previous_until):
            raise NotFound(f"no agent has the id {agent.id!r}")
        self._known_keys.clear()
        try:  # this process's streams on a key that stopped end before the answer
            await self.key_watch.check()
        except StoreUnavailable:
            self.key_watch.check_soon()
        return await self.get_agent(agent.id), key, previous_until

    async def list_agents(self) -> list[Agent]:
        return await self._store.list_agents()

    async def get_agent(self, agent_id: str) -> Agent:
        """Raises: NotFound."""
        agent = await self._store.get_agent(agent_id) if is_id(agent_id, "agt_") else None
        if agent is None:
            raise NotFound(f"no agent has the id {agent_id!r}")
        return agent

    async def agent_by_id_or_handle(self, value: str) -> Agent:
        """The agent with that id or, failing that, that handle (an id is never a handle: ids
        are upper case).

        Raises:
            NotFound: no agent has either.
        """
        agent = await self._store.get_agent(value) if is_id(value, "agt_") else None
        if agent is None and HANDLE_PATTERN.fullmatch(value):
            agent = await self._store.agent_by_handle(value)
        if agent is None:
            raise NotFound(f"no agent has the id or handle {value!r}")
        return agent

    async def set_delivery(self, agent_id: str, delivery: Any) -> Agent:
        """Replace an agent's delivery overrides; they apply to sessions that connect after.

        Raises:
            InvalidInput: an unknown key or a wrong type.
            NotFound: no such agent.
        """
        overrides = parse_overrides(delivery)
        if not is_id(agent_id, "agt_") or not await self._store.set_agent_delivery(
            agent_id, overrides
        ):
            raise NotFound(f"no agent has the id {agent_id!r}")
        self._known_keys.clear()
        return await self.get_agent(agent_id)

    async def delete_agent(self, agent_id: str) -> None:
        """Delete an agent and every event it has; its open streams end, and its webhook
        subscriptions with it (their endpoints are told). Raises: NotFound."""
        self._known_keys.clear()
        subscribed = await self.subscriptions.of_agent(agent_id) if is_id(agent_id, "agt_") else []
        if not is_id(agent_id, "agt_") or not await self._store.delete_agent(agent_id):
            raise NotFound(f"no agent has the id {agent_id!r}")
        self.endpoints.known.maybe_none_left()  # its endpoints went with it
        self._announce({agent_id})  # what follows the agent's events finds it gone
        self.subscriptions.ended(subscribed, AGENT_DELETED)

    # Events

    @overload
    async def publish(
        self,
        to: str,
        type: str,
        text: str,
        *,
        data: dict[str, Any] | list[Any] | None = None,
        dedupe_key: str | None = None,
        ttl_s: float | None = None,
        reply: dict[str, Any] | None = None,
        sender: str | None = None,
        deliver_at: datetime.datetime | str | None = None,
        delay_s: float | None = None,
        priority: str | None = None,
    ) -> Published: ...

    @overload
    async def publish(
        self,
        to: list[str],
        type: str,
        text: str,
        *,
        data: dict[str, Any] | list[Any] | None = None,
        dedupe_key: str | None = None,
        ttl_s: float | None = None,
        reply: dict[str, Any] | None = None,
        sender: str | None = None,
        deliver_at: datetime.datetime | str | None = None,
        delay_s: float | None = None,
        priority: str | None = None,
    ) -> list[Published]: ...

    async def publish(
        self,
        to: str | list[str],
        type: str,
        text: str,
        *,
        data: dict[str, Any] | list[Any] | None = None,
        dedupe_key: str | None = None,
        ttl_s: float | None = None,
        reply: dict[str, Any] | None = None,
        sender: str | None = None,
        deliver_at: datetime.datetime | str | None = None,
        delay_s: float | None = None,
        priority: str | None = None,
    ) -> Published | list[Published]:
        """Store one event for the agent with handle ``to``; returns once it is committed.
        A repeated ``dedupe_key`` for the same agent returns the first event, ``created=False``.
        ``reply`` (a form schema) asks for an answer; ``sender`` names the agent (an
        application can be one) that gets the replies as ``reply.received`` events.

        ``to`` a list of up to 1,000 handles (each once) stores the event once for each agent
        in one transaction, and returns one ``Published`` for each, in the list's order; the
        ``dedupe_key`` holds for each agent on its own.

        ``deliver_at`` (an aware datetime, or RFC 3339 text with its offset) or ``delay_s`` (up
        to 30 days) schedules it: stored now as ``scheduled``, offered by no way until it is due,
        then pending like any other, its ``ttl_s`` counting from then (``cancel`` withdraws it).

        ``priority`` (``low``, ``normal`` (the default), ``high`` or ``urgent``): a low event is
        never pushed, only drained; an urgent one passes the agent's quiet hours and digests.

        Raises:
            InvalidInput: a field is malformed (TooLarge: over 256 KiB), a type only herald
                sends (``reply.received``, ``permission.request``, ``herald.*``), ``data``
                not valid against the payload schema its type declares, or a list of handles
                that names an agent twice or one that does not exist (nothing is stored), or a
                schedule refused (both ``deliver_at`` and ``delay_s``, a time past or over 30
                days ahead).
            NotFound: no agent has the handle ``to``.
        """
        if reply is None and deliver_at is None and delay_s is None and priority is None:
            quick = quick_new_event(to, type, text, data, dedupe_key, ttl_s, sender)
            if quick is not None:
                (published,) = await self.publish_many([quick])
                return published
        fields = {"to": to, "type": type, "text": text, "data": data, "reply": reply}
        options: dict[str, Any] = {"dedupe_key": dedupe_key, "ttl_s": ttl_s, "from": sender}
        if deliver_at is not None:
            options["deliver_at"] = deliver_at
        if delay_s is not None:
            options["delay_s"] = delay_s
        if priority is not None:
            options["priority"] = priority
        if isinstance(to, str):
            event = parse_new_event({**fields, **options})
            (published,) = await self.publish_many([event])
            return published
        events, _, lists = parse_publish({**fields, **options})
        return await self.publish_many(events, lists)

    async def publish_many(
        self, events: Sequence[NewEvent], lists: Lists | None = None
    ) -> list[Published]:
        """Store checked events (``herald.inputs.events``) in one transaction: all or, on error,
        none. ``lists``: the handles of each event for a list (``parse_publish``), stored once
        for each; the answer has one ``Published`` for each event stored, in order.

        Raises:
            InvalidInput: an event is of a type only herald sends (``reply.received``,
                ``permission.request``, ``herald.*``: herald makes those itself), or its data
                is not valid against the payload schema its type declares (``event_types``);
                the message names the path and the event's index. Or a list names a handle
                no agent has (the message names it). Or an event names a ``topic``: only
                ``publish_to_topic`` makes a topic's copies.
            NotFound: the addressee of an event for one agent does not exist.
        """
        refuse_reserved_types(events)
        refuse_topics(events)
        events = timed(events, self.now())
        if lists is None:
            return await self._publish(events, "event")
        await self.event_types.check(events, "event")  # once for each event, not each copy
        try:
            return await self._publish(spread(events, lists), "event", checked=True)
        except NoSuchHandle as exc:
            listed = _listing(events, lists, exc.handle)
            if listed is None:
                raise
            raise InvalidInput(
                f"{listed} names {exc.handle!r}, which no agent has (create it with POST"
                " /v1/agents, or leave it out); nothing was published"
            ) from None

    async def publish_topic(
        self,
        topic: str,
        type: str,
        text: str,
        *,
        data: dict[str, Any] | list[Any] | None = None,
        dedupe_key: str | None = None,
        ttl_s: float | None = None,
        reply: dict[str, Any] | None = None,
        sender: str | None = None,
        priority: str | None = None,
        deliver_at: datetime.datetime | str | None = None,
        delay_s: float | None = None,
    ) -> list[Published]:
        """Store one event for each agent subscribed to ``topic`` at that moment (by its name
        or a glob that matches it), in one transaction; returns one ``Published`` for each, by
        handle (none: no agent is subscribed). The ``dedupe_key`` holds for each agent on its
        own; ``priority``, ``deliver_at`` and ``delay_s`` as ``publish`` takes them (scheduled:
        each subscriber's copy is stored now, and offered once due).

        Raises:
            InvalidInput: as ``publish``, or ``topic`` is not a topic's name.
            NoSuchTopic: the operator has not declared ``topic``.
        """
        fields = {"topic": topic, "type": type, "text": text, "data": data, "reply": reply}
        options: dict[str, Any] = {"dedupe_key": dedupe_key, "ttl_s": ttl_s, "from": sender}
        if priority is not None:
            options["priority"] = priority
        if deliver_at is not None:
            options["deliver_at"] = deliver_at
        if delay_s is not None:
            options["delay_s"] = delay_s
        name, event = parse_topic_event({**fields, **options})
        return await self.publish_to_topic(name, event)

    async def publish_to_topic(self, topic: str, event: NewEvent) -> list[Published]:
        """``publish_topic`` of a checked event (``herald.inputs.events.parse_topic_event``).

        Raises:
            InvalidInput: the event's type is one only herald sends, or its data is not valid
                against its type's payload schema.
            NoSuchTopic: the operator has not declared ``topic``.
        """
        refuse_reserved_types([event])
        await self.event_types.check([event], "event")
        if is_scheduled(event):
            return await self._schedule_for_topic(topic, event)
        started = time.perf_counter()
        holds = await self._holds_of_subscribers(event)
        published = await self._store.append_to_topic(topic, event, holds)
        for hold in holds.values():  # after the commit, as ``_holds_stored``
            self._window_may_end(hold.until)
        if published is None:
            raise NoSuchTopic(topic)
        self.metrics.committed(time.perf_counter() - started)
        created = [p.event for p in published if p.created]
        self.metrics.published((e.type for e in created), self.event_types.type_classes)
        return published

    async def _schedule_for_topic(self, topic: str, event: NewEvent) -> list[Published]:
        """A topic's publish for later (``deliver_at`` or ``delay_s``): a scheduled copy for
        each agent subscribed now, naming the topic, stored in one transaction as a list's
        copies are (``publish_many``). The subscribers are read first: an agent deleted before
        the copies are stored is left out, read again."""
        event = replace(event, topic=topic)
        for _ in range(SUBSCRIBERS_READ_AT_MOST):
            subscribers = await self.topics.subscribers(topic)
            copies = [event.for_handle(h) for h in dict.fromkeys(s.handle for s in subscribers)]
            if not copies:
                return []
            try:
                return await self._publish(timed(copies, self.now()), "event", checked=True)
            except NotFound:
                continue  # a subscriber was deleted meanwhile
        raise Conflict(
            f"the subscribers of {topic!r} kept changing while its scheduled event was stored;"
            " nothing was stored: publish it again"
        )

    async def check_topic_publish(self, topic: str, event: NewEvent) -> int:
        """Check an event to a topic as ``publish_to_topic`` would, and store nothing; returns
        how many agents it would reach now.

        Raises:
            InvalidInput, NoSuchTopic: as ``publish_to_topic``.
        """
        refuse_reserved_types([event])
        await self.event_types.check([event], "event")
        return len({s.agent_id for s in await self.topics.subscribers(topic)})

    async def check_publish(self, events: Sequence[NewEvent], lists: Lists | None = None) -> None:
        """Check events (``herald.inputs.events``) as ``publish_many`` would, and store nothing:
        each one's data against its type's payload schema, and that its addressees exist.

        Raises:
            InvalidInput: as ``publish_many``. NotFound: an addressee does not exist; the
                message names the event (``events[3].to`` of several).
        """
        timed(events, self.now())
        await self.event_types.check(events, "event")
        known: dict[str, bool] = {}
        for index, event in enumerate(events):
            listed = None if lists is None else lists.get(index)
            for handle in (event.to,) if listed is None else listed:
                if handle not in known:
                    known[handle] = await self._store.agent_by_handle(handle) is not None
                if known[handle]:
                    continue
                where = f"events[{index}].to" if len(events) > 1 else "event.to"
                if listed is not None:
                    raise InvalidInput(
                        f"{where} names {handle!r}, which no agent has (create it with POST"
                        " /v1/agents, or leave it out)"
                    )
                raise NotFound(
                    f"{where}: no agent has the handle {handle!r}; create it with POST /v1/agents"
                )

    async def _publish(
        self, events: Sequence[NewEvent], where: str, *, checked: bool = False
    ) -> list[Published]:
        """``publish_many``; a refusal of the data of one event alone calls it ``where``.
        ``checked``: the events' data were checked against their payload schemas already."""
        if not checked:
            await self.event_types.check(events, where)
        started = time.perf_counter()
        if events and events[0].deliver_at is not None:  # then all are (``timed``)
            events = await self._with_holds(events)
            scheduled = await self._store.schedule(events)
            self._holds_stored(events)
            self.metrics.committed(time.perf_counter() - started)
            self._scheduled(min(e.deliver_at for e in events if e.deliver_at is not None))
            return scheduled  # counted as published when they are due
        # Read from what this process remembers: known to be nobody's, nothing more is done.
        rules = self.preferences.timed_known()
        if rules is None:
            rules = await self.preferences.timed()
        if rules:
            events = self._held(events, rules)
        published = await self._store.append(events)
        if rules:
            self._holds_stored(events)
        self.metrics.committed(time.perf_counter() - started)
        created = [p.event for p in published if p.created]
        self.metrics.published((e.type for e in created), self.event_types.type_classes)
        return published

    async def send_message(
        self,
        sender: Agent,
        to: str,
        text: str,
        data: dict[str, Any] | None = None,
        *,
        reply: dict[str, Any] | None = None,
        type: str = "message.received",
        deliver_at: datetime.datetime | str | None = None,
        delay_s: float | None = None,
        priority: str | None = None,
    ) -> Published:
        """One agent writes to another by handle; the event carries the sender's handle. With
        ``reply`` (a form schema) it asks for an answer, which comes back as a reply. With
        ``deliver_at`` or ``delay_s`` it is scheduled, as ``publish`` schedules an event;
        ``priority`` is as ``publish`` takes it (a low message is never pushed, only drained).

        Raises:
            InvalidInput: a malformed field, a type only herald sends (``reply.received``,
                ``permission.request``, ``herald.*``), or ``data`` not valid against the payload
                schema its type declares. NotFound: no agent has the handle ``to``.
        """
        refuse_reserved_type(type)
        fields: dict[str, Any] = {"to": to, "type": type, "text": text, "data": data}
        fields["reply"] = reply
        if deliver_at is not None:
            fields["deliver_at"] = deliver_at
        if delay_s is not None:
            fields["delay_s"] = delay_s
        if priority is not None:
            fields["priority"] = priority
        event = replace(parse_new_event(fields), sender=sender.handle, thread=new_id("thr_"))
        await self.event_types.check([event], "message")
        guard = self._guard(sender, event)
        if is_scheduled(event):  # counted by the guard now, published when due
            (timed_event,) = await self._with_holds(timed([event], self.now()))
            (scheduled,) = await self._guarded(guard, self._store.schedule([timed_event], guard))
            self._holds_stored([timed_event])
            assert timed_event.deliver_at is not None
            self._scheduled(timed_event.deliver_at)
            return scheduled
        started = time.perf_counter()
        (event,) = await self._with_holds([event])
        published = await self._guarded(guard, self._store.append_message(event, guard))
        self._holds_stored([event])
        self.metrics.committed(time.perf_counter() - started)
        if published.created:
            self.metrics.published([published.event.type], self.event_types.type_classes)
        return published

    def _guard(self, sender: Agent, event: NewEvent) -> GuardedSend:
        assert event.thread is not None
        return GuardedSend(sender.id, sender.handle, event.to, event.thread, self.loop_limits)

    async def _guarded(self, guard: GuardedSend | None, send: Awaitable[T]) -> T:
        """``send``, a message between agents; a loop guard that trips is shown to the operator
        (the feed, ``/metrics``, the log) before the refusal goes to the sender."""
        try:
            return await send
        except LoopGuardTripped as exc:
            assert guard is not None
            self.metrics.loop_guard_tripped(exc.limit)
            log.warning("loop guard (%s) refused a message: %s", exc.limit, exc.message)
            trip = LoopGuardTrip(
                guard.sender_id, guard.to_handle, exc.thread, exc.limit, exc.maximum
            )
            try:
                await self._store.record_loop_guard(trip)
            except StoreUnavailable:  # the refusal stands; the log and metric have it
                log.warning("the loop guard's trip could not be journaled")
            self.feed.wake()
            raise

    async def loop_limits_of(self, agent: Agent) -> LoopLimits:
        """The loop guard limits that hold for the agent's sends."""
        return await self._store.loop_limits(agent.id, self.loop_limits)

    async def set_loop_limits(
        self, agent: Agent, exchanges: int | None, window_s: int | None, per_minute: int | None
    ) -> LoopLimits:
        """Set the agent's own loop guard limits (None: the serve-wide one); the limits that
        hold for it now."""
        await self._store.set_loop_limits(agent.id, exchanges, window_s, per_minute)
        return await self.loop_limits_of(agent)

    async def ask_permission(
        self,
        sender: Agent,
        to: str,
        *,
        request_id: str,
        tool_name: str,
        description: str = "",
        input_preview: str = "",
    ) -> Published:
        """Relay a permission prompt of ``sender``'s Claude Code session to the agent ``to``: a
        ``permission.request`` event that herald builds itself (text, data, an allow/deny form),
        so that no agent can forge one. The answer comes back to ``sender`` as a reply.

        Raises:
            InvalidInput: a malformed field (``request_id`` is 5 letters a-z without l).
            NotFound: no agent has the handle ``to``.
        """
        asked = parse(
            PermissionInput,
            {
                "to": to,
                "request_id": request_id,
                "tool_name": tool_name,
                "description": description,
                "input_preview": input_preview,
            },
        )
        event = permission_request(asked)
        (published,) = await self._publish([replace(event, sender=sender.handle)], "permission")
        return published

    async def reply(
        self, agent: Agent, event_id: str, text: str, data: dict[str, Any] | None = None
    ) -> Reply:
        """Answer one of the agent's events. Routed to its sender: an agent gets a
        ``reply.received`` event; an application gets ``on_reply`` callbacks and sees the reply in
        the event's API view. Answering an event also acknowledges it.

        Raises:
            NotFound: the event is not one of the agent's own.
            InvalidInput: a malformed text or data, or data that does not fill in the event's
                reply form.
        """
        event, routed = await self._checked_reply(agent, event_id, text, data)
        if routed is not None:
            (routed,) = await self._with_holds([routed])
        data_json = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
        draft = Reply(new_id("rpl_"), event.id, agent.id, text, data_json, self._store.now())
        guard = self._guard(agent, routed) if routed is not None else None
        try:
            stored, published = await self._guarded(
                guard, self._store.add_reply(draft, routed, guard)
            )
        except NotFound:  # the sender is gone: the reply stays on the event all the same
            stored, published = await self._store.add_reply(draft, None)
        if routed is not None:
            self._holds_stored([routed])
        if await self._store.ack(agent.id, ids=[event.id]):
            self._acknowledged(agent.id)
        if published is not None:
            self._committed([published.event])
        else:
            for handler in self._reply_handlers:
                try:
                    await handler(event, stored)
                except Exception:  # a broken callback must not fail the agent's reply
                    log.exception("a reply handler failed for event %s", event.id)
        return stored

    async def check_reply(
        self, agent: Agent, event_id: str, text: str, data: dict[str, Any] | None = None
    ) -> None:
        """Refuse what ``reply`` would refuse, changing nothing: a caller with several replies
        to record checks them all first, so that one refused records none.

        Raises:
            NotFound: the event is not one of the agent's own.
            InvalidInput: as ``reply``.
        """
        await self._checked_reply(agent, event_id, text, data)

    async def _checked_reply(
        self, agent: Agent, event_id: str, text: str, data: dict[str, Any] | None
    ) -> tuple[Event, NewEvent | None]:
        """The event answered and the ``reply.received`` event its sender gets (None: no
        sender agent), once the reply is checked."""
        event, _ = await self.get_event(event_id, viewer=agent)
        form = event.reply_schema
        if data is not None and form is not None:
            check_form_answer(form, data, "reply.data")
        payload = {"event_id": event.id, "text": text, "reply": data}
        if event.sender is None:
            parse_new_event({"to": agent.handle, "type": "reply", "text": text, "data": payload})
            return event, None
        routed = parse_new_event(
            {
                "to": event.sender,
                "type": "reply.received",
                "text": f"@{agent.handle} replied: {text}",
                "data": payload,
            }
        )
        thread = event.thread or new_id("thr_")  # a reply carries the thread it answers
        return event, replace(routed, sender=agent.handle, reply_to=event.id, thread=thread)

    def on_reply(self, handler: Callable[[Event, Reply], Awaitable[None]]) -> None:
        """Call ``handler(event, reply)`` after an agent answers an application's event."""
        self._reply_handlers.append(handler)

    def add_listener(self, listener: Callable[[set[str]], None]) -> None:
        """Call ``listener(agent_ids)`` (it must not block) after events for them are committed."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[set[str]], None]) -> None:
        self._listeners.remove(listener)

    def add_commit_listener(self, listener: Callable[[list[Event]], None]) -> None:
        """Call ``listener(events)`` (it must not block) with the events this process has just
        stored, each agent's in seq order, as their commit is made (before their publishes are
        answered) and before the ``add_listener`` callbacks for them: what keeps new events in
        memory takes them as they are rather than reading them back. Other processes' events
        (PostgreSQL) are only announced, as are events that become open again."""
        self._commit_listeners.append(listener)

    def remove_commit_listener(self, listener: Callable[[list[Event]], None]) -> None:
        self._commit_listeners.remove(listener)

    def add_inbox_listener(self, listener: Callable[[set[str]], None]) -> None:
        """Call ``listener(agent_ids)`` (it must not block) after their inboxes changed: events
        committed for them (as ``add_listener``, other processes' included on PostgreSQL),
        events of theirs acknowledged in this process, and on PostgreSQL events of theirs
        closed (acknowledged, delivered, expired) or opened again by any process. Hints: the
        same change may be told twice (here, and as the store heard it)."""
        self._inbox_listeners.append(listener)

    def remove_inbox_listener(self, listener: Callable[[set[str]], None]) -> None:
        self._inbox_listeners.remove(listener)

    def _announce(self, agent_ids: set[str]) -> None:
        if agent_ids:
            for listener in self._listeners:
                listener(agent_ids)
            for listener in self._inbox_listeners:
                listener(agent_ids)

    def _committed(self, events: list[Event]) -> None:
        """New events this process stored: the commit listeners, then the wake-ups."""
        if events:
            for listener in self._commit_listeners:
                listener(events)
            self._announce({event.agent_id for event in events})

    def _acknowledged(self, agent_id: str) -> None:
        self._inbox_changed({agent_id})

    def _inbox_changed(self, agent_ids: set[str]) -> None:
        # Only the inbox listeners: what waits for new events has nothing to do on an ack.
        for listener in self._inbox_listeners:
            listener(agent_ids)

    async def inbox(self, agent: Agent, limit: int = 20, session: str = "inbox") -> list[Event]:
        """The agent's open events, oldest first, held (leased) for the reader ``session``.
        They are delivered when the reader acknowledges them (``ack(ids=...)``) once it has
        shown them: an answer that cannot be built delivers nothing, and what was held is
        offered again after the lease."""
        events = await self._store.claim(
            agent.id, f"inbox:{session}", limit, self.lease_ms, "inbox"
        )
        self._count_handed_out("inbox", events, LEASED)
        return events

    async def inbox_marks(self, agent_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
        """A mark of each agent's inbox that changes whenever the inbox does, however it
        changed (``Store.inbox_marks``): absent for an empty inbox."""
        return await self._store.inbox_marks(agent_ids) if agent_ids else {}

    async def history(self) -> str:
        """Which history of the store the positions this hub hands out belong to
        (``Store.history``). Read once: a store is restored only while no herald serves it."""
        if self._history is None:
            self._history = await self._store.history()
        return self._history

    async def missing_after(
        self,
        agent: Agent,
        cursor: int,
        through: int | None = None,
        match: EventMatch = EVERY_EVENT,
    ) -> int:
        """Events after ``cursor`` (up to ``through``, if given) the agent will never be offered:
        those that ``match`` and expired, and every one pruned."""
        return await self._store.missing_after(agent.id, cursor, through, match)

    async def unread(self, agent: Agent, older_than_s: float) -> int:
        """Open events last offered more than ``older_than_s`` ago."""
        return await self._store.count_unread(
            agent.id, self._store.now() - int(older_than_s * 1000)
        )

    async def replies(self, event_id: str) -> list[Reply]:
        return await self._store.replies(event_id)

    async def get_event(
        self, event_id: str, *, viewer: Agent | None = None
    ) -> tuple[Event, list[Attempt]]:
        """An event and its attempts. With ``viewer``, only that agent's own events are found.

        Raises:
            NotFound: no such event, or it belongs to another agent than ``viewer``.
        """
        event = await self._store.get_event(event_id) if is_id(event_id, "evt_") else None
        if event is None or (viewer is not None and not _visible_to(event, viewer)):
            raise NotFound(f"no event {event_id!r} is visible to this key")
        return event, await self._store.attempts(event_id)

    async def redeliver(self, event_id: str) -> Event:
        """Offer a delivered, expired, dead or undeliverable event again (``Store.redeliver``):
        it is pending once more (a dead one handed out as many times again before it dies), and
        its webhook and OpenClaw deliveries start a new series of
        attempts (those to a disabled endpoint once it is enabled). Its attempts stay.

        Raises:
            NotFound: no such event.
            Conflict: it is pending, and none of its deliveries was given up on.
        """
        found = await self._store.get_event(event_id) if is_id(event_id, "evt_") else None
        if found is not None and found.status in (EventStatus.SCHEDULED, EventStatus.CANCELLED):
            raise Conflict(
                f"event {event_id!r} is {found.status.value}: only an event that was offered can"
                " be offered again (a scheduled one is offered when it is due; publish a"
                " cancelled one anew)"
            )
        event = await self._store.redeliver(event_id) if found is not None else None
        if event is None:
            raise NotFound(f"no event {event_id!r}")
        self._announce({event.agent_id})  # its ways read the agent's open events again
        return event

    async def cancel(self, event_id: str, publisher: PublisherKey | None = None) -> Event:
        """Cancel a scheduled event, or recall a pending one that nothing has handed out yet
        (``Store.cancel``): it becomes ``cancelled``, kept, offered by no way, the cancel one of
        its attempts. With ``publisher``, only an event that key may publish
        (``check_cancel_scope``).

        Raises:
            NotFound: no such event.
            Forbidden: ``publisher`` may not publish it; nothing changes.
            Conflict: it was handed out, tried or finished already; the message says which.
        """
        if publisher is not None:
            await self._check_cancel_scope(event_id, publisher)
        event = await self._store.cancel(event_id) if is_id(event_id, "evt_") else None
        if event is None:
            raise NotFound(f"no event {event_id!r}")
        self._inbox_changed({event.agent_id})  # a recalled event left the inbox
        return event

    # Quiet hours and digests

    async def _timed_rules(self) -> dict[str, Preferences]:
        """Every agent's quiet hours and digests, by handle, as this process remembers them."""
        known = self.preferences.timed_known()
        return known if known is not None else await self.preferences.timed()

    async def _with_holds(self, events: Sequence[NewEvent]) -> Sequence[NewEvent]:
        """The events, each with the rule of its agent's that may hold it back from being
        pushed (``herald.push_windows``) at its time (now, or a scheduled one's due time),
        read from the rules this process remembers: no statement for a publish to agents
        without such rules. The store decides which window holds it as it stores it."""
        return self._held(events, await self._timed_rules())

    def _held(
        self, events: Sequence[NewEvent], rules: dict[str, Preferences]
    ) -> Sequence[NewEvent]:
        """``_with_holds`` with the rules read (by handle)."""
        if not rules:
            return events
        now = self.now()
        held = []
        for event in events:
            preferences = rules.get(event.to)
            at = now if event.deliver_at is None else event.deliver_at
            hold = hold_for(event, preferences, at) if preferences is not None else None
            held.append(event.with_hold(hold) if hold is not None else event)
        return held

    async def _holds_of_subscribers(self, event: NewEvent) -> dict[str, Hold]:
        """The rule that may hold a topic's ``event`` back, for each agent (by handle) that has
        one (``_with_holds``, for the copies of a topic's publish, whose agents the store reads
        as it stores them)."""
        rules = await self._timed_rules()
        now = self.now()
        holds = {}
        for handle, preferences in rules.items():
            hold = hold_for(event, preferences, now)
            if hold is not None:
                holds[handle] = hold
        return holds

    def _holds_stored(self, events: Sequence[NewEvent]) -> None:
        """Note when the windows the events (stored) may have opened end. Told after the
        commit, as ``_scheduled`` is: a look begun before it reads the window then."""
        for event in events:
            if event.hold is not None:
                self._window_may_end(event.hold.until)

    def _window_may_end(self, until: int) -> None:
        if self._next_window_known:
            self._next_window = (
                until if self._next_window is None else min(self._next_window, until)
            )

    async def _any_window_ended(self) -> bool:
        """Whether a look may find windows ended: always on a shared store; on one this process
        serves alone, only once the first known end has come (as ``_anything_due``)."""
        if self._store.shared:
            return True
        if not self._next_window_known:
            self._next_window_known, self._next_window = True, None
            found = await self._store.next_window_end()
            if found is not None:
                self._window_may_end(found)
        return self._next_window is not None and self._next_window <= self.now()

    async def release_windows(self) -> list[Event]:
        """Sum up the quiet hours and digest windows ended by now (up to ``DUE_BATCH``): for
        each that held events, one ``herald.summary`` event to its agent, saying how many and of
        which types (counted in the store, never read one by one), pushed like any event; then
        the window is forgotten. A summary's dedupe key names its window, so it is stored once,
        whichever process (or a retry after a crash) makes it. Returns the summaries stored."""
        if not await self._any_window_ended():
            return []
        self._next_window_known = False  # read again at the next look
        summaries = []
        for window in await self._store.due_windows(DUE_BATCH):
            counts = await self._store.window_counts(window.id)
            if counts:
                try:
                    (published,) = await self._store.append([summary(window, counts)])
                except NotFound:  # the agent is gone, and its windows with it
                    continue
                if published.created:
                    summaries.append(published.event)
            await self._store.close_window(window.id)
        if summaries:
            self.metrics.published((e.type for e in summaries), self.event_types.type_classes)
        return summaries

    async def _check_cancel_scope(self, event_id: str, publisher: PublisherKey) -> None:
        """Raises: NotFound (no such event), Forbidden (``publisher`` may not publish it). What
        is checked never changes: an event's agent, type, sender and the topic it was published
        to (so a copy whose agent has since left the topic is still its publisher's to cancel,
        and a direct event is not a topic key's because its agent is subscribed)."""
        event = await self.find_event(event_id)
        if event is None:
            raise NotFound(f"no event {event_id!r}")
        agent = await self._store.get_agent(event.agent_id)
        handle = agent.handle if agent is not None else event.agent_id
        check_cancel_scope(publisher, event, handle)

    # Schedules

    def _scheduled(self, due: int) -> None:
        if self._next_due_known:
            self._next_due = due if self._next_due is None else min(self._next_due, due)

    async def _anything_due(self) -> bool:
        """Whether a look may find due events: always on a shared store; on one this process
        serves alone, only once the first known due time has come."""
        if self._store.shared:
            return True
        if not self._next_due_known:
            # Known from before the read: a schedule committed meanwhile is kept too.
            self._next_due_known, self._next_due = True, None
            found = await self._store.next_due()
            if found is not None:
                self._scheduled(found)
        return self._next_due is not None and self._next_due <= self.now()

    async def release_due(self) -> list[Event]:
        """Make the scheduled events due by now pending (up to ``DUE_BATCH``, oldest due first)
        and wake what waits for their agents' events, as a publish does; returns them."""
        if not await self._anything_due():
            return []
        self._next_due_known = False  # read again at the next look
        released = await self._store.release_due(DUE_BATCH)
        if released:
            self.metrics.published((e.type for e in released), self.event_types.type_classes)
            self._committed(released)
        return released

    async def run_schedules(self) -> None:
        """Release due events every ``DUE_INTERVAL_S`` (all of them, however many fell due),
        forever; a failure is logged and retried at the next look."""
        while True:
            try:
                while len(await self.release_due()) == DUE_BATCH:
                    pass
            except Exception:  # top-level loop: log, keep going
                log.exception("releasing due events failed; retrying in %ss", DUE_INTERVAL_S)
            try:
                await self.release_windows()
            except Exception:  # top-level loop: log, keep going
                log.exception("summing up ended windows failed; retrying in %ss", DUE_INTERVAL_S)
            await asyncio.sleep(DUE_INTERVAL_S)

    def schedules(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Release due events for as long as the block lasts."""
        return running(self.run_schedules(), "herald-schedules")

    async def drain(
        self,
        agent: Agent,
        *,
        cursor: int | None = None,
        limit: int = 20,
        consumer: str | None = None,
    ) -> Drained:
        """Drain pending events.

        With ``cursor``: events up to it are acknowledged, then the next events are leased to
        ``consumer``; the same consumer sending the same cursor again gets the same events.
        Without: the events returned are marked delivered at once (at most once).

        Raises:
            CursorAhead: ``cursor`` is past the agent's newest event; nothing changes.
        """
        consumer = consumer or DEFAULT_CONSUMER
        if cursor is None:
            events = await self._store.take(agent.id, limit, HEARTBEAT, consumer)
            if events:
                self._acknowledged(agent.id)
                self._count_handed_out(HEARTBEAT, events, DELIVERED)
            return Drained(events, events[-1].seq if events else 0)
        events = await self._store.claim(
            agent.id, consumer, limit, self.lease_ms, HEARTBEAT, ack_up_to=cursor
        )
        self._acknowledged(agent.id)  # the cursor may have acknowledged some: a hint
        self._count_handed_out(HEARTBEAT, events, LEASED)
        return Drained(events, events[-1].seq if events else cursor)

    async def poll(
        self,
        agent: Agent,
        subscription: str,
        match: EventMatch,
        *,
        cursor: int,
        limit: int,
    ) -> Drained:
        """A drain of the agent's events that ``match``, for one subscription (its consumer):
        the cursor acknowledges every matching event up to it that this subscription was handed
        (leased by a poll, or pushed by its stream), then the oldest open matching events after
        the cursor are leased to it; the same cursor again gets the same events. An event this
        subscription was never handed is never acknowledged by its cursor: it stays open for
        the agent's other ways. The look reads the events of ``scan_events`` seqs at most: when
        it stopped there with fewer than ``limit`` handed out, the cursor moves on to where it
        ended (``Drained.more``), never past a matching event it did not hand out.

        Raises:
            CursorAhead: ``cursor`` is past the agent's newest event; nothing changes.
        """
        await self.pushes.written(agent.id)  # what its stream pushed is its own once written
        drained = await self._store.poll(
            agent.id,
            subscription,
            limit,
            self.lease_ms,
            cursor=cursor,
            match=match,
            scan=self.scan_events,
        )
        self._acknowledged(agent.id)  # the cursor may have acknowledged some: a hint
        self._count_handed_out("poll", drained.events, LEASED)
        return drained

    async def acknowledge_through(
        self, agent: Agent, subscription: str, match: EventMatch, cursor: int
    ) -> int:
        """What ``poll`` acknowledges with ``cursor``, and nothing more: the matching events up
        to it that this subscription was handed.

        Raises:
            CursorAhead: ``cursor`` is past the agent's newest event; nothing changes.
        """
        await self.pushes.written(agent.id)  # what its stream pushed is its own once written
        acked = await self._store.ack(
            agent.id, up_to_seq=cursor, consumer=subscription, match=match
        )
        if acked:
            self._acknowledged(agent.id)
        return acked

    async def start_position(
        self, agent: Agent, match: EventMatch, not_before_ms: int | None = None
    ) -> StartPosition:
        """Where a new subscription to the agent's events that ``match`` starts: just before
        its oldest open one (created at ``not_before_ms`` or later), so that nothing pending is
        skipped but what is too old."""
        return await self._store.start_position(
            agent.id, match, not_before_ms, scan=self.scan_events
        )

    async def ack(
        self,
        agent: Agent,
        *,
        ids: Sequence[str] = (),
        cursor: int | str | None = None,
        consumer: str | None = None,
    ) -> Acknowledged:
        """Mark the agent's events delivered: by id, and up to ``cursor`` what ``consumer`` was
        handed (with no consumer named, what the default drainer was handed). A position
        (``herald.cursors``) with no consumer named also covers what nobody holds
        (pushed by a stream or over MCP); a position from another history of the store
        acknowledges nothing, and says so (``truncated``). A bare seq covers only what a drainer
        was handed: it says no history, and after a restore the same seq may be an event the
        client never saw, while a lease restored is the event it was handed. Ids of other
        agents' events, and ids that name no event, are ignored.

        Raises:
            CursorAhead: ``cursor`` is past the agent's newest event; nothing changes.
            InvalidInput: ``cursor`` is a position of another agent.
        """
        ids = [event_id for event_id in ids if is_id(event_id, "evt_")]
        up_to, truncated, pushed = None, False, False
        if isinstance(cursor, int):  # a drain's seq: what a drainer was handed, nothing more
            up_to = cursor
        elif cursor is not None:  # a position: in this history only, pushed events too
            history = await self.history()
            up_to = cursors.decode(cursor, agent, history, what="ack.cursor", fix=ACK_HELP)
            truncated, pushed = up_to is None, up_to is not None and consumer is None
        if up_to is None and not ids:
            return Acknowledged(0, truncated)
        acked = await self._store.ack(
            agent.id,
            ids=ids,
            up_to_seq=up_to,
            consumer=consumer or DEFAULT_CONSUMER,
            unheld=pushed,
        )
        if acked:
            self._acknowledged(agent.id)
        return Acknowledged(acked, truncated)

    async def acknowledged_events(
        self,
        agent: Agent,
        *,
        before: int | None = None,
        type: str | None = None,
        topic: str | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> History:
        """A page of the agent's acknowledged (delivered) events still kept, newest first, read
        as the operator's listing of one agent reads them (``Overview.page``, by seq):
        ``before`` is the seq the page before ended at, ``type`` an exact type or a glob,
        ``topic`` the name or a glob of the topic events were published to. A
        read only: nothing is leased, acknowledged or attempted. Only this agent's events are
        read, whatever ``before`` says."""
        query = EventQuery(
            agent_id=agent.id,
            status=EventStatus.DELIVERED,
            type=type,
            topic=topic,
            before=before,
            limit=limit,
        )
        events, following = await self.overview.page(query)
        return History(events, page_cursor(following) if following is not None else None)

    # Delivery: what the ways that push (session workers, streams) read and record

    async def open_events(self, agent_id: str, after_seq: int, limit: int) -> list[Event]:
        """The agent's open, unexpired events after ``after_seq``, oldest first."""
        return await self._store.read_open(agent_id, after_seq, limit)

    async def find_event(self, event_id: str) -> Event | None:
        """An event as it stands now, whoever it belongs to (for a delivery in progress)."""
        return await self._store.get_event(event_id) if is_id(event_id, "evt_") else None

    async def agent_exists(self, agent_id: str) -> bool:
        return is_id(agent_id, "agt_") and await self._store.get_agent(agent_id) is not None

    async def record_attempts(self, attempts: Sequence[Attempt], *, durable: bool = True) -> None:
        """Record delivery attempts; ``durable=False``: see ``Store.record_attempts``."""
        await self._store.record_attempts(attempts, durable=durable)
        for attempt in attempts:
            self.metrics.delivered(attempt.mechanism, attempt.outcome)

    async def _record_pushes(self, pushes: Sequence[tuple[str, Attempt]]) -> None:
        """Pushes of several agents' events, in one trip (``pushes``' writes): each pending
        event becomes ``sent``, and each attempt is recorded."""
        await self._store.record_pushes(pushes)
        for _, attempt in pushes:
            self.metrics.delivered(attempt.mechanism, attempt.outcome)

    async def mark_sent(self, agent_id: str, ids: Sequence[str], *, durable: bool = True) -> int:
        """Pushed through a way that cannot confirm: pending events become ``sent``, and each
        open one is counted as handed out once more (``durable=False``: see
        ``Store.record_attempts``)."""
        return await self._store.mark_sent(agent_id, ids, durable=durable)

    async def count_handed_out(self, agent_id: str, ids: Sequence[str]) -> None:
        """A stream handed these open events out again (the first of its backlog, at a
        reconnect; ``GET /channel/stream`` and ``events/stream``): each is counted towards
        ``max_deliveries``."""
        if ids:
            await self._store.count_handed_out(agent_id, ids)

    async def confirm(self, agent_id: str, event_id: str, session: str) -> int:
        """A way that confirms (an answered form) got the event through to ``session``."""
        acked = await self._store.ack(agent_id, ids=[event_id], consumer=session)
        if acked:
            self._acknowledged(agent_id)
        return acked

    # Metrics

    def _count_handed_out(self, way: str, events: Sequence[Event], outcome: str) -> None:
        """A drain handed ``events`` out by ``way``, leased or (a take) delivered at once."""
        if not events:
            return
        now, created_at = self.now(), [event.created_at for event in events]
        self.metrics.delivered(way, outcome, len(events))
        self.metrics.sent(way, created_at, now)
        if outcome == DELIVERED:
            self.metrics.acknowledged(way, created_at, now)

    def _count_acknowledged(self, created_at: Sequence[int]) -> None:
        """The store committed an acknowledgement (``Store.on_acknowledged``), by any way."""
        self.metrics.delivered(ACK, DELIVERED, len(created_at))
        self.metrics.acknowledged(ACK, created_at, self.now())

    # Upkeep

    async def maintain_once(self) -> tuple[int, int]:
        """Expire what ran out of time and prune old finished events, and the journal as far
        back; returns both counts. The event types are read again if their copy is 5 s old."""
        expired = await self._store.expire()
        before = self._store.now() - self.retention_ms
        pruned = await self._store.prune(before)
        await self._store.prune_journal(before)
        await self.event_types.refresh()
        return expired, pruned

    async def run_maintenance(self) -> None:
        """Loop ``maintain_once`` forever; a failure is logged and retried at the next tick."""
        while True:
            try:
                await self.maintain_once()
            except Exception:  # top-level loop: log, keep going
                log.exception(
                    "store maintenance failed; retrying in %ss", self.maintenance_interval_s
                )
            await asyncio.sleep(self.maintenance_interval_s)

    def maintenance(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Run the maintenance loop for as long as the block lasts."""
        return running(self.run_maintenance(), "herald-maintenance")


def _visible_to(event: Event, agent: Agent) -> bool:
    """Whether the agent sees the event: one of its own, once it was offered (not while it is
    scheduled, nor if it was cancelled then: its seq is still a placeholder below zero)."""
    return (
        event.agent_id == agent.id and event.status is not EventStatus.SCHEDULED and event.seq > 0
    )


def _listing(events: Sequence[NewEvent], lists: Lists, handle: str) -> str | None:
    """Where a publish lists ``handle`` (``event.to``, ``events[3].to``); None if no list of
    it does."""
    for index, handles in lists.items():
        if handle in handles:
            return f"events[{index}].to" if len(events) > 1 else "event.to"
    return None


def refuse_topics(events: Sequence[NewEvent]) -> None:
    """Refuse events that name a topic to a publish to agents: a topic's copies are made by
    ``Hub.publish_to_topic`` alone, so that an event's topic says which publish made it (a key
    limited to topics cancels by it).

    Raises:
        InvalidInput: naming the first such event.
    """
    for index, event in enumerate(events):
        if event.topic is not None:
            where = f"events[{index}]" if len(events) > 1 else "event"
            raise InvalidInput(
                f"{where} names the topic {event.topic!r}, but is published to agents: publish"
                " it with publish_topic (each subscriber's copy then names its topic), or leave"
                " topic out; nothing was published"
            )
