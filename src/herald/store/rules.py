"""The rules every store backend keeps the same way, written once above them: what attempts
claims, takes and acks record, when a cursor is refused, how many events a cursor missed, and
what a batch of finished deliveries does to events, deliveries and endpoints, and who holds an
event pushed more than once in one record. (How a batch of events is stored is in
``herald.store.appends``.)"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, replace

from herald.errors import CursorAhead
from herald.models import (
    Attempt,
    Drained,
    Endpoint,
    Event,
    EventStatus,
    Finished,
    OwedEvents,
    State,
    WebhookSubscription,
)

LEASED = "leased"
DELIVERED = EventStatus.DELIVERED.value
ACK = "ack"
"""The mechanism an acknowledgement is recorded under."""
DEAD_LETTER = "dead_letter"
"""The mechanism an event's death is recorded under (outcome ``dead``, the reason its error)."""
DEAD = EventStatus.DEAD.value
DEAD_REASON = "handed out {} times without an acknowledgement"
"""Why an event died, with how many times it was handed out; PostgreSQL's claim writes the
same text (``queries.CLAIM``)."""


def dying(handed_out: int, max_deliveries: int) -> bool:
    """Whether an event handed out ``handed_out`` times dies rather than be handed out again."""
    return 0 < max_deliveries <= handed_out


def lease_attempts(
    events: Iterable[Event], now: int, mechanism: str, consumer: str
) -> list[Attempt]:
    """A claim records each event it hands out as leased to its consumer, through the way
    that will carry it."""
    return [Attempt(e.id, now, mechanism, LEASED, consumer) for e in events]


def take_attempts(events: Iterable[Event], now: int, mechanism: str, session: str) -> list[Attempt]:
    """A take records each event it hands out as delivered to the session: at most once."""
    return [Attempt(e.id, now, mechanism, DELIVERED, session) for e in events]


def ack_attempts(event_ids: Iterable[str], now: int, consumer: str | None) -> list[Attempt]:
    """An ack records each event it finished as delivered, by whoever acknowledged it."""
    return [Attempt(event_id, now, ACK, DELIVERED, consumer) for event_id in event_ids]


def dead_attempts(
    buried: Iterable[tuple[str, int]], now: int, consumer: str | None
) -> list[Attempt]:
    """A claim records each event that died rather than be handed out again (event id, times
    handed out), with why."""
    return [
        Attempt(event_id, now, DEAD_LETTER, DEAD, consumer, DEAD_REASON.format(handed_out))
        for event_id, handed_out in buried
    ]


def push_holders(pushes: Iterable[tuple[str, Attempt]]) -> dict[tuple[str, str], str | None]:
    """The session that holds each pushed (event id, agent id), once each: the last push of an
    event, as the pushes recorded one after the other would leave it (an UPDATE that meets a
    row twice takes either)."""
    return {(attempt.event_id, agent_id): attempt.session for agent_id, attempt in pushes}


def like_patterns(globs: Iterable[str]) -> list[str]:
    """herald's type globs (``*`` any run, ``?`` one character; event types hold neither ``%``
    nor a backslash) as SQL LIKE patterns."""
    return [g.replace("_", "\\_").replace("*", "%").replace("?", "_") for g in globs]


def check_cursor(cursor: int, newest: int | None) -> None:
    """Raises: CursorAhead: ``cursor`` is past the agent's newest seq (None: no such agent, no
    check)."""
    if newest is not None and cursor > newest:
        raise CursorAhead(cursor, newest)


NO_SEQ_LIMIT = 2**63 - 1
"""The highest seq: the upper bound of a read whose look is not bounded (one the index reads,
where ``:through IS NULL OR seq <= :through`` would read to the end)."""


FirstProbe = Generator[int, tuple[int, int] | None, int | None]
"""A search that yields the seqs it looks at and is sent, for each, the ``(seq, created_at)`` of
the agent's first stored event at that seq or after (None: none), read from the index on the
agent and seq; it returns what it found."""


def first_created_since(after: int, newest: int, floor: int) -> FirstProbe:
    """The first of an agent's seqs after ``after`` (up to ``newest``) created at ``floor`` or
    later, found by halving, in as many reads as the seqs' count has bits: an agent's events are
    stored in the order they are created, so its seqs order their times too (a clock set back
    between two may put one in the wrong half; it is then counted too old, or skipped). None:
    none was."""
    low, high, found = after, newest + 1, None  # the first is after low and before high, or found
    while low + 1 < high:
        middle = (low + high) // 2
        stored = yield middle
        if stored is None or stored[0] >= high:
            high = middle
        elif stored[1] >= floor:
            found, high = stored[0], middle
        else:
            low = stored[0]
    return found


def looked_through(after: int, scan: int, newest: int) -> int:
    """The last seq a bounded look at an agent's events after seq ``after`` reads: ``scan`` seqs
    on, or the agent's ``newest``. Seqs are unique per agent, so the look reads at most ``scan``
    events (open or not) from the index on the agent and seq, however few of them match."""
    return min(after + scan, max(newest, after))


def polled(
    given: int,
    events: list[Event],
    limit: int,
    through: int,
    newest: int,
    unhanded: int | None,
) -> Drained:
    """The answer to a narrowed claim after ``given`` whose look ended at seq ``through``: its
    cursor is the last seq handed out (``given`` if none), as any claim's. When the look stopped
    short of the ``newest`` seq with fewer than ``limit`` events handed, the cursor moves on to
    ``through`` (``more``), so that the next call goes on from there rather than read the same
    events again; but never past ``unhanded``, the first matching event the look met that this
    claim did not hand out (another consumer holds it): that one is offered when it is free,
    not passed. A cursor acknowledges only what its consumer was handed, so moving it on
    acknowledges nothing more."""
    last = events[-1].seq if events else given
    if len(events) >= limit:  # the look stopped at the last one
        return Drained(events, last, looked=last - given)
    looked = through - given
    if through >= newest:
        return Drained(events, last, looked=looked)
    end = through if unhanded is None else unhanded - 1
    return Drained(events, max(end, last), more=end == through, looked=looked)


def first_unhanded(matching: Iterable[int], handed: Sequence[Event]) -> int | None:
    """The first of ``matching`` seqs (oldest first, at least ``len(handed) + 1`` of them when
    there are so many) that is not one of the ``handed`` events."""
    seqs = {event.seq for event in handed}
    return next((seq for seq in matching if seq not in seqs), None)


def missing(last_seq: int, after_seq: int, stored: int, expired: int) -> int:
    """Of an agent's events after ``after_seq``, those that will never be offered: the seqs no
    longer stored (pruned) among the ``last_seq - after_seq`` given since, and the ``expired``
    ones among the ``stored``."""
    return max(last_seq - after_seq - stored, 0) + expired


def event_statuses(finished: Sequence[Finished]) -> list[tuple[str, str]]:
    """What each event of a batch becomes if it is still open, by event id: an event reached by
    two endpoints in one batch becomes delivered if either delivered it."""
    statuses: dict[str, str] = {}
    for item in finished:
        if item.event_status is not None and statuses.get(item.delivery.event_id) != DELIVERED:
            statuses[item.delivery.event_id] = item.event_status
    return sorted(statuses.items())


@dataclass(frozen=True)
class DeliveryUpdate:
    """A delivery after one more attempt: when it is tried next (None: no more), its state and
    the attempt's error."""

    endpoint_id: str
    event_id: str
    next_at: int | None
    state: str
    error: str | None


def delivery_updates(finished: Sequence[Finished]) -> list[DeliveryUpdate]:
    """One update per delivery of a batch (the last attempt decides), by event then endpoint:
    every process updates delivery rows in that order, so two batches cannot deadlock."""
    updates = {
        (item.delivery.event_id, item.delivery.endpoint_id): DeliveryUpdate(
            item.delivery.endpoint_id,
            item.delivery.event_id,
            item.next_at,
            item.state,
            item.attempt.error,
        )
        for item in finished
    }
    return [updates[key] for key in sorted(updates)]


@dataclass(frozen=True)
class EndpointNote:
    """An endpoint's health after a batch of attempts: the last attempt decides."""

    endpoint_id: str
    ok: bool
    error: str | None
    recovered: bool
    """An attempt in the batch succeeded, so a failure after it starts a new failing span."""
    disable_reason: str | None
    disable_failing_since: int | None


def endpoint_notes(finished: Sequence[Finished]) -> list[EndpointNote]:
    """One note per endpoint of a batch, sorted by endpoint id: every process updates endpoint
    rows in that order, so two batches cannot deadlock."""
    notes: dict[str, EndpointNote] = {}
    for item in finished:
        endpoint_id = item.delivery.endpoint_id
        before = notes.get(endpoint_id)
        notes[endpoint_id] = EndpointNote(
            endpoint_id,
            item.endpoint_ok,
            None if item.endpoint_ok else item.attempt.error,
            item.endpoint_ok or (before is not None and before.recovered),
            item.disable_reason or (before.disable_reason if before else None),
            None if item.endpoint_ok else item.disable_failing_since,
        )
    return [notes[key] for key in sorted(notes)]


def refreshed_subscription(
    before: tuple[Endpoint, WebhookSubscription],
    endpoint: Endpoint,
    subscription: WebhookSubscription,
    rotation_until: int,
) -> tuple[Endpoint, WebhookSubscription]:
    """A subscription subscribed to again (SEP-3415's upsert): its new secret signs, the one it
    replaces too until ``rotation_until``; its new expiry; active again (a suspended one's
    failing span starts afresh); its start moves up to the one given, never back; its
    verification is kept, and so is its kind of ``webhook-id`` (a receiver dedupes retries by
    it: it never changes under a subscription)."""
    old_endpoint, old = before
    rotated = old_endpoint.secret != endpoint.secret
    suspended = old_endpoint.state is State.DISABLED
    new_endpoint = replace(
        old_endpoint,
        secret=endpoint.secret,
        previous_secret=old_endpoint.secret if rotated else old_endpoint.previous_secret,
        previous_until=rotation_until if rotated else old_endpoint.previous_until,
        expires_at=endpoint.expires_at,
        state=State.ACTIVE,
        disabled_reason=None,
        failing_since=None if suspended else old_endpoint.failing_since,
    )
    new = replace(
        old,
        after_seq=max(old.after_seq, subscription.after_seq),
        verified_at=old.verified_at or subscription.verified_at,
    )
    return new_endpoint, new


SUSPEND_WINDOW_MINUTES = 60
"""SEP-3415's suspension: over a rolling hour (counted per minute)..."""
SUSPEND_MIN_ATTEMPTS = 100
"""...with at least this many attempts..."""
SUSPEND_FAILING_SHARE = 0.95
"""...of which more than this share failed, a subscription's deliveries are suspended."""
SUSPENDED = "suspended"
"""How a suspended subscription's ``disabled_reason`` begins: a refresh reactivates it."""
MINUTE_MS = 60_000


def minute_counts(finished: Sequence[Finished]) -> list[tuple[str, int, int, int]]:
    """The subscriptions' attempts of a batch, as (subscription id, minute, attempts,
    failures): what their rolling windows add."""
    counts: dict[tuple[str, int], list[int]] = {}
    for item in finished:
        if item.subscription:
            key = (item.delivery.endpoint_id, item.attempt.at // MINUTE_MS)
            tally = counts.setdefault(key, [0, 0])
            tally[0] += 1
            # A receiver asking to wait (Retry-After) delays; it does not fail (SEP-3415).
            tally[1] += not item.endpoint_ok and item.held_until is None
    return [(sub, minute, a, f) for (sub, minute), (a, f) in sorted(counts.items())]


def failing_subscriptions(finished: Sequence[Finished]) -> list[str]:
    """The subscriptions with a failed attempt in the batch: only these may be suspended by it
    (their windows are read; a batch of successes reads none)."""
    return sorted(
        {i.delivery.endpoint_id for i in finished if i.subscription and not i.endpoint_ok}
    )


def window_start(now: int) -> int:
    """The first minute of the rolling window that ends now."""
    return now // MINUTE_MS - SUSPEND_WINDOW_MINUTES + 1


def to_suspend(attempts: int, failures: int) -> bool:
    """Whether a window of ``attempts`` with ``failures`` among them suspends a subscription."""
    return attempts >= SUSPEND_MIN_ATTEMPTS and failures > SUSPEND_FAILING_SHARE * attempts


def suspension_reason(attempts: int, failures: int) -> str:
    return (
        f"{SUSPENDED}: {failures} of its {attempts} deliveries in the last"
        f" {SUSPEND_WINDOW_MINUTES} minutes failed; subscribe again to resume"
    )


def held_subscriptions(finished: Sequence[Finished]) -> list[tuple[str, int]]:
    """The subscriptions a receiver asked to wait in the batch, with the latest moment asked."""
    held: dict[str, int] = {}
    for item in finished:
        if item.subscription and item.held_until is not None:
            endpoint_id = item.delivery.endpoint_id
            held[endpoint_id] = max(held.get(endpoint_id, 0), item.held_until)
    return sorted(held.items())


def owed_events(
    events: Sequence[tuple[int, str]], last_seq: int, limit: int
) -> tuple[OwedEvents, int]:
    """What a subscription owes, from the (seq, id) of its oldest owed events read with
    ``limit``, and how far its start may move up: to just before the oldest (to the agent's
    newest seq when none is owed)."""
    start = events[0][0] - 1 if events else last_seq
    return OwedEvents(tuple(events), last_seq, len(events) < limit), start
