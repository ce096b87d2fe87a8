"""The store contract: the outbox and the inbox at once.

Every backend keeps the same promises, proven by one test suite run against each:
- ``append`` is one transaction, idempotent on ``(agent, dedupe_key)``, and gives each event the
  next ``seq`` of its agent (strictly increasing, without gaps); once it is committed it tells
  ``on_appended`` the events it created, before it answers;
- ``claim`` leases open events to one consumer atomically: two consumers never hold the same
  event at once, and an event whose lease ran out is offered again;
- ``ack`` marks events delivered, by id or up to a cursor (only what that cursor's consumer
  was handed, or what nobody holds; a cursor past the newest seq is refused), and, once it is
  committed, tells ``on_acknowledged`` when each event it finished was published (as a claim's
  cursor does);
- every delivery attempt is recorded; expired events are marked, old finished ones pruned;
- an event handed out ``max_deliveries`` times without an acknowledgement (leased by a claim,
  pushed to a session, ``mark_sent``, or replayed first by a stream, ``count_handed_out``)
  dies in the claim or the read of open events that would hand it out again: offered no more,
  kept until pruned like a finished one;
- each agent's events are counted by status as every write changes them, and attempts by
  mechanism and outcome as they are recorded, so that ``stats`` reads no event or attempt;
- live sessions are kept with an expiry that their process refreshes, so that every process
  sharing the store sees them, and those of a process that died drop out once it passes;
- the event types the operator declares are kept by name; every process sharing the store is
  told when they change (a hint, where the backend can tell);
- publisher keys are kept by id and found by their hash, so that each request reads the truth;
- each transaction that publishes, records attempts or acknowledgements, expires events or
  changes an endpoint writes one journal row in that transaction, read back in one order, the
  same for every reader (``herald.feed``); the journal listeners are told after each such
  commit in this process.

Times are integer milliseconds since the epoch, read from the store's ``clock`` so that tests can
move time instead of sleeping.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType

from herald.config import DEFAULTS
from herald.feed import EventHead, JournalBounds, JournalPage, JournalPosition, LoopGuardTrip
from herald.loop_guard import GuardedSend, LoopLimits
from herald.models import (
    EVERY_EVENT,
    Agent,
    Attempt,
    Delivery,
    Drained,
    Endpoint,
    Event,
    EventMatch,
    EventType,
    Finished,
    Hold,
    NewEvent,
    OneClaim,
    OwedEvents,
    Published,
    PublisherKey,
    PushWindow,
    Reply,
    SessionRecord,
    StartPosition,
    Topic,
    TopicSubscription,
    WebhookSubscription,
)
from herald.overview import AgentSummary, EventQuery, Gauges, Position, Stats

Clock = Callable[[], float]
DEFAULT_SCAN = DEFAULTS.hub.scan_events
AckObserver = Callable[[Sequence[int]], None]
"""Told the ``created_at`` of each event an acknowledgement finished, once it is committed."""
AppendObserver = Callable[[list[Event]], None]
"""Told the events an ``append`` created, once they are committed."""


def _unobserved(_created_at: Sequence[int]) -> None:
    pass


def _unseen(_events: list[Event]) -> None:
    pass


def now_ms(clock: Clock) -> int:
    return int(clock() * 1000)


class Store(ABC):
    """Durable storage for agents, events and attempts. Use ``herald.open_store`` to get one."""

    def __init__(self, clock: Clock = time.time) -> None:
        self.clock = clock
        self.on_acknowledged: AckObserver = _unobserved
        """Called after every commit of ``ack``, or of a ``claim`` whose cursor acknowledged
        events, with the ``created_at`` of each event it finished (the hub's metrics time
        publish to acknowledgement with it); never called for none."""
        self.on_appended: AppendObserver = _unseen
        """Called in the event loop after every commit of ``append`` that created events, with
        them (each agent's in seq order), before that ``append`` or any other answered by the
        same commit returns: what follows new events (pushes to live sessions, streams) is
        under way before the answers to their publishes are made. Never called for none; it
        must not block, and what it raises is reported (logged) and keeps no caller from its
        answer."""
        self._journal_listeners: list[Callable[[], None]] = []
        self.max_deliveries = DEFAULTS.hub.max_deliveries
        """How many times ``claim`` and ``poll`` hand an event out unacknowledged: the next
        time they would, it becomes dead instead (``rules.DEAD_LETTER``). 0: no limit."""

    shared = True
    """Whether other processes may write to the store while this one serves it (PostgreSQL);
    not for a store one process serves alone (SQLite under ``herald serve``'s lock), where what
    this process wrote is all there is."""

    def now(self) -> int:
        return now_ms(self.clock)

    async def __aenter__(self) -> Store:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @abstractmethod
    async def open(self) -> None:
        """Connect and apply pending migrations."""

    async def listen(  # noqa: B027
        self,
        on_agents: Callable[[set[str]], None],
        on_catalogue: Callable[[], None] | None = None,
        *,
        on_subscription_deleted: Callable[[str], None] | None = None,
        on_inbox: Callable[[set[str]], None] | None = None,
    ) -> None:
        """Call ``on_agents`` (it must not block) with the agents that got events committed by
        other processes, ``on_catalogue`` after a process changed the event types, as hints,
        ``on_subscription_deleted`` with the id of each webhook subscription another process
        deleted, and ``on_inbox`` with the agents whose open events a process closed
        (acknowledged, delivered, expired) or opened again, as hints. A backend shared by one
        process only has nothing to do."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections and threads; safe to call twice."""

    def add_journal_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (it must not block) after each commit of this store object that
        wrote a journal row: a hint, in this process only."""
        self._journal_listeners.append(listener)

    def _journal_committed(self) -> None:
        for listener in self._journal_listeners:
            listener()

    # Agents and settings

    # Every agent read gives its ``webhook_url`` from its webhook endpoint (see put_endpoint):
    # the agents.webhook_url column is no longer kept.

    @abstractmethod
    async def create_agent(self, agent: Agent) -> None:
        """Raises: Conflict: the handle is taken."""

    @abstractmethod
    async def get_agent(self, agent_id: str) -> Agent | None: ...

    @abstractmethod
    async def agent_by_key_hash(self, key_hash: str) -> Agent | None:
        """The agent whose key has this hash, or whose previous key has it while its grace
        lasts (``previous_until`` after now, by the store's clock)."""

    @abstractmethod
    async def working_key_hashes(self, key_hashes: Sequence[str]) -> set[str]:
        """Those of ``key_hashes`` that still work: an agent's key, or its previous key while
        its grace lasts (by the store's clock). One read, however many."""

    @abstractmethod
    async def rotate_agent_key(
        self, agent_id: str, key_hash: str, previous_until: int | None
    ) -> bool:
        """Give the agent the key of ``key_hash``. With ``previous_until``, the key it had keeps
        working until then; without, it stops at once. Either way a previous key from an
        earlier rotation stops (only one is kept). False if there is no such agent."""

    @abstractmethod
    async def agent_by_handle(self, handle: str) -> Agent | None: ...

    @abstractmethod
    async def list_agents(self) -> list[Agent]: ...

    @abstractmethod
    async def delete_agent(self, agent_id: str) -> bool:
        """Delete an agent with its events and attempts; False if there was none."""

    @abstractmethod
    async def set_agent_delivery(self, agent_id: str, delivery_json: str) -> bool:
        """Replace an agent's delivery overrides; False if there is no such agent."""

    @abstractmethod
    async def set_agent_preferences(self, agent_id: str, preferences_json: str) -> bool:
        """Replace an agent's preferences; False if there is no such agent."""

    @abstractmethod
    async def get_setting(self, name: str) -> str | None: ...

    @abstractmethod
    async def set_setting_if_absent(self, name: str, value: str) -> str:
        """Store ``value`` unless the setting exists; return the value now stored."""

    @abstractmethod
    async def set_setting(self, name: str, value: str) -> None:
        """Store ``value``, replacing the setting's value if it has one."""

    # Publisher keys: what applications publish with instead of the admin key

    @abstractmethod
    async def create_publisher_key(self, key: PublisherKey) -> None:
        """Store a new publisher key (its id and hash are new: made by the caller)."""

    @abstractmethod
    async def publisher_key_by_hash(self, key_hash: str) -> PublisherKey | None: ...

    @abstractmethod
    async def list_publisher_keys(self) -> list[PublisherKey]:
        """Every publisher key, oldest first."""

    @abstractmethod
    async def delete_publisher_key(self, key_id: str) -> bool:
        """Revoke a publisher key; False if there was none."""

    # Events

    @abstractmethod
    async def append(self, events: Sequence[NewEvent]) -> list[Published]:
        """Store events in one transaction, in order. A repeated ``(to, dedupe_key)`` stores
        nothing and answers the first event with ``created=False``.

        Raises:
            NotFound: an addressee does not exist; nothing of the batch is stored.
        """

    @abstractmethod
    async def get_event(self, event_id: str) -> Event | None: ...

    @abstractmethod
    async def read_open(self, agent_id: str, after_seq: int, limit: int) -> list[Event]:
        """Open (pending or sent), unexpired events after ``after_seq``, oldest first: those
        handed out ``max_deliveries`` times already die instead (as in ``claim``), each
        recorded with an attempt that says why."""

    @abstractmethod
    async def count_handed_out(self, agent_id: str, ids: Sequence[str]) -> None:
        """The agent's open events among ``ids`` were handed out once more (a stream replayed
        them): counted towards ``max_deliveries``. Its loss in a crash costs a count, never an
        event."""

    @abstractmethod
    async def claim(
        self,
        agent_id: str,
        consumer: str,
        limit: int,
        lease_ms: int,
        mechanism: str,
        *,
        ack_up_to: int | None = None,
        match: EventMatch = EVERY_EVENT,
        after: int | None = None,
    ) -> list[Event]:
        """Lease the oldest open events not under another consumer's live lease, oldest first
        (an event whose lease ran out unacknowledged is offered again). Only events that
        ``match``, both what is acknowledged and what is leased; with ``after``, only events
        after that seq are leased (a subscription's events come after its cursor).

        Events already leased to ``consumer`` are handed out again (a lost response costs
        nothing) and their lease renewed. Each event handed out gets an attempt recorded, and
        is counted: one handed out ``max_deliveries`` times already (unacknowledged, since it
        is still open) becomes ``dead`` instead, in the same transaction, with an attempt
        (``rules.DEAD_LETTER``, outcome ``dead``, the reason its error), and is offered no more;
        an answer that those left empty while others wait looks again. With
        ``ack_up_to``, ``ack(up_to_seq=ack_up_to, consumer=consumer)`` is done first, in the same
        transaction; the event at seq ``ack_up_to`` is then handed out only alone, and what is
        handed out is not acknowledged by ``ack_up_to`` itself when it comes again (a lost
        answer), only by the next cursor (the event at seq ``ack_up_to`` excepted).

        Raises:
            CursorAhead: ``ack_up_to`` is past the agent's newest seq; nothing changes.
        """

    @abstractmethod
    async def poll(
        self,
        agent_id: str,
        consumer: str,
        limit: int,
        lease_ms: int,
        *,
        cursor: int,
        match: EventMatch,
        scan: int,
    ) -> Drained:
        """``claim(agent_id, consumer, limit, lease_ms, "poll", ack_up_to=cursor, match=match,
        after=cursor)``, its look bounded: it reads the events of at most ``scan`` seqs after
        ``cursor``, however few of them match. Its cursor is as ``rules.polled`` says: when the
        look stopped at its bound with fewer than ``limit`` events handed out, it moves on to
        where the look ended (``more``), but never past a matching event it did not hand out.

        Raises:
            CursorAhead: ``cursor`` is past the agent's newest seq; nothing changes.
        """

    @abstractmethod
    async def start_position(
        self,
        agent_id: str,
        match: EventMatch,
        not_before_ms: int | None = None,
        *,
        scan: int = DEFAULT_SCAN,
    ) -> StartPosition:
        """Where a subscription to the agent's events that ``match`` starts: the seq just before
        its oldest open, unexpired matching event created at ``not_before_ms`` or later (the
        agent's newest seq when there is none), and how many open matching events were created
        before ``not_before_ms`` (skipped).

        Each look is bounded by ``scan`` seqs: from the agent's oldest open event (or, with
        ``not_before_ms``, from its first event after it created then or later, found in a look
        of ``scan`` seqs by the index on the agent and seq, or where that look ended), the
        events of at most ``scan`` seqs are read. With no matching event among
        them, the position is where the look ended (``more``): nothing it passes matches. Open
        matching events too old to be offered are counted in a look of ``scan`` seqs too; past
        it, they are said to be one at least (so a client is told it may have missed some).

        Raises:
            NotFound: no such agent.
        """

    @abstractmethod
    async def take(self, agent_id: str, limit: int, mechanism: str, session: str) -> list[Event]:
        """Like ``claim`` (``session`` standing for the consumer) but marks the events delivered
        at once: at most once."""

    @abstractmethod
    async def ack(
        self,
        agent_id: str,
        *,
        ids: Sequence[str] = (),
        up_to_seq: int | None = None,
        consumer: str | None = None,
        unheld: bool = False,
        match: EventMatch = EVERY_EVENT,
    ) -> int:
        """Mark open events of the agent delivered: those in ``ids``, and those that ``match`` with
        ``seq <= up_to_seq`` that ``consumer`` was handed before this cursor (its lease live or
        run out), and, with ``unheld``, those nobody holds (pushed ones, which lease nothing):
        never one handed to another consumer, nor one handed in the answer to a claim with this
        same cursor. A claim's own ``ack_up_to`` covers only what its consumer holds: an event
        its claim skipped (held by a concurrent transaction for a moment) is offered later, not
        acknowledged unseen. Returns how many changed.

        Raises:
            CursorAhead: ``up_to_seq`` is past the agent's newest seq; nothing changes.
        """

    @abstractmethod
    async def mark_sent(self, agent_id: str, ids: Sequence[str], *, durable: bool = True) -> int:
        """Mark pending events of the agent ``sent`` (pushed through a way that cannot confirm);
        delivered ones stay delivered. Each open one is counted as handed out once more
        (towards ``max_deliveries``). Returns how many became sent. ``durable=False``: the write
        may be lost in a power cut, never in a crash of herald alone (``record_attempts``)."""

    @abstractmethod
    async def count_unread(self, agent_id: str, before_ms: int) -> int:
        """How many open, unexpired events of the agent were created or last sent before the
        given time: the unread events an agent is reminded of."""

    @abstractmethod
    async def inbox_marks(self, agent_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
        """A mark of each agent's inbox (its open, unexpired events): how many, and the sum of
        their seqs. Any change to an inbox changes its mark, since a new event's seq is above
        every seq before it; agents with an empty inbox (or none) are left out."""

    @abstractmethod
    async def history(self) -> str:
        """Which history of the store this is: made anew when the store is made, restored or
        recreated (migration ``history`` says how), and carried by every position herald
        hands out, so that a position from another history is never taken as a place in this
        one. Letters and digits only."""

    @abstractmethod
    async def missing_after(
        self,
        agent_id: str,
        after_seq: int,
        through_seq: int | None = None,
        match: EventMatch = EVERY_EVENT,
    ) -> int:
        """How many of the agent's events after ``after_seq`` (up to ``through_seq``, if given)
        will never be offered: those that ``match`` and expired, and every one pruned (its type
        is gone with it). A stream or poll resuming there is told its history was truncated."""

    @abstractmethod
    async def add_reply(
        self, reply: Reply, routed: NewEvent | None, guard: GuardedSend | None = None
    ) -> tuple[Reply, Published | None]:
        """Store a reply and, in the same transaction, the event that carries it to an agent
        sender (its id goes in ``routed_event_id``), once ``guard`` (if given) let it through.

        Raises:
            NotFound: the routed event's addressee does not exist; nothing is stored.
            LoopGuardTripped: the routed event is over a loop guard; nothing is stored.
        """

    @abstractmethod
    async def append_message(self, event: NewEvent, guard: GuardedSend) -> Published:
        """Store one message between agents, counted against the loop guard's limits in the
        same transaction (``herald.loop_guard``), so that the limits hold across processes.

        Raises:
            LoopGuardTripped: the send is over a limit; nothing is stored.
            NotFound: the addressee does not exist; nothing is stored.
        """

    @abstractmethod
    async def record_loop_guard(self, trip: LoopGuardTrip) -> None:
        """Journal a message a loop guard refused, for the operator's feed."""

    @abstractmethod
    async def loop_guard_trips(
        self, since_ms: int, limit: int
    ) -> tuple[int, list[tuple[int, LoopGuardTrip]]]:
        """The messages loop guards refused, as the journal keeps them (``record_loop_guard``):
        how many were refused from ``since_ms`` on, and the newest ``limit`` of all those kept,
        each with when it was refused, newest first. Both read only the journal's trips."""

    @abstractmethod
    async def loop_limits(self, agent_id: str, defaults: LoopLimits) -> LoopLimits:
        """The agent's loop guard limits: ``defaults`` with those set for it in their place."""

    @abstractmethod
    async def set_loop_limits(
        self, agent_id: str, exchanges: int | None, window_s: int | None, per_minute: int | None
    ) -> None:
        """Set the agent's own loop guard limits (None: the serve-wide one)."""

    @abstractmethod
    async def replies(self, event_id: str) -> list[Reply]:
        """The replies to an event, oldest first."""

    @abstractmethod
    async def record_attempts(self, attempts: Sequence[Attempt], *, durable: bool = True) -> None:
        """Record delivery attempts. ``durable=False`` is for records whose loss costs only a
        push sent again (its event stays pending): on SQLite its commit does not wait for the
        disk (``synchronous=NORMAL`` for a transaction of such writes alone), so it survives a
        crash of herald but maybe not a power cut, and it does not hold the one writer (and the
        publishes queued behind it) for a flush. PostgreSQL commits it as any other write: its
        writes do not queue behind one another."""

    @abstractmethod
    async def record_pushes(self, pushes: Sequence[tuple[str, Attempt]]) -> None:
        """Pushes of several agents' events at once, in one transaction: each ``(agent_id,
        attempt)`` marks the agent's event ``sent`` if it is pending (``mark_sent``, but not
        counted towards ``max_deliveries``: a stream counts its replays, ``count_handed_out``),
        records
        the attempt, and counts the event as handed to the attempt's session (an ended lease:
        anyone may claim it, and the session's cursor acknowledges it, as a claim's does),
        unless another consumer holds a live lease on it."""

    @abstractmethod
    async def attempts(self, event_id: str) -> list[Attempt]: ...

    @abstractmethod
    async def expire(self) -> int:
        """Mark open events whose time ran out as expired; returns how many. Sessions and
        webhook subscriptions whose expiry passed are deleted too (not counted), the
        subscriptions with their waiting deliveries. A subscription still owed one of the
        events (none of its deliveries made) is owed a ``gap``."""

    @abstractmethod
    async def prune(self, finished_before_ms: int) -> int:
        """Delete delivered, expired, dead and cancelled events finished (or dead, or cancelled)
        before the given time;
        returns how many.
        A subscription whose waiting delivery goes with one is owed a ``gap``."""

    # Schedules: events published for later

    @abstractmethod
    async def schedule(
        self, events: Sequence[NewEvent], guard: GuardedSend | None = None
    ) -> list[Published]:
        """Store events that each have a ``deliver_at``, in one transaction, as ``scheduled``:
        each with a placeholder seq below zero, offered by no way and counted in no agent's
        row, its time to live counting from its due time. Dedupe keys hold as for ``append``
        (a repeat is answered with the event that has the key, scheduled or not). With
        ``guard`` (a message between agents), its loop guard is checked in that transaction
        first, as ``append_message`` checks it.

        Raises:
            NotFound: an addressee does not exist; nothing is stored.
            LoopGuardTripped: the guard refuses the message; nothing is stored.
        """

    @abstractmethod
    async def release_due(self, limit: int) -> list[Event]:
        """Make up to ``limit`` scheduled events due by now pending, in one transaction, oldest
        due first: each gets its agent's next seq and is published as of its due time
        (``created_at``), journaled as a publish is, and woken on as one is (every process's
        streams hear of it on PostgreSQL). Each is released once, whichever processes share
        the store. Returns them, each agent's in seq order."""

    @abstractmethod
    async def next_due(self) -> int | None:
        """When the first scheduled event is due (None: none is scheduled), from the index of
        them."""

    # Quiet hours and digests (``herald.push_windows``). An event whose ``hold`` the hub set is
    # held by its rule's window open for its agent, or opens one, in the transaction that stores
    # it (``herald.store.holds``): so every process sharing the store agrees which it holds.

    @abstractmethod
    async def timed_rules(self) -> dict[str, str]:
        """The preferences (JSON) of every agent that has quiet hours or digests, by handle,
        from an index of those agents only."""

    @abstractmethod
    async def due_windows(self, limit: int) -> list[PushWindow]:
        """Up to ``limit`` windows that have ended by now, the first ended first."""

    @abstractmethod
    async def next_window_end(self) -> int | None:
        """When the first open window ends (None: none is open)."""

    @abstractmethod
    async def window_counts(self, window_id: str) -> dict[str, int]:
        """How many events the window holds, by type, counted in SQL from the index of held
        events (never read one by one)."""

    @abstractmethod
    async def close_window(self, window_id: str) -> None:
        """Forget a window once its summary is stored (no-op if it is gone)."""

    @abstractmethod
    async def cancel(self, event_id: str) -> Event | None:
        """Cancel a scheduled event, or recall a pending one that nothing has handed out yet
        (never leased, pushed or delivered, no delivery of it under way), in one transaction:
        it becomes ``cancelled``, kept, and the cancel is one of its attempts. None: no such
        event.

        Raises:
            Conflict: the event is past recalling; the message says why; nothing changes.
        """

    # Live sessions: presence, across the processes that share the store

    @abstractmethod
    async def put_session(self, session: SessionRecord) -> None:
        """Register a live session, or replace its record.

        Raises:
            NotFound: its agent does not exist (deleted meanwhile, say).
        """

    @abstractmethod
    async def refresh_sessions(self, ids: Sequence[str], expires_at: int) -> int:
        """Move the expiry of those sessions (a process's live ones, in one statement); returns
        how many are still stored (one deleted after its expiry passed must be put again)."""

    @abstractmethod
    async def remove_session(self, session_id: str) -> bool:
        """Forget a session that ended; False if it was not stored."""

    @abstractmethod
    async def live_sessions(self, agent_id: str) -> list[SessionRecord]:
        """The agent's sessions whose expiry has not passed (by the store's clock), in
        whichever process, oldest connection first."""

    # Endpoints (webhooks, OpenClaw) and their delivery schedule

    @abstractmethod
    async def put_endpoint(self, endpoint: Endpoint) -> None:
        """Create the agent's endpoint of that kind, or replace it (its deliveries go with it)."""

    @abstractmethod
    async def endpoints(self, agent_id: str) -> list[Endpoint]: ...

    @abstractmethod
    async def any_endpoints(self) -> bool:
        """Whether any endpoint (webhook, OpenClaw or subscription, in any state) is stored."""

    @abstractmethod
    async def endpoint_page(
        self, after: str | None, limit: int, *, failing: bool
    ) -> list[tuple[Endpoint, str]]:
        """Webhook and OpenClaw endpoints of every agent by id, those after ``after``, at most
        ``limit``, each with its agent's handle; ``failing``: only those disabled or failing."""

    @abstractmethod
    async def delete_endpoint(self, agent_id: str, kind: str) -> bool: ...

    @abstractmethod
    async def rotate_secret(
        self, endpoint_id: str, secret: str, previous_until: int
    ) -> Endpoint | None:
        """Make ``secret`` the signing secret; the current one keeps signing until
        ``previous_until``. None if there is no such endpoint."""

    @abstractmethod
    async def refused_endpoints(self) -> list[Endpoint]:
        """The endpoints disabled because their address was refused: their ``disabled_reason``
        begins with ``herald.models.REFUSED_PREFIX``."""

    @abstractmethod
    async def get_endpoint(self, endpoint_id: str) -> Endpoint | None: ...

    @abstractmethod
    async def next_attempts(self, endpoint_ids: Sequence[str]) -> dict[str, int]:
        """When each endpoint's earliest waiting delivery is due; endpoints with none waiting
        are left out."""

    @abstractmethod
    async def enable_endpoint(self, endpoint_id: str, disabled_reason: str) -> bool:
        """Make a disabled endpoint active again, if it is still disabled for that reason;
        its failing span starts afresh. Returns whether it was."""

    @abstractmethod
    async def schedule_deliveries(
        self,
        before_ms: int,
        limit: int,
        *,
        agents: Sequence[str] | None = None,
        not_agents: Sequence[str] = (),
        push_grace_ms: int | None = None,
    ) -> int:
        """Give each open event last offered before ``before_ms`` a delivery to each active
        endpoint of its agent, once (optionally only for, or not for, some agents). Returns how
        many were scheduled.

        With ``push_grace_ms``, an agent with a live session that can push (held by any
        process) has that long to acknowledge a push: its events are scheduled only once last
        offered before ``before_ms - push_grace_ms``."""

    @abstractmethod
    async def claim_deliveries(
        self,
        worker: str,
        limit: int,
        lease_ms: int,
        *,
        per_endpoint: int = 4,
        in_flight: Mapping[str, int] | None = None,
        pace_ms: float | None = None,
    ) -> list[tuple[Delivery, Endpoint, Event, Agent]]:
        """Claim due deliveries (waiting, due, not claimed by a live worker, to an active
        endpoint), in due order: no two workers get the same one. An endpoint gets at most
        ``per_endpoint``, less the requests ``in_flight`` to it already. A subscription a
        receiver asked to wait (its ``held_until``) gets none until then; with ``pace_ms``, a
        subscription gets no more than one delivery per ``pace_ms`` allows
        (``rules.paced_allowance``), counted across every process, and its pace moves on by
        what it got."""

    @abstractmethod
    async def release_claims(self, claimant: str | None = None, one: OneClaim | None = None) -> int:
        """Free the deliveries ``claimant`` claimed (a worker that stops: what it did not
        finish; or ``one`` claim, not one of the same delivery made later), or every claimed
        delivery, so that the next claim takes them at once; returns how many. Every one only
        for a store no other process serves (SQLite under ``herald serve``'s lock): there a
        claim can only be one that a process gone since left behind."""

    async def hold_claims_for(self, claimant: str) -> None:  # noqa: B027
        """Tie ``claimant``'s claims to this process's life, until ``let_go_of_claimant``: once
        the process is gone (killed), ``free_claims_of_the_gone`` in another frees them. A
        backend served by one process only has nothing to do (it frees every claim at start)."""

    def holding(self, claimant: str) -> int | None:
        """Whether this process holds ``claimant``'s claims tied to its life now: None if not
        (its connection to the store was lost: another process may take it for dead and free
        them); otherwise a number that stays the same for as long as it holds them without a
        break. A claim made under one number is safe to send only under the same one."""
        return 0

    async def let_go_of_claimant(self, claimant: str) -> None:  # noqa: B027
        """``claimant`` claims no more (its worker stopped, its claims freed)."""

    async def free_claims_of_the_gone(self, grace_ms: int) -> int:
        """Free the claims of the claimants (``hold_claims_for``) whose process has been gone
        for ``grace_ms`` or more (timed by the database, one clock for every process), and
        forget them; returns how many claims were freed."""
        return 0

    @abstractmethod
    async def finish_deliveries(self, finished: Sequence[Finished]) -> list[tuple[str, str]]:
        """Record attempts, in one transaction: each delivery waits again (``next_at``) or is
        finished; each event becomes ``event_status`` (delivered or sent) if it is still open;
        each endpoint notes its last success or failure, and is disabled with a
        ``disable_reason``, or when it has been failing since before ``disable_failing_since``.
        A subscription's attempts add to its rolling window (``rules.minute_counts``): one
        whose window is more than 95% failures over at least 100 attempts is suspended; a
        ``held_until`` holds its deliveries back until then (the claim passes it over).
        Returns the subscriptions the batch suspended, with why."""

    @abstractmethod
    async def deliveries(self, event_id: str) -> list[Delivery]: ...

    # MCP Events webhook subscriptions: an endpoint of kind ``subscription`` each, with its
    # ``WebhookSubscription`` record (same id); their deliveries are the endpoints' deliveries.

    @abstractmethod
    async def put_subscription(
        self,
        endpoint: Endpoint,
        subscription: WebhookSubscription,
        rotation_until: int,
        *,
        max_live: int | None = None,
    ) -> tuple[Endpoint, WebhookSubscription] | None:
        """Create the subscription, or refresh the one with its id as
        ``rules.refreshed_subscription`` says (in one transaction). A new one is refused if its
        agent holds ``max_live`` live (unexpired) subscriptions already, counted in the same
        transaction, so that puts racing, in any process, never take it past the limit (None:
        no limit); a refresh is never refused. Returns what was stored before; None: it is new.

        Raises:
            NotFound: its agent does not exist (deleted meanwhile, say).
            SubscriptionLimitReached: it is new, and its agent holds ``max_live`` live ones.
        """

    @abstractmethod
    async def subscriptions(
        self, *, agent_id: str | None = None, ids: Sequence[str] | None = None
    ) -> list[tuple[Endpoint, WebhookSubscription]]:
        """The subscriptions of an agent, or those with these ids (or every one), by id."""

    @abstractmethod
    async def delete_subscription(self, subscription_id: str) -> bool:
        """Delete a subscription with its waiting deliveries; False if there was none."""

    @abstractmethod
    async def subscription_owed(self, subscription_id: str, limit: int) -> OwedEvents | None:
        """The subscription's oldest matching events after its start still owed (waiting for a
        delivery, or not yet given one), at most ``limit`` of them. Its start moves up to just
        before the oldest (to the agent's newest seq when none is owed), so that each reading
        looks only at what is owed. None: no such subscription."""

    async def subscription_cursor(
        self, subscription_id: str, sending: str | None = None
    ) -> int | None:
        """The subscription's safe watermark: the highest seq such that each of its matching
        events up to it was delivered or given up on (the agent's newest seq when none is
        outstanding). ``sending``: an event being sent now, counted as delivered (the cursor
        its body carries). None: no such subscription."""
        owed = await self.subscription_owed(subscription_id, 2)
        return None if owed is None else owed.cursor(sending)

    @abstractmethod
    async def owe_gap(self, subscription_id: str) -> None:
        """The subscription's endpoint is owed a ``gap`` (a delivery was given up on and the
        gap could not be told at once); kept until ``gap_told``. Expiry and pruning mark the
        gaps they make themselves."""

    @abstractmethod
    async def subscription_gaps(self) -> list[tuple[Endpoint, WebhookSubscription]]:
        """The live, active subscriptions owed a ``gap`` (``gap_at`` set)."""

    @abstractmethod
    async def gap_told(self, subscription_id: str, gap_at: int) -> bool:
        """The gap that arose at ``gap_at`` was told: none is owed now, unless another arose
        since (then it stays). Whether it was cleared."""

    @abstractmethod
    async def schedule_subscription_deliveries(self, limit: int) -> int:
        """Give each live, active subscription a delivery of each open, unexpired event of its
        agent after its ``after_seq`` that it matches, once, at once (no hold-back: its client
        asked for them). Returns how many were scheduled."""

    # The event types the operator declares

    @abstractmethod
    async def put_event_type(
        self, name: str, description: str, payload_schema_json: str | None
    ) -> tuple[EventType, bool]:
        """Declare an event type, or replace its description and payload schema (it keeps its
        ``created_at``; ``updated_at`` is now). Returns it as stored, and whether it is new."""

    @abstractmethod
    async def get_event_type(self, name: str) -> EventType | None: ...

    @abstractmethod
    async def list_event_types(self) -> list[EventType]:
        """Every declared event type, by name (in byte order)."""

    @abstractmethod
    async def delete_event_type(self, name: str) -> bool:
        """Forget an event type; False if it was not declared."""

    # Topics: names the operator declares, and the agents subscribed to them

    @abstractmethod
    async def put_topic(self, name: str, description: str) -> tuple[Topic, bool]:
        """Declare a topic, or replace its description (it keeps its ``created_at``). Returns it
        as stored, with its subscribers counted, and whether it is new."""

    @abstractmethod
    async def get_topic(self, name: str) -> Topic | None:
        """A declared topic with its subscribers counted: the agents with a pattern matching
        its name."""

    @abstractmethod
    async def list_topics(self) -> list[Topic]:
        """Every declared topic by name (in byte order), each with its subscribers counted."""

    @abstractmethod
    async def delete_topic(self, name: str) -> bool:
        """Forget a topic and the subscriptions to its exact name (globs stay: they may match
        other topics); False if it was not declared."""

    @abstractmethod
    async def subscribe_topic(self, agent_id: str, pattern: str) -> bool:
        """Subscribe an agent to a topic's name or a glob of names; False if it was already."""

    @abstractmethod
    async def unsubscribe_topic(self, agent_id: str, pattern: str) -> bool:
        """Remove an agent's subscription to ``pattern``; False if it had none."""

    @abstractmethod
    async def topic_subscriptions(
        self, agent_id: str | None = None, topic: str | None = None
    ) -> list[TopicSubscription]:
        """The subscriptions of one agent, or those matching a topic's name (an agent may have
        several), or every one; by handle, then pattern."""

    @abstractmethod
    async def append_to_topic(
        self, topic: str, event: NewEvent, holds: Mapping[str, Hold] | None = None
    ) -> list[Published] | None:
        """Store ``event`` once for each agent subscribed to ``topic`` (by a pattern matching
        it), the subscribers read in the same transaction as the events are written: a
        subscription committed meanwhile gets the event or does not, never half. Each copy keeps
        ``topic`` (``Event.topic``). Each answer is
        as ``append``'s, by agent handle; None: the topic is not declared (nothing stored).
        ``holds``: the rule that may hold the copy of each agent named (by handle) back from
        being pushed, as ``NewEvent.hold``."""

    # What an operator lists and counts

    @abstractmethod
    async def listing_bound(self, query: EventQuery, scan: int) -> Position | None:
        """Where a look at ``scan`` events in the order of a page of ``query`` ends: the
        position of the ``scan``-th event that its agent, times and ``before`` select, read from
        an index (its type and status are not read, nor in one agent's listing its times: they
        are what a narrowed page looks through); None: there are fewer."""

    @abstractmethod
    async def list_events(self, query: EventQuery) -> list[Event]:
        """A page of events of any agents, newest first by ``(created_at, id)`` (of one agent: by
        seq), as ``query`` filters them (``query.before``: those after the previous page's
        last). A walk of pages sees each event that existed when it started once, whatever is
        published meanwhile."""

    @abstractmethod
    async def agent_summaries(
        self,
        agent_id: str | None = None,
        *,
        after: str | None = None,
        search: str | None = None,
        limit: int | None = None,
    ) -> list[AgentSummary]:
        """Every agent (or the one with that id) with its open, unexpired events, its live
        sessions and its last activity, in one query, by handle: those whose handle comes
        after ``after`` and contains ``search``, at most ``limit``. The open events are read
        from the counts in the agent's row, whatever its backlog."""

    @abstractmethod
    async def stats(self, top: int = 10) -> Stats:
        """Counts of the whole store, each read from the agents' rows, a small table or an
        index, never by reading every event or attempt (``Stats``); the ``top`` agents by
        open, unexpired events (agents with none left out)."""

    @abstractmethod
    async def gauges(self) -> Gauges:
        """The open, unexpired events (how many, the oldest), live sessions by transport and
        era and endpoints by kind and state, each from an index or a small table."""

    @abstractmethod
    async def redeliver(self, event_id: str) -> Event | None:
        """Offer a finished event (delivered, expired, dead, sent) or one whose delivery to an
        endpoint was given up on, again, in one transaction: it becomes pending, unleased, its
        time to live starting afresh, the times it was handed out counted from none again, and
        its deliveries to webhook and OpenClaw endpoints that are finished (done or dead) start
        a new series of attempts, due now. Its attempts stay.
        None: no such event.

        Raises:
            Conflict: the event is pending and none of its deliveries was given up on: it is
                being offered already; nothing changes.
        """

    # The journal: what the admin's live feed reads (``herald.feed``)

    @abstractmethod
    async def journal_bounds(self) -> JournalBounds:
        """Where the journal stands now: its head, its ceiling and its pruned horizon."""

    @abstractmethod
    async def read_journal(
        self,
        after: JournalPosition,
        limit: int,
        *,
        inclusive: bool = False,
        agent_id: str | None = None,
        newest: bool = False,
    ) -> JournalPage:
        """The journal's rows after ``after`` (from it, ``inclusive``), oldest first in the
        journal's order (``JournalPosition``), at most ``limit``: only rows that no transaction
        still running can come before, so that a reader that moved past a row never misses one
        committed later. With ``agent_id``, rows of other agents are left out (rows that may
        concern several agents are kept). With ``newest``, the page is the last ``limit`` of
        those rows rather than the first (still oldest first): what a reader that skips ahead
        reads."""

    @abstractmethod
    async def feed_events(
        self, ids: Sequence[str], ranges: Sequence[tuple[str, int, int]]
    ) -> list[EventHead]:
        """What the feed shows of the events with those ids, and of those of each ``(agent_id,
        first_seq, last_seq)``, with their agents' handles; events no longer stored are left
        out."""

    @abstractmethod
    async def agent_handles(self, agent_ids: Sequence[str]) -> dict[str, str]:
        """The handle of each agent still stored, by id."""

    @abstractmethod
    async def prune_journal(self, before_ms: int) -> int:
        """Delete the oldest rows written before the given time, in commit order up to the
        first one written later, always keeping the newest row (positions are never given
        twice); the newest deleted becomes the horizon. Returns how many were deleted."""
