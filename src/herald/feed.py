"""The admin's live feed (``GET /v1/stream``): what happens in herald, as it happens, in one
order across agents, resumable. Plain values: the journal's rows as the store reads them back,
and the feed's items as the route sends them.

The store writes one journal row per transaction that publishes, records attempts or
acknowledgements, expires events or changes an endpoint, in that transaction (``JournalEntry``:
what changed, by name: the events it published as ranges of seqs, the attempts, the events that
expired, the endpoints). The feed reads the rows in one order, the same for every reader (the
commit order on SQLite, the writing transactions' ids on PostgreSQL: ``JournalPosition``), and
turns each into items, one per event or endpoint it names (``herald.hub.feed``).

Each item is one SSE event. Its ``event:`` is its ``kind``; its ``id:`` is its cursor, opaque to
clients (sent back as ``Last-Event-ID``, or ``?after=``, the feed goes on just after it), which
names the history of the store it was given in (``Store.history``): the journal's places are
handed out again after a restore, so an id from another history is no place in this one; its
``data:`` is one JSON object, every kind with ``kind``, ``at`` (ISO 8601, when the store wrote
it) and ``agent`` ({``id``, ``handle``}):

- ``published``: ``event`` ({``id``, ``seq``, ``type``}), an event stored for ``agent``;
- ``attempt``: ``event``, ``way`` (the mechanism: channel, elicitation, stream, log, heartbeat,
  inbox, poll, events.stream, input_required, webhook, openclaw, subscription...),
  ``outcome`` (leased, sent, delivered, failed, undeliverable), ``session`` (the session or
  consumer it went to, or null), ``endpoint`` (the endpoint's id for webhook, OpenClaw and
  subscription ways, else null), ``error`` (or null) and ``next_attempt_at`` (when an endpoint
  tries again, ISO 8601, or null);
- ``acked``: ``event``, ``by`` (the consumer or session that acknowledged it, or null);
- ``expired``: ``event``, whose time to live ran out unacknowledged;
- ``endpoint``: ``endpoint`` ({``id``, ``kind``}), ``state`` (created, deleted, failing,
  recovered, disabled, enabled) and ``reason`` (why it fails or was disabled, or null);
- ``loop_guard``: a message ``agent`` sent to another agent refused by a loop guard
  (``herald.loop_guard``): ``to`` (the addressee's handle), ``thread``, ``limit`` (exchanges or
  per_minute) and ``maximum``; nothing of it was stored;
- ``gap`` (no ``agent``, no ``at``): the cursor sent is older than what the journal keeps
  (its retention is the events'), or from another history of the store (given before a
  restore, or before ids carried their history): ``after`` is that cursor, ``resumes_after``
  where the feed goes on (the oldest item kept), ``message`` says which. Its ``id`` is
  ``resumes_after``.
- ``skipped`` (no ``agent``, no ``at``; only to a client that set ``max_rate``): more happened
  than it asked to be sent; the items after ``after`` up to ``resumes_after`` were left out
  (``message`` says so). Its ``id`` is ``resumes_after``.

An event or agent deleted since (an agent's deletion takes its events) leaves no item.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from herald.cursors import HISTORY
from herald.times import iso_ms

ACK_WAY = "ack"
"""The way an acknowledgement is recorded under (``herald.store.rules.ACK``)."""


@dataclass(frozen=True, order=True)
class JournalPosition:
    """Where a journal row is, in the journal's order: ``tx`` is the writing transaction's id
    on PostgreSQL, which orders the rows although it is not quite the commit order (0 on SQLite,
    whose one writer commits in ``position`` order)."""

    tx: int
    position: int


@dataclass(frozen=True)
class PublishedRange:
    """Events stored for an agent in one transaction: seqs ``first_seq`` to ``last_seq``."""

    agent_id: str
    first_seq: int
    last_seq: int

    @property
    def size(self) -> int:
        return self.last_seq - self.first_seq + 1


@dataclass(frozen=True)
class AttemptGroup:
    """Attempts alike but for their events: one way, one outcome, one session or endpoint."""

    way: str
    outcome: str
    event_ids: tuple[str, ...]
    session: str | None = None
    endpoint_id: str | None = None
    error: str | None = None
    next_at: int | None = None


@dataclass(frozen=True)
class EndpointChange:
    endpoint_id: str
    agent_id: str
    kind: str
    state: str
    """created, deleted, failing, recovered, disabled or enabled."""
    reason: str | None = None


@dataclass(frozen=True)
class LoopGuardTrip:
    """A message between agents that a loop guard refused: ``agent_id`` sent it to ``to``."""

    agent_id: str
    to: str
    thread: str
    limit: str
    maximum: int


@dataclass(frozen=True)
class JournalEntry:
    """What one transaction changed, in the order the feed shows it."""

    published: tuple[PublishedRange, ...] = ()
    attempts: tuple[AttemptGroup, ...] = ()
    expired: tuple[str, ...] = ()
    endpoints: tuple[EndpointChange, ...] = ()
    loop_guards: tuple[LoopGuardTrip, ...] = ()

    @property
    def empty(self) -> bool:
        return not (
            self.published or self.attempts or self.expired or self.endpoints or self.loop_guards
        )

    @property
    def size(self) -> int:
        """How many items the entry makes: one per event or endpoint it names."""
        return (
            sum(r.size for r in self.published)
            + sum(len(g.event_ids) for g in self.attempts)
            + len(self.expired)
            + len(self.endpoints)
            + len(self.loop_guards)
        )

    def items(self, start: int, stop: int) -> Iterator[tuple[int, ItemRef]]:
        """The items from index ``start`` up to ``stop`` (excluded), with their indexes; whole
        ranges and groups before ``start`` are stepped over, not walked."""
        offset = 0
        for published in self.published:
            for seq in _window(published.first_seq, published.size, offset, start, stop):
                yield offset + seq - published.first_seq, PublishedRef(published.agent_id, seq)
            offset += published.size
        for group in self.attempts:
            for index in _window(0, len(group.event_ids), offset, start, stop):
                yield offset + index, AttemptRef(group.event_ids[index], group)
            offset += len(group.event_ids)
        for index in _window(0, len(self.expired), offset, start, stop):
            yield offset + index, ExpiredRef(self.expired[index])
        offset += len(self.expired)
        for index in _window(0, len(self.endpoints), offset, start, stop):
            yield offset + index, self.endpoints[index]
        offset += len(self.endpoints)
        for index in _window(0, len(self.loop_guards), offset, start, stop):
            yield offset + index, self.loop_guards[index]


def _window(first: int, size: int, offset: int, start: int, stop: int) -> range:
    """The values ``first`` to ``first + size - 1`` whose item index (``offset`` for the first)
    is within ``[start, stop)``."""
    low = max(start - offset, 0)
    high = min(stop - offset, size)
    return range(first + low, first + max(high, low))


@dataclass(frozen=True)
class PublishedRef:
    agent_id: str
    seq: int


@dataclass(frozen=True)
class AttemptRef:
    event_id: str
    group: AttemptGroup


@dataclass(frozen=True)
class ExpiredRef:
    event_id: str


ItemRef = PublishedRef | AttemptRef | ExpiredRef | EndpointChange | LoopGuardTrip


@dataclass(frozen=True)
class JournalRow:
    at: JournalPosition
    written_at: int
    """When the store wrote it, in ms since the epoch."""
    kind: str
    """The store operation that wrote it (append, claim, ack, deliveries...): for people."""
    agent_id: str | None
    """The one agent it concerns, or None when it may concern several."""
    entry: JournalEntry


@dataclass(frozen=True)
class JournalPage:
    rows: list[JournalRow]
    end: JournalPosition
    """Where the next read starts when ``rows`` are fewer than asked: every row committed up
    to it was read (or filtered out)."""


@dataclass(frozen=True)
class JournalBounds:
    """Where the journal stands. ``head``: every row committed from now on comes after it, and
    no row committed before. ``ceiling``: no row given so far is after it (a cursor past it
    names another store). ``horizon``: the newest row pruned (None: none ever was)."""

    head: JournalPosition
    ceiling: JournalPosition
    horizon: JournalPosition | None


@dataclass(frozen=True)
class EventHead:
    """What the feed shows of an event: never its text or data."""

    id: str
    agent_id: str
    handle: str
    seq: int
    type: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "seq": self.seq, "type": self.type}


_CURSOR = re.compile(r"(\d{1,20})\.(\d{1,19})(?:\.(\d{1,9}))?")


@dataclass(frozen=True)
class FeedCursor:
    """A place in the feed: just after item ``item`` of the journal row at ``row`` (None: after
    the whole row). Written ``tx.position.item`` (or ``tx.position``)."""

    row: JournalPosition
    item: int | None = None

    @property
    def key(self) -> tuple[int, int, float]:
        """Its order: a whole row after every item of it."""
        return (self.row.tx, self.row.position, float("inf") if self.item is None else self.item)

    def __str__(self) -> str:
        text = f"{self.row.tx}.{self.row.position}"
        return text if self.item is None else f"{text}.{self.item}"

    @classmethod
    def parse(cls, text: str) -> FeedCursor | None:
        """The cursor ``text`` writes, or None if it is not one."""
        found = _CURSOR.fullmatch(text) if text.isascii() else None
        if found is None:
            return None
        tx, position = int(found[1]), int(found[2])
        if tx >= 2**64 or position >= 2**63:  # beyond a transaction id, a BIGINT
            return None
        item = None if found[3] is None else int(found[3])
        return cls(JournalPosition(tx, position), item)


@dataclass(frozen=True)
class FeedResume:
    """Where a client asked the feed to go on from: a place, and the history of the store it
    was given in (None: given before feed ids carried their history). Written
    ``history~tx.position.item``, as ``feed_id`` writes it."""

    cursor: FeedCursor
    history: str | None

    @classmethod
    def parse(cls, text: str) -> FeedResume | None:
        """The place ``text`` writes, or None if it is not one the feed gave."""
        history, separator, place = text.rpartition(HISTORY_SEPARATOR)
        if separator and not HISTORY.fullmatch(history):
            return None
        cursor = FeedCursor.parse(place)
        return None if cursor is None else cls(cursor, history if separator else None)

    def __str__(self) -> str:
        return str(self.cursor) if self.history is None else feed_id(self.history, self.cursor)


HISTORY_SEPARATOR = "~"


def feed_id(history: str, cursor: FeedCursor) -> str:
    """An item's id: its place in the journal, in the store's ``history``."""
    return f"{history}{HISTORY_SEPARATOR}{cursor}"


@dataclass(frozen=True)
class FeedMatch:
    """Which items a feed shows: of one agent (None: every one), of event types matching a
    glob (``*`` any run, ``?`` one character; None: every item, endpoints' included)."""

    agent_id: str | None = None
    type_glob: str | None = None

    def keeps(self, agent_id: str, event: EventHead | None) -> bool:
        if self.agent_id is not None and agent_id != self.agent_id:
            return False
        if self.type_glob is None:
            return True
        return event is not None and fnmatch.fnmatchcase(event.type, self.type_glob)


@dataclass(frozen=True)
class FeedItem:
    """One item of the feed: its SSE event name, id and data (see the module's docstring)."""

    kind: str
    cursor: FeedCursor
    data: dict[str, Any]


def item_data(
    kind: str, written_at: int, agent_id: str, handle: str, **fields: Any
) -> dict[str, Any]:
    return {
        "kind": kind,
        "at": iso_ms(written_at),
        "agent": {"id": agent_id, "handle": handle},
        **fields,
    }
