"""The store's rules, written once above the backends: pure functions, tested without a store."""

from __future__ import annotations

import pytest

from herald.errors import CursorAhead, NotFound
from herald.models import Attempt, Delivery, Event, EventStatus, Finished, NewEvent
from herald.store.appends import (
    dedupe_keys,
    first_seqs,
    plan_append,
    unknown_addressee,
)
from herald.store.rules import (
    ack_attempts,
    check_cursor,
    delivery_updates,
    endpoint_notes,
    event_statuses,
    first_created_since,
    lease_attempts,
    missing,
    take_attempts,
)

AGENTS = {"alice": "agt_a", "bob": "agt_b"}


def new(to: str, text: str, key: str | None = None) -> NewEvent:
    return NewEvent(to=to, type="t", text=text, dedupe_key=key)


def stored(agent_id: str, seq: int, key: str | None = None) -> Event:
    return Event(
        f"evt_{agent_id}_{seq}", agent_id, seq, "t", "x", "null", 1, EventStatus.PENDING, key
    )


# Appending a batch


def test_a_key_repeated_in_a_batch_is_stored_once_and_answers_its_repeats() -> None:
    batch = [new("alice", "a", "k"), new("alice", "b", "k"), new("bob", "c", "k")]
    plan = plan_append(batch, AGENTS, stored_keys=set())
    assert plan.fresh == [(0, "agt_a"), (2, "agt_b")]
    assert plan.repeats == {1: ("agt_a", "k")}
    events = plan.numbered(batch, {"agt_a": 1, "agt_b": 1}, [10, 10, 10])
    answers = plan.answers(events, {})
    assert [a.created for a in answers] == [True, False, True]
    assert answers[1].event is answers[0].event and answers[0].event.text == "a"


def test_a_key_already_stored_is_answered_with_the_stored_event() -> None:
    earlier = stored("agt_a", 7, "k")
    batch = [new("alice", "again", "k"), new("alice", "fresh")]
    plan = plan_append(batch, AGENTS, {("agt_a", "k"): earlier})
    assert plan.added == {"agt_a": 1}
    events = plan.numbered(batch, {"agt_a": 8}, [10, 10])
    answers = plan.answers(events, {("agt_a", "k"): earlier})
    assert answers[0].event is earlier and not answers[0].created
    assert (answers[1].event.seq, answers[1].created) == (8, True)


def test_seqs_follow_batch_order_per_agent_from_the_first_reserved() -> None:
    batch = [new("alice", "a1"), new("bob", "b1"), new("alice", "a2"), new("alice", "a3")]
    plan = plan_append(batch, AGENTS, set())
    assert plan.added == {"agt_a": 3, "agt_b": 1}
    first = first_seqs({"agt_a": 13, "agt_b": 1}, plan.added)
    assert first == {"agt_a": 11, "agt_b": 1}
    events = plan.numbered(batch, first, [5, 6, 7, 8])
    assert [(e.agent_id, e.seq, e.text, e.created_at) for e in events] == [
        ("agt_a", 11, "a1", 5),
        ("agt_b", 1, "b1", 6),
        ("agt_a", 12, "a2", 7),
        ("agt_a", 13, "a3", 8),
    ]


def test_dedupe_keys_pair_each_key_with_its_agent() -> None:
    assert dedupe_keys([new("alice", "a", "k"), new("bob", "b")], AGENTS) == [("agt_a", "k"), None]


def test_the_first_unknown_addressee_is_named() -> None:
    error = unknown_addressee([new("alice", "a"), new("carol", "c"), new("dave", "d")], AGENTS)
    assert isinstance(error, NotFound) and "'carol'" in str(error)
    assert unknown_addressee([new("bob", "b")], AGENTS) is None


# Attempts, cursors, missing events


def test_claims_takes_and_acks_record_their_attempts() -> None:
    events = [stored("agt_a", 1), stored("agt_a", 2)]
    assert lease_attempts(events, 5, "heartbeat", "c1") == [
        Attempt(events[0].id, 5, "heartbeat", "leased", "c1"),
        Attempt(events[1].id, 5, "heartbeat", "leased", "c1"),
    ]
    assert take_attempts(events[:1], 6, "inbox", "ses_1") == [
        Attempt(events[0].id, 6, "inbox", "delivered", "ses_1")
    ]
    assert ack_attempts(["evt_1"], 7, None) == [Attempt("evt_1", 7, "ack", "delivered", None)]


def test_a_cursor_past_the_newest_seq_is_refused() -> None:
    check_cursor(5, 5)
    check_cursor(9, None)  # no such agent: nothing to check against
    with pytest.raises(CursorAhead):
        check_cursor(6, 5)


def test_missing_events_are_the_pruned_seqs_and_the_expired_ones() -> None:
    assert missing(last_seq=10, after_seq=4, stored=6, expired=0) == 0
    assert missing(last_seq=10, after_seq=4, stored=4, expired=1) == 3
    assert missing(last_seq=10, after_seq=12, stored=0, expired=0) == 0


# A batch of finished deliveries


def finished(
    endpoint_id: str, event_id: str, ok: bool, status: str | None, next_at: int | None = None
) -> Finished:
    delivery = Delivery(endpoint_id, event_id, 0, 0, "waiting")
    attempt = Attempt(event_id, 1, "webhook", "delivered" if ok else "failed", endpoint_id,
                      None if ok else f"HTTP 500 at {endpoint_id}")  # fmt: skip
    return Finished(delivery, attempt, next_at, status, endpoint_ok=ok)


def test_an_event_delivered_by_either_endpoint_of_a_batch_is_delivered() -> None:
    batch = [
        finished("end_b", "evt_2", True, "sent"),
        finished("end_a", "evt_2", True, "delivered"),
        finished("end_b", "evt_1", True, "delivered"),
        finished("end_a", "evt_1", True, "sent"),
        finished("end_a", "evt_3", False, None, next_at=9),
    ]
    assert event_statuses(batch) == [("evt_1", "delivered"), ("evt_2", "delivered")]


def test_each_delivery_is_updated_once_by_its_last_attempt_in_event_order() -> None:
    batch = [
        finished("end_b", "evt_2", False, None, next_at=9),
        finished("end_a", "evt_1", True, "delivered"),
        finished("end_b", "evt_2", True, "delivered"),
        finished("end_a", "evt_2", False, None),
    ]
    assert [(u.event_id, u.endpoint_id, u.state, u.error) for u in delivery_updates(batch)] == [
        ("evt_1", "end_a", "done", None),
        ("evt_2", "end_a", "dead", "HTTP 500 at end_a"),
        ("evt_2", "end_b", "done", None),
    ]


def test_endpoint_notes_take_the_last_attempt_and_remember_a_recovery() -> None:
    batch = [
        finished("end_b", "evt_1", False, None, next_at=9),
        finished("end_a", "evt_1", True, "delivered"),
        finished("end_a", "evt_2", False, None, next_at=9),
    ]
    notes = endpoint_notes(batch)
    assert [(n.endpoint_id, n.ok, n.recovered, n.error) for n in notes] == [
        ("end_a", False, True, "HTTP 500 at end_a"),
        ("end_b", False, False, "HTTP 500 at end_b"),
    ]


def first_since(
    stored: dict[int, int], after: int, newest: int, floor: int
) -> tuple[int | None, int]:
    """What ``first_created_since`` finds among ``stored`` (seq: created_at), and how many
    reads it made, each as the stores read it: the first event at a seq or after."""
    search, reads = first_created_since(after, newest, floor), 0
    try:
        seq = next(search)
        while True:
            reads += 1
            at = min((s for s in stored if s >= seq), default=None)
            seq = search.send(None if at is None else (at, stored[at]))
    except StopIteration as done:
        return done.value, reads


def test_the_first_seq_created_since_a_time_is_found_by_halving_past_pruned_seqs() -> None:
    stored = {seq: 1_000 + seq for seq in range(1, 100_001) if not 40_000 < seq < 60_000}
    assert first_since(stored, 0, 100_000, 1_000 + 50_000) == (60_000, 17)
    assert first_since(stored, 0, 100_000, 1_000 + 30_000)[0] == 30_000
    assert first_since(stored, 70_000, 100_000, 1_000 + 30_000)[0] == 70_001
    assert first_since(stored, 0, 100_000, 1_000 + 200_000)[0] is None
    assert first_since({}, 0, 0, 0) == (None, 0)
