"""The journal, written once above the backends: what each transaction's row says (its
``detail``, JSON), built from what the transaction did, and read back.

A row's detail is one JSON object; each key is optional::

    {"published": [[agent_id, first_seq, last_seq], ...],
     "attempts": [{"way", "outcome", "events": [event_id, ...],
                   "session"?, "endpoint"?, "error"?, "next_at"?}, ...],
     "expired": [event_id, ...],
     "endpoints": [{"id", "agent", "kind", "state", "reason"?}, ...],
     "loop_guards": [{"agent", "to", "thread", "limit", "maximum"}, ...]}

(The PostgreSQL store builds the ``published`` of one event alone in SQL, in the statement
that stores it: ``queries.APPEND_ONE``; and the ``attempts`` of a claim in the statement that
makes it: ``queries.CLAIM``.)

A backend says that a transaction wrote a row with ``note_written``; the one that ran it tells
the store's journal listeners once it is committed (``written_in``)."""

from __future__ import annotations

import contextvars
import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from herald.feed import (
    AttemptGroup,
    EndpointChange,
    JournalEntry,
    LoopGuardTrip,
    PublishedRange,
)
from herald.models import Attempt, Event, Finished

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
"""Made once: ``json.dumps`` with options makes an encoder per call, half the cost of the
journal row of a publish."""

_written: contextvars.ContextVar[bool] = contextvars.ContextVar("journal_written", default=False)


def note_written() -> None:
    """The transaction running in this context wrote a journal row."""
    _written.set(True)


def start_watching() -> contextvars.Token[bool]:
    """Watch for ``note_written`` from here on, in this context."""
    return _written.set(False)


def written_in(token: contextvars.Token[bool]) -> bool:
    """Whether a row was written since ``start_watching`` gave ``token``; the watch ends."""
    written = _written.get()
    _written.reset(token)
    return written


@dataclass(frozen=True)
class JournalRecord:
    """A row to insert: when, which operation, the one agent it concerns (or None), what."""

    at: int
    kind: str
    agent_id: str | None
    detail: str


def record(at: int, kind: str, agent_id: str | None, entry: JournalEntry) -> JournalRecord | None:
    """The row for ``entry``; None when it is empty (a transaction that changed nothing the
    feed shows writes no row)."""
    if entry.empty:
        return None
    return JournalRecord(at, kind, agent_id, encode(entry))


def published_alone(at: int, agent_id: str, seq: int) -> JournalRecord:
    """``record`` of a publish of one event (every sequential publish), its detail written
    directly: the same text as ``encode`` makes, without the entry, its range and the encoder's
    walk, which cost such a publish more than the journal row's insert."""
    detail = f'{{"published":[[{_ENCODER.encode(agent_id)},{seq},{seq}]]}}'
    return JournalRecord(at, "append", agent_id, detail)


def one_agent(agent_ids: Iterable[str]) -> str | None:
    """The agent a row concerns, if only one."""
    found = set(agent_ids)
    return found.pop() if len(found) == 1 else None


def published(events: Sequence[Event]) -> tuple[PublishedRange, ...]:
    """Events stored in one transaction, as each agent's runs of consecutive seqs."""
    ranges = []
    by_agent = sorted(events, key=lambda e: (e.agent_id, e.seq))
    for agent_id, of_agent in itertools.groupby(by_agent, key=lambda e: e.agent_id):
        seqs = [e.seq for e in of_agent]
        first = last = seqs[0]
        for seq in seqs[1:]:
            if seq != last + 1:
                ranges.append(PublishedRange(agent_id, first, last))
                first = seq
            last = seq
        ranges.append(PublishedRange(agent_id, first, last))
    return tuple(ranges)


def attempt_groups(attempts: Sequence[Attempt]) -> tuple[AttemptGroup, ...]:
    """Attempts in their order, those in a row that differ only by event made one group."""
    groups = []
    for (way, outcome, session, error), run in itertools.groupby(
        attempts, key=lambda a: (a.mechanism, a.outcome, a.session, a.error)
    ):
        ids = tuple(a.event_id for a in run)
        groups.append(AttemptGroup(way, outcome, ids, session=session, error=error))
    return tuple(groups)


def finished_groups(finished: Sequence[Finished]) -> tuple[AttemptGroup, ...]:
    """A batch of webhook, OpenClaw and subscription attempts, those alike but for their events
    made one group (to one endpoint, with when they are tried again), in the order of each
    group's first: a batch's successes to one endpoint are one group, not one each (the
    journal row of a batch was half made of the same names repeated)."""
    groups: dict[tuple[str, str, str, str | None, int | None], list[str]] = {}
    for item in finished:
        attempt = item.attempt
        key = (attempt.mechanism, attempt.outcome, item.delivery.endpoint_id, attempt.error,
               item.next_at)  # fmt: skip
        groups.setdefault(key, []).append(attempt.event_id)
    return tuple(
        AttemptGroup(
            way, outcome, tuple(ids), endpoint_id=endpoint_id, error=error, next_at=next_at
        )
        for (way, outcome, endpoint_id, error, next_at), ids in groups.items()
    )


@dataclass(frozen=True)
class EndpointLook:
    """An endpoint's state as a transaction saw it before or after its change."""

    id: str
    agent_id: str
    kind: str
    state: str
    failing_since: int | None
    disabled_reason: str | None
    last_error: str | None


def endpoint_changes(
    before: Sequence[EndpointLook], after: Sequence[EndpointLook]
) -> tuple[EndpointChange, ...]:
    """What a batch of attempts did to the endpoints' states, one change each at most: disabled
    (it was active), else failing (it began to fail), else recovered (it failed no longer)."""
    earlier = {look.id: look for look in before}
    changes = []
    for now in after:
        was = earlier.get(now.id)
        if was is None:
            continue
        state: tuple[str, str | None] | None = None
        if was.state == "active" and now.state == "disabled":
            state = ("disabled", now.disabled_reason)
        elif now.state == "active" and was.failing_since is None and now.failing_since:
            state = ("failing", now.last_error)
        elif now.state == "active" and was.failing_since and now.failing_since is None:
            state = ("recovered", None)
        if state is not None:
            changes.append(EndpointChange(now.id, now.agent_id, now.kind, *state))
    return tuple(changes)


def encode(entry: JournalEntry) -> str:
    detail: dict[str, Any] = {}
    if entry.published:
        detail["published"] = [[r.agent_id, r.first_seq, r.last_seq] for r in entry.published]
    if entry.attempts:
        detail["attempts"] = [_group_json(g) for g in entry.attempts]
    if entry.expired:
        detail["expired"] = list(entry.expired)
    if entry.endpoints:
        detail["endpoints"] = [_change_json(c) for c in entry.endpoints]
    if entry.loop_guards:
        detail["loop_guards"] = [
            {"agent": t.agent_id, "to": t.to, "thread": t.thread, "limit": t.limit,
             "maximum": t.maximum}
            for t in entry.loop_guards
        ]  # fmt: skip
    return _ENCODER.encode(detail)


def decode(detail: str) -> JournalEntry:
    found = json.loads(detail)
    return JournalEntry(
        published=tuple(
            PublishedRange(agent_id, int(first), int(last))
            for agent_id, first, last in found.get("published", ())
        ),
        attempts=tuple(
            AttemptGroup(
                g["way"],
                g["outcome"],
                tuple(g["events"]),
                session=g.get("session"),
                endpoint_id=g.get("endpoint"),
                error=g.get("error"),
                next_at=g.get("next_at"),
            )
            for g in found.get("attempts", ())
        ),
        expired=tuple(found.get("expired", ())),
        endpoints=tuple(
            EndpointChange(c["id"], c["agent"], c["kind"], c["state"], c.get("reason"))
            for c in found.get("endpoints", ())
        ),
        loop_guards=tuple(
            LoopGuardTrip(t["agent"], t["to"], t["thread"], t["limit"], int(t["maximum"]))
            for t in found.get("loop_guards", ())
        ),
    )


def _group_json(group: AttemptGroup) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "way": group.way,
        "outcome": group.outcome,
        "events": list(group.event_ids),
    }
    optional = {
        "session": group.session,
        "endpoint": group.endpoint_id,
        "error": group.error,
        "next_at": group.next_at,
    }
    return shown | {name: value for name, value in optional.items() if value is not None}


def _change_json(change: EndpointChange) -> dict[str, Any]:
    shown = {
        "id": change.endpoint_id,
        "agent": change.agent_id,
        "kind": change.kind,
        "state": change.state,
    }
    return shown if change.reason is None else shown | {"reason": change.reason}
