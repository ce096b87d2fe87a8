"""What an operator sees of a running herald: pages of events across agents, each agent with its
backlog and activity, counts of the whole, and the few of them a metrics scrape reads. Plain
values, read by the store in single queries (``Store.list_events``, ``Store.agent_summaries``,
``Store.stats``, ``Store.gauges``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from herald.models import Agent, Endpoint, EndpointStatus, Event, EventStatus, Kind, SessionRecord
from herald.times import iso_ms

if TYPE_CHECKING:
    from herald import answers


Position = tuple[int, str] | int
"""Where a page of events ends: ``(created_at, id)`` of an event in a listing of every agent, the
event's seq in a listing of one agent."""


def seq_of(position: Position) -> int:
    """The seq of a position in one agent's listing (the caller's query says it is one)."""
    assert isinstance(position, int), "a position in one agent's listing is a seq"
    return position


def moment_of(position: Position) -> tuple[int, str]:
    """The ``(created_at, id)`` of a position in the listing of every agent."""
    assert isinstance(position, tuple), "a position in every agent's listing is (created_at, id)"
    return position


@dataclass(frozen=True)
class SeqRun:
    """A run of one agent's listing, newest first, read from the index on its agent and seq:
    its numbered events (seq above zero), by seq descending, or those not yet numbered (a
    scheduled event's seq is a placeholder below zero until it is due, and stays so if it is
    cancelled first; placeholders go down as events are scheduled, ``store/schedules.py``), by
    seq ascending. ``before``: only the seqs after it in the run's order; ``through``: only
    those no later than it."""

    numbered: bool
    before: int | None = None
    through: int | None = None


def seq_runs(before: int | None, through: int | None) -> list[SeqRun]:
    """The runs one agent's listing reads in turn, given the seq a page starts after
    (``before``) and the seq its look ends at (``through``): first the events not yet numbered,
    which will be numbered after every event there is, then the numbered ones."""
    runs = []
    if before is None or before < 0:
        runs.append(SeqRun(False, before, through if through is not None and through < 0 else None))
    if through is None or through > 0:
        runs.append(SeqRun(True, before if before is not None and before >= 0 else None, through))
    return runs


@dataclass(frozen=True)
class EventQuery:
    """Which events a page lists, newest first. Of every agent: by ``(created_at, id)``, a
    total order across agents (seqs are per agent), so that a page's position is one event's
    ``(created_at, id)``. Of one agent (``agent_id``): by seq, the order its events were
    stored in (those not yet numbered, scheduled, first: ``seq_runs``), so that a page's
    position is one seq, read from the index on the agent and seq.

    ``type`` is an exact type or a glob (``*`` any run of characters, ``?`` one), ``topic`` the
    name or a glob of the topic events were published to (none: direct events too); ``since_ms``
    is inclusive and ``until_ms`` exclusive; ``before``: only events that sort after that
    position (the last event of the page before); ``through``: only events that sort no later
    than that position (where a bounded look ended, ``Store.listing_bound``)."""

    agent_id: str | None = None
    status: EventStatus | None = None
    type: str | None = None
    topic: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    before: Position | None = None
    through: Position | None = None
    limit: int = 50

    @property
    def type_is_glob(self) -> bool:
        return self.type is not None and ("*" in self.type or "?" in self.type)

    @property
    def topic_is_glob(self) -> bool:
        return self.topic is not None and ("*" in self.topic or "?" in self.topic)

    @property
    def narrowed(self) -> bool:
        """Whether some events the indexes give in the page's order may not be listed: those
        of other types, topics or statuses, which a page looks through, and in one agent's listing
        (by seq) those outside ``since`` and ``until``, which are then filters too."""
        by_time = self.since_ms is not None or self.until_ms is not None
        return (
            self.type is not None
            or self.topic is not None
            or self.status is not None
            or (self.agent_id is not None and by_time)
        )

    def looked(self) -> EventQuery:
        """What a narrowed page's look reads (``Store.listing_bound``): this query without the
        filters it looks through (its type, topic and status; in one agent's listing, its times
        too, which no index orders it by)."""
        if self.agent_id is not None:
            return replace(self, type=None, topic=None, status=None, since_ms=None, until_ms=None)
        return replace(self, type=None, topic=None, status=None)

    def runs(self) -> list[SeqRun]:
        """The runs of seqs one agent's listing reads in turn (``seq_runs``)."""
        return seq_runs(
            None if self.before is None else seq_of(self.before),
            None if self.through is None else seq_of(self.through),
        )

    def position(self, last: Event) -> Position:
        """The position of ``last`` in this query's order."""
        return last.seq if self.agent_id is not None else (last.created_at, last.id)


@dataclass(frozen=True)
class EventPage:
    """A page of events, and where its look ended when it was bounded and stopped short of the
    page (``looked_to``: the position of the last event it read; the next page starts after
    it). A page of a narrowed query may so be short, even empty, and still be followed."""

    events: list[Event]
    looked_to: Position | None = None


@dataclass(frozen=True)
class AgentSummary:
    """An agent with its open events, live sessions and last activity, read at one moment.

    ``pending`` is its open (pending or sent), unexpired events: the counts its row keeps, less
    those past their expiry that the upkeep has not marked yet (read from the expiry index).
    ``last_activity_at`` is the newest of its last stored event's (its highest seq's)
    ``created_at`` (its last publish) and its sessions' ``seen_at`` (their last sign of life):
    both read from indexes.
    Acknowledgements are not counted (no index finds an agent's last one cheaply); a session
    gone and events pruned are forgotten."""

    agent: Agent
    pending: int
    live_sessions: int
    last_activity_at: int | None

    def to_json(self) -> answers.AgentSummary:
        last = self.last_activity_at
        return {
            **self.agent.to_json(),
            "pending": self.pending,
            "live_sessions": self.live_sessions,
            "last_activity_at": iso_ms(last) if last is not None else None,
        }


@dataclass(frozen=True)
class Stats:
    """Counts of the whole store, each read from the agents' rows, a small table or an index,
    never by reading every event or attempt: events by status, attempts recorded by mechanism
    and outcome, the agents with the most open events, live sessions by transport and era and
    by client and era, endpoints by kind and state, and the oldest open event."""

    events: dict[str, int]
    """Events stored, by status (kept in each agent's row as they change; scheduled and
    cancelled ones, which no agent's row counts, read from the indexes that hold them alone):
    an event past its expiry counts as pending or sent until the upkeep marks it expired, a few
    seconds later."""
    published: int
    """Events published since the store was made, to the agents it has (pruned ones included):
    the sum of their newest seqs. Read twice, it gives the publish rate in between."""
    attempts_recorded: list[tuple[str, str, int]]
    """Attempts recorded since the store was made, by mechanism and outcome: those pruned with
    their events still count (a store upgraded to keep these counts began from the attempts it
    held then)."""
    top_pending: list[tuple[str, str, int]]
    """(agent id, handle, open events), most first; open: pending or sent, and unexpired."""
    sessions: list[tuple[str, str, int]]
    endpoints: list[tuple[str, str, int]]
    clients: list[tuple[str | None, str, int]]
    """Live sessions by the client's name (None: it gave none) and era."""
    oldest_pending: tuple[str, str, str, int] | None
    """The oldest open, unexpired event: (its id, its agent's id and handle, its
    ``created_at``); None when nothing is open. The oldest of each agent is its first by seq."""

    def to_json(self) -> answers.Stats:
        count, oldest = self.events.get, self.oldest_pending
        return {
            "events": {
                "pending": count(EventStatus.PENDING, 0),
                "sent": count(EventStatus.SENT, 0),
                "delivered": count(EventStatus.DELIVERED, 0),
                "expired": count(EventStatus.EXPIRED, 0),
                "dead": count(EventStatus.DEAD, 0),
                "scheduled": count(EventStatus.SCHEDULED, 0),
                "cancelled": count(EventStatus.CANCELLED, 0),
            },
            "published": self.published,
            "attempts_recorded": [
                {"mechanism": mechanism, "outcome": outcome, "count": n}
                for mechanism, outcome, n in self.attempts_recorded
            ],
            "top_pending": [
                {"id": agent_id, "handle": handle, "pending": n}
                for agent_id, handle, n in self.top_pending
            ],
            "sessions": [
                {"transport": transport, "era": era, "count": n}
                for transport, era, n in self.sessions
            ],
            "endpoints": [
                {"kind": kind, "state": state, "count": n} for kind, state, n in self.endpoints
            ],
            "clients": [
                {"client": client, "era": era, "count": n} for client, era, n in self.clients
            ],
            "oldest_pending": {
                "id": oldest[0],
                "agent": oldest[1],
                "handle": oldest[2],
                "created_at": iso_ms(oldest[3]),
            }
            if oldest is not None
            else None,
        }


@dataclass(frozen=True)
class Gauges:
    """What the store holds now, as every process sharing it sees it, read cheaply enough for
    each metrics scrape: the open events from the agents' counts, the sessions and endpoints from
    their own small tables (``Stats`` counts these two the same way)."""

    read_at: int
    """When it was read, by the store's clock."""
    pending: int
    """Open, unexpired events: pending, or sent and not yet acknowledged."""
    oldest_pending_at: int | None
    """The ``created_at`` of the oldest of them; None when there is none."""
    sessions: list[tuple[str, str, int]]
    """Live sessions by transport and era."""
    endpoints: list[tuple[str, str, int]]
    """Endpoints by kind and state."""
    dead: int = 0
    """Dead events (``EventStatus.DEAD``), kept until retention prunes them."""
    scheduled: int = 0
    """Events scheduled for later (``EventStatus.SCHEDULED``), not yet due."""

    @property
    def oldest_pending_age_s(self) -> float:
        if self.oldest_pending_at is None:
            return 0.0
        return max(self.read_at - self.oldest_pending_at, 0) / 1000


def why_waiting(sessions: Sequence[SessionRecord], endpoints: Sequence[Endpoint]) -> str:
    """Why no way has tried a pending event yet (none of its attempts or deliveries is
    recorded), from its agent's live ``sessions`` and ``endpoints`` now."""
    pushable = sum(1 for session in sessions if session.can_push)
    if pushable:
        said = [f"{_count(pushable, 'live session')} can be pushed to: it goes there next"]
    elif sessions:
        said = [f"{_count(len(sessions), 'live session')}, none that can be pushed to"]
    else:
        said = ["no live session"]
    targets = [e for e in endpoints if e.kind is not Kind.SUBSCRIPTION]
    for target in targets:
        said.append(_target_state(target, pushable > 0))
    if not targets:
        said.append("no webhook, no OpenClaw target")
    if any(e.kind is Kind.SUBSCRIPTION for e in endpoints):
        said.append("no webhook subscription of its agent takes it")
    return (
        "; ".join(said) + ": waiting to be drained (POST /channel/heartbeat, the MCP inbox"
        " tool, events/poll)"
    )


def _target_state(target: Endpoint, pushable: bool) -> str:
    kind = "OpenClaw target" if target.kind is Kind.OPENCLAW else "webhook"
    status = target.status
    if status is EndpointStatus.DISABLED:
        return f"its {kind} is disabled ({target.disabled_reason or 'by the operator'})"
    if status is EndpointStatus.FAILING:
        return f"its {kind} is failing ({target.last_error or 'no answer'})"
    if pushable:
        return f"its {kind} waits while a session can be pushed to (until the ack timeout)"
    return f"its {kind} is to be tried at its next round"


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'' if n == 1 else 's'}"
