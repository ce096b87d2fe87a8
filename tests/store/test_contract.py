"""The store contract, proven on every backend by the same tests (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

import pytest

from herald import open_store
from herald.errors import Conflict, CursorAhead, NotFound, StoreUnavailable
from herald.ids import new_id
from herald.models import (
    Agent,
    Attempt,
    EventMatch,
    EventStatus,
    NewEvent,
    Published,
    Reply,
    StartPosition,
)
from herald.overview import EventQuery
from herald.store import Store
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio


async def add_agent(store: Store, handle: str) -> Agent:
    agent = Agent(new_id("agt_"), handle, f"hash-{handle}", store.now())
    await store.create_agent(agent)
    return agent


def event(to: str, text: str = "hello", **kwargs: object) -> NewEvent:
    return NewEvent(to=to, type="note", text=text, data_json='{"n":1}', **kwargs)  # type: ignore[arg-type]


async def publish(store: Store, to: str, count: int) -> list[str]:
    published = await store.append([event(to, f"{to}-{n}") for n in range(count)])
    return [p.event.id for p in published]


async def test_seq_is_gapless_and_increasing_per_agent(store: Store) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    for n in range(5):
        await store.append([event("alice", f"a{n}"), event("bob", f"b{n}")])
    for agent in (alice, bob):
        events = await store.read_open(agent.id, 0, 100)
        assert [e.seq for e in events] == [1, 2, 3, 4, 5]
        assert all(e.agent_id == agent.id for e in events)
        assert [e.text[1:] for e in events] == ["0", "1", "2", "3", "4"]


async def test_concurrent_publishers_get_gapless_seq(store_url: str, store: Store) -> None:
    agent = await add_agent(store, "alice")

    def publisher(worker: int) -> None:
        async def run() -> None:
            own = await open_store(store_url)
            try:
                for n in range(25):
                    await own.append([event("alice", f"{worker}-{n}")])
            finally:
                await own.close()

        asyncio.run(run())

    threads = [threading.Thread(target=publisher, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    events = await store.read_open(agent.id, 0, 1000)
    assert [e.seq for e in events] == list(range(1, 101))


async def test_concurrent_publishes_of_one_dedupe_key_store_it_once(
    store_url: str, store: Store
) -> None:
    alice = await add_agent(store, "alice")
    answers: list[list[Published]] = [[] for _ in range(4)]
    barrier = threading.Barrier(4)

    def publisher(worker: int) -> None:
        async def run() -> None:
            own = await open_store(store_url)
            try:
                barrier.wait(timeout=30)
                for n in range(25):
                    new = event("alice", f"{worker}-{n}", dedupe_key=f"k{n}")
                    answers[worker] += await own.append([new])
            finally:
                await own.close()

        asyncio.run(run())

    threads = [threading.Thread(target=publisher, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    together = [event("alice", "again", dedupe_key="k0") for _ in range(5)]
    repeats = await asyncio.gather(*(store.append([new]) for new in together))
    stored = await store.read_open(alice.id, 0, 100)
    assert [e.seq for e in stored] == list(range(1, 26))
    first = {e.dedupe_key: e.id for e in stored}
    for published in answers:
        assert [p.event.id for p in published] == [first[f"k{n}"] for n in range(25)]
    assert sum(p.created for published in answers for p in published) == 25
    assert all(not p.created and p.event.id == first["k0"] for (p,) in repeats)


async def test_a_batch_with_an_unknown_addressee_stores_nothing(store: Store) -> None:
    agent = await add_agent(store, "alice")
    with pytest.raises(NotFound, match="nobody"):
        await store.append([event("alice"), event("nobody"), event("alice")])
    assert await store.read_open(agent.id, 0, 10) == []
    (first,) = await store.append([event("alice")])
    assert first.event.seq == 1


async def test_publish_is_idempotent_on_agent_and_dedupe_key(store: Store) -> None:
    alice = await add_agent(store, "alice")
    await add_agent(store, "bob")
    (first,) = await store.append([event("alice", "one", dedupe_key="k1")])
    (again,) = await store.append([event("alice", "two", dedupe_key="k1")])
    (other,) = await store.append([event("bob", "three", dedupe_key="k1")])
    assert first.created and not again.created and other.created
    assert again.event.id == first.event.id and again.event.text == "one"
    assert other.event.id != first.event.id
    assert [e.text for e in await store.read_open(alice.id, 0, 10)] == ["one"]


async def test_an_append_tells_the_events_it_created_before_it_returns(store: Store) -> None:
    """What follows new events (pushes, streams) is told of them as their commit is made,
    before the publishes are answered; a repeat creates nothing and tells nothing."""
    told: list[list[str]] = []
    store.on_appended = lambda events: told.append([e.text for e in events])
    await add_agent(store, "alice")
    await add_agent(store, "bob")
    await store.append([event("alice", "one", dedupe_key="k"), event("bob", "two")])
    assert told == [["one", "two"]]
    await store.append([event("alice", "again", dedupe_key="k")])
    assert told == [["one", "two"]]
    await store.append([event("alice", "again", dedupe_key="k"), event("alice", "three")])
    assert told == [["one", "two"], ["three"]]


async def test_a_repeated_dedupe_key_inside_one_batch_stores_once(store: Store) -> None:
    alice = await add_agent(store, "alice")
    results = await store.append(
        [event("alice", "a", dedupe_key="x"), event("alice", "b", dedupe_key="x")]
    )
    assert [r.created for r in results] == [True, False]
    assert results[0].event.id == results[1].event.id
    assert len(await store.read_open(alice.id, 0, 10)) == 1


async def test_a_batch_numbers_only_what_it_stores(store: Store) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    (kept,) = await store.append([event("alice", "kept", dedupe_key="old")])
    results = await store.append(
        [
            event("alice", "new1", dedupe_key="k"),
            event("bob", "b1", dedupe_key="k"),
            event("alice", "again", dedupe_key="old"),
            event("alice", "repeat", dedupe_key="k"),
            event("alice", "new2"),
        ]
    )
    assert [r.created for r in results] == [True, True, False, False, True]
    assert results[2].event.id == kept.event.id and results[3].event.id == results[0].event.id
    assert [e.text for e in await store.read_open(alice.id, 0, 10)] == ["kept", "new1", "new2"]
    assert [e.seq for e in await store.read_open(alice.id, 0, 10)] == [1, 2, 3]
    assert [e.seq for e in await store.read_open(bob.id, 0, 10)] == [1]


async def test_keys_of_any_characters_are_found_again_by_a_batch_to_several_agents(
    store: Store,
) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    keys = ['say "hi"', "back\\slash", "two\nlines", "tab\t", "é", "😀", "line-000000001-a", "[]"]
    batch = [event(to, f"{to} {key}", dedupe_key=key) for key in keys for to in ("alice", "bob")]
    first = await store.append(batch)
    again = await store.append(batch[::-1])  # in another order: each finds its own
    assert all(p.created for p in first) and not any(p.created for p in again)
    assert [p.event.id for p in again] == [p.event.id for p in first][::-1]
    assert [e.dedupe_key for e in await store.read_open(alice.id, 0, 100)] == keys
    assert len(await store.read_open(bob.id, 0, 100)) == len(keys)


async def test_ack_up_to_a_cursor_delivers_that_far_and_no_further(store: Store) -> None:
    alice = await add_agent(store, "alice")
    await publish(store, "alice", 5)
    assert await store.ack(alice.id, up_to_seq=3) == 0  # nothing handed to a consumer
    assert await store.ack(alice.id, up_to_seq=3, unheld=True) == 3  # pushed ones, say
    assert [e.seq for e in await store.read_open(alice.id, 0, 10)] == [4, 5]
    assert await store.ack(alice.id, up_to_seq=3, unheld=True) == 0
    first = (await store.read_open(alice.id, 3, 1))[0]
    assert first.status is EventStatus.PENDING


async def test_ack_by_ids_touches_only_the_agents_own_events(store: Store) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    alice_ids = await publish(store, "alice", 2)
    bob_ids = await publish(store, "bob", 2)
    assert await store.ack(alice.id, ids=[alice_ids[1], *bob_ids]) == 1
    assert [e.id for e in await store.read_open(alice.id, 0, 10)] == [alice_ids[0]]
    assert len(await store.read_open(bob.id, 0, 10)) == 2
    delivered = await store.get_event(alice_ids[1])
    assert delivered is not None and delivered.status is EventStatus.DELIVERED


async def test_claims_are_leased_to_one_consumer_and_repeated_for_it(store: Store) -> None:
    alice = await add_agent(store, "alice")
    ids = await publish(store, "alice", 6)
    first = await store.claim(alice.id, "c1", 3, 30_000, "heartbeat")
    assert [e.id for e in first] == ids[:3]
    again = await store.claim(alice.id, "c1", 3, 30_000, "heartbeat")
    assert [e.id for e in again] == ids[:3]
    other = await store.claim(alice.id, "c2", 10, 30_000, "heartbeat")
    assert [e.id for e in other] == ids[3:]
    assert await store.claim(alice.id, "c3", 10, 30_000, "heartbeat") == []


async def test_an_expired_lease_is_offered_again(store: Store, clock: ManualClock) -> None:
    alice = await add_agent(store, "alice")
    ids = await publish(store, "alice", 2)
    assert len(await store.claim(alice.id, "c1", 10, 5_000, "heartbeat")) == 2
    assert await store.claim(alice.id, "c2", 10, 5_000, "heartbeat") == []
    clock.advance(5.001)
    assert [e.id for e in await store.claim(alice.id, "c2", 10, 5_000, "heartbeat")] == ids


async def test_a_cursor_ack_spares_events_another_consumer_holds(store: Store) -> None:
    alice = await add_agent(store, "alice")
    await publish(store, "alice", 4)
    await store.claim(alice.id, "c1", 2, 30_000, "heartbeat")
    await store.claim(alice.id, "c2", 2, 30_000, "heartbeat")
    assert await store.ack(alice.id, up_to_seq=4, consumer="c1") == 2
    assert [e.seq for e in await store.read_open(alice.id, 0, 10)] == [3, 4]
    assert await store.ack(alice.id, up_to_seq=4) == 0  # no consumer: only what nobody holds
    assert await store.ack(alice.id, up_to_seq=4, consumer="c2") == 2


async def test_a_cursor_never_acknowledges_another_consumers_expired_lease(
    store: Store, clock: ManualClock
) -> None:
    alice = await add_agent(store, "alice")
    ids = await publish(store, "alice", 10)
    assert len(await store.claim(alice.id, "c1", 5, 2_000, "heartbeat")) == 5
    assert len(await store.claim(alice.id, "c2", 5, 2_000, "heartbeat")) == 5
    clock.advance(2.5)  # c1 died: its lease ran out
    assert await store.ack(alice.id, up_to_seq=10, consumer="c2") == 5
    assert [e.id for e in await store.read_open(alice.id, 0, 10)] == ids[:5]
    back = await store.claim(alice.id, "c1", 5, 2_000, "heartbeat", ack_up_to=0)
    assert [e.id for e in back] == ids[:5]
    assert await store.ack(alice.id, up_to_seq=5, consumer="c1") == 5


async def test_an_expired_lease_goes_to_the_next_consumer_that_asks(
    store: Store, clock: ManualClock
) -> None:
    alice = await add_agent(store, "alice")
    ids = await publish(store, "alice", 10)
    await store.claim(alice.id, "c1", 5, 2_000, "heartbeat")
    await store.claim(alice.id, "c2", 5, 2_000, "heartbeat")
    clock.advance(2.5)
    again = await store.claim(alice.id, "c2", 5, 2_000, "heartbeat", ack_up_to=10)
    assert [e.id for e in again] == ids[:5]  # offered again, not acknowledged
    assert await store.claim(alice.id, "c1", 5, 2_000, "heartbeat", ack_up_to=0) == []
    assert await store.ack(alice.id, up_to_seq=5, consumer="c2") == 5


async def test_a_cursor_sent_again_after_a_lost_answer_acknowledges_nothing_it_handed_out(
    store: Store, clock: ManualClock
) -> None:
    alice = await add_agent(store, "alice")
    ids = await publish(store, "alice", 10)
    await store.claim(alice.id, "a", 5, 2_000, "heartbeat", ack_up_to=0)  # a dies with 1-5
    await store.claim(alice.id, "b", 5, 2_000, "heartbeat", ack_up_to=0)  # b takes 6-10
    assert await store.claim(alice.id, "b", 5, 2_000, "heartbeat", ack_up_to=10) == []
    clock.advance(2.5)
    lost = await store.claim(alice.id, "b", 5, 2_000, "heartbeat", ack_up_to=10)
    assert [e.id for e in lost] == ids[:5]  # a's expired lease, handed to b: this answer is lost
    again = await store.claim(alice.id, "b", 5, 2_000, "heartbeat", ack_up_to=10)
    assert [e.id for e in again] == ids[:5]  # the same cursor gets the same events
    assert [e.id for e in await store.read_open(alice.id, 0, 10)] == ids[:5]
    assert await store.claim(alice.id, "b", 5, 2_000, "heartbeat", ack_up_to=5) == []
    assert await store.read_open(alice.id, 0, 10) == []


async def test_the_event_at_a_cursor_is_handed_out_in_its_answer_only_alone(
    store: Store, clock: ManualClock
) -> None:
    alice = await add_agent(store, "alice")
    ids = await publish(store, "alice", 3)
    await store.claim(alice.id, "a", 3, 2_000, "heartbeat", ack_up_to=0)
    clock.advance(2.5)  # a's lease on 1-3 ran out; b sends cursor 3 (it held 3 once, say)
    answer = await store.claim(alice.id, "b", 10, 2_000, "heartbeat", ack_up_to=3)
    assert [e.id for e in answer] == ids[:2]
    assert [
        e.id for e in await store.claim(alice.id, "b", 10, 2_000, "heartbeat", ack_up_to=2)
    ] == [ids[2]]
    assert await store.claim(alice.id, "b", 10, 2_000, "heartbeat", ack_up_to=3) == []
    assert await store.read_open(alice.id, 0, 10) == []


async def test_an_event_taken_over_from_a_consumer_at_its_cursor_does_not_stall(
    store: Store, clock: ManualClock
) -> None:
    alice = await add_agent(store, "alice")
    (only,) = await publish(store, "alice", 1)
    assert len(await store.claim(alice.id, "b", 10, 2_000, "heartbeat", ack_up_to=0)) == 1
    clock.advance(2.5)  # b is slow: its lease runs out, a takes the event, and a dies
    assert len(await store.claim(alice.id, "a", 10, 2_000, "heartbeat", ack_up_to=0)) == 1
    clock.advance(2.5)
    back = await store.claim(alice.id, "b", 10, 2_000, "heartbeat", ack_up_to=1)  # b had seen it
    assert [e.id for e in back] == [only]  # alone, at b's cursor: not left to a dead consumer
    assert await store.claim(alice.id, "b", 10, 2_000, "heartbeat", ack_up_to=1) == []
    assert await store.read_open(alice.id, 0, 10) == []


async def test_a_claims_cursor_acknowledges_only_what_its_consumer_was_handed(
    store: Store,
) -> None:
    alice = await add_agent(store, "alice")
    ids = await publish(store, "alice", 4)
    # Event 2 was never handed out (a concurrent claim skipped it, say) when b's cursor passed it.
    await store.claim(alice.id, "b", 1, 30_000, "heartbeat", ack_up_to=0)
    await store.ack(alice.id, ids=[ids[2]])
    assert await store.claim(alice.id, "b", 10, 30_000, "heartbeat", ack_up_to=3) == [
        await store.get_event(ids[1]),
        await store.get_event(ids[3]),
    ]
    assert [e.id for e in await store.read_open(alice.id, 0, 10)] == [ids[1], ids[3]]


async def test_a_cursor_acknowledges_its_own_expired_lease(
    store: Store, clock: ManualClock
) -> None:
    alice = await add_agent(store, "alice")
    await publish(store, "alice", 3)
    await store.claim(alice.id, "c1", 3, 2_000, "heartbeat")
    clock.advance(2.5)
    assert await store.ack(alice.id, up_to_seq=3, consumer="c1") == 3


async def test_a_cursor_ahead_of_the_newest_event_is_refused(store: Store) -> None:
    alice = await add_agent(store, "alice")
    await publish(store, "alice", 3)
    with pytest.raises(CursorAhead, match="seq 3") as refused:
        await store.claim(alice.id, "c1", 10, 30_000, "heartbeat", ack_up_to=999)
    assert refused.value.newest == 3
    with pytest.raises(CursorAhead):
        await store.ack(alice.id, up_to_seq=4)
    # Nothing changed: nothing acknowledged, nothing leased to c1.
    assert len(await store.claim(alice.id, "c2", 10, 30_000, "heartbeat")) == 3
    (later,) = await publish(store, "alice", 1)
    assert [e.id for e in await store.claim(alice.id, "c1", 10, 30_000, "heartbeat")] == [later]


async def test_take_delivers_at_most_once(store: Store) -> None:
    alice = await add_agent(store, "alice")
    ids = await publish(store, "alice", 3)
    taken = await store.take(alice.id, 2, "heartbeat", "default")
    assert [e.id for e in taken] == ids[:2]
    assert all(e.status is EventStatus.DELIVERED for e in taken)
    assert [e.id for e in await store.take(alice.id, 10, "heartbeat", "default")] == ids[2:]
    assert await store.take(alice.id, 10, "heartbeat", "default") == []


async def test_every_attempt_is_recorded(store: Store) -> None:
    alice = await add_agent(store, "alice")
    (event_id,) = await publish(store, "alice", 1)
    await store.claim(alice.id, "c1", 1, 30_000, "heartbeat")
    await store.record_attempts(
        [Attempt(event_id, store.now(), "webhook", "failed", None, "HTTP 500")]
    )
    await store.ack(alice.id, ids=[event_id], consumer="c1")
    attempts = await store.attempts(event_id)
    assert [(a.mechanism, a.outcome) for a in attempts] == [
        ("heartbeat", "leased"),
        ("webhook", "failed"),
        ("ack", "delivered"),
    ]
    assert attempts[0].session == "c1" and attempts[1].error == "HTTP 500"


async def test_an_attempt_names_a_stored_event_and_goes_with_it(
    store: Store, clock: ManualClock
) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    finished, kept = await publish(store, "alice", 2)
    (bobs,) = await publish(store, "bob", 1)
    await store.claim(alice.id, "c1", 1, 30_000, "heartbeat")
    await store.claim(alice.id, "c1", 1, 30_000, "heartbeat", ack_up_to=1)  # finishes the first
    failed = [Attempt(e, store.now(), "webhook", "failed", None, "HTTP 500") for e in (kept, bobs)]
    await store.record_attempts(failed)
    with pytest.raises(StoreUnavailable):  # the whole batch: one of its events is not stored
        await store.record_attempts([*failed, Attempt("evt_none", store.now(), "webhook", "ok")])
    assert len(await store.attempts(kept)) == 2  # its lease, and the first batch's failure

    clock.advance(60)
    assert await store.prune(store.now()) == 1
    assert await store.attempts(finished) == []
    assert [(a.mechanism, a.outcome) for a in await store.attempts(kept)] == [
        ("heartbeat", "leased"),
        ("webhook", "failed"),
    ]
    assert await store.delete_agent(bob.id)
    assert await store.attempts(bobs) == []
    with pytest.raises(StoreUnavailable):
        await store.record_attempts([Attempt(bobs, store.now(), "webhook", "failed")])


async def test_a_take_records_each_event_delivered_to_its_session(store: Store) -> None:
    alice = await add_agent(store, "alice")
    ids = await publish(store, "alice", 2)
    await store.take(alice.id, 10, "inbox", "ses_1")
    for event_id in ids:
        (attempt,) = await store.attempts(event_id)
        assert (attempt.mechanism, attempt.outcome, attempt.session) == (
            "inbox",
            "delivered",
            "ses_1",
        )


async def test_expired_events_are_marked_and_no_longer_offered(
    store: Store, clock: ManualClock
) -> None:
    alice = await add_agent(store, "alice")
    (short,) = await store.append([event("alice", "short", ttl_s=10)])
    (long,) = await store.append([event("alice", "long", ttl_s=100)])
    clock.advance(11)
    assert [e.id for e in await store.read_open(alice.id, 0, 10)] == [long.event.id]
    assert [e.id for e in await store.claim(alice.id, "c", 10, 1000, "heartbeat")] == [
        long.event.id
    ]
    assert await store.expire() == 1
    expired = await store.get_event(short.event.id)
    assert expired is not None and expired.status is EventStatus.EXPIRED
    assert await store.ack(alice.id, ids=[short.event.id]) == 0


async def test_prune_deletes_only_old_finished_events(store: Store, clock: ManualClock) -> None:
    alice = await add_agent(store, "alice")
    ids = await publish(store, "alice", 3)
    await store.ack(alice.id, ids=[ids[0]])
    clock.advance(60)
    await store.ack(alice.id, ids=[ids[1]])
    assert await store.prune(store.now() - 30_000) == 1
    assert await store.get_event(ids[0]) is None
    assert await store.get_event(ids[1]) is not None
    assert await store.get_event(ids[2]) is not None


async def test_eight_concurrent_drainers_share_the_events_without_overlap(
    store_url: str, store: Store
) -> None:
    alice = await add_agent(store, "alice")
    total = 400
    for start in range(0, total, 100):
        await store.append([event("alice", f"e{n}") for n in range(start, start + 100)])
    received: list[list[str]] = [[] for _ in range(8)]
    barrier = threading.Barrier(8)
    all_hold_some = threading.Barrier(8)

    def drainer(index: int) -> None:
        async def run() -> None:
            own = await open_store(store_url)
            try:
                barrier.wait(timeout=30)
                batch = await own.claim(alice.id, f"c{index}", 5, 600_000, "heartbeat")
                # Every drainer holds a batch at once before any acknowledges: side by side for
                # sure, however the threads are scheduled.
                all_hold_some.wait(timeout=30)
                while batch:
                    received[index].extend(e.id for e in batch)
                    await own.ack(alice.id, ids=[e.id for e in batch], consumer=f"c{index}")
                    batch = await own.claim(alice.id, f"c{index}", 5, 600_000, "heartbeat")
            finally:
                await own.close()

        asyncio.run(run())

    threads = [threading.Thread(target=drainer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    counts = Counter(event_id for ids in received for event_id in ids)
    assert len(counts) == total
    assert max(counts.values()) == 1
    assert all(received), "every drainer held a batch"
    assert await store.read_open(alice.id, 0, 10) == []


async def test_handles_are_unique(store: Store) -> None:
    await add_agent(store, "alice")
    with pytest.raises(Conflict, match="alice"):
        await store.create_agent(Agent(new_id("agt_"), "alice", "other-hash", store.now()))


async def test_deleting_an_agent_deletes_its_events(store: Store) -> None:
    alice = await add_agent(store, "alice")
    ids = await publish(store, "alice", 2)
    assert await store.delete_agent(alice.id)
    assert await store.get_event(ids[0]) is None
    assert await store.get_agent(alice.id) is None
    assert not await store.delete_agent(alice.id)


async def test_agents_are_found_by_key_hash_and_listed(store: Store) -> None:
    bob, alice = await add_agent(store, "bob"), await add_agent(store, "alice")
    assert await store.agent_by_key_hash("hash-bob") == bob
    assert await store.agent_by_key_hash("nope") is None
    assert [a.handle for a in await store.list_agents()] == ["alice", "bob"]
    assert alice in await store.list_agents()
    assert await store.agent_by_handle("alice") == alice
    assert await store.agent_by_handle("carol") is None


async def test_a_rotated_key_keeps_working_until_its_grace_ends_by_the_stores_clock(
    store: Store, clock: ManualClock
) -> None:
    alice = await add_agent(store, "alice")
    assert await store.rotate_agent_key(alice.id, "hash-2", store.now() + 10_000)
    rotated = await store.agent_by_key_hash("hash-2")
    assert rotated is not None and rotated.key_hash == "hash-2"
    assert await store.agent_by_key_hash("hash-alice") == rotated
    clock.advance(9.9)
    assert await store.agent_by_key_hash("hash-alice") == rotated
    clock.advance(0.1)
    assert await store.agent_by_key_hash("hash-alice") is None
    assert await store.agent_by_key_hash("hash-2") == rotated


async def test_a_rotation_without_grace_or_during_one_ends_every_earlier_key(
    store: Store,
) -> None:
    alice = await add_agent(store, "alice")
    assert await store.rotate_agent_key(alice.id, "hash-2", store.now() + 60_000)
    assert await store.rotate_agent_key(alice.id, "hash-3", store.now() + 60_000)
    assert await store.agent_by_key_hash("hash-alice") is None, "only one previous key is kept"
    assert await store.agent_by_key_hash("hash-2") is not None
    assert await store.rotate_agent_key(alice.id, "hash-4", None)
    assert await store.agent_by_key_hash("hash-2") is None
    assert await store.agent_by_key_hash("hash-3") is None
    assert await store.agent_by_key_hash("hash-4") is not None
    assert not await store.rotate_agent_key(new_id("agt_"), "hash-5", None)


async def test_a_setting_is_written_once(store: Store) -> None:
    assert await store.get_setting("admin") is None
    assert await store.set_setting_if_absent("admin", "one") == "one"
    assert await store.set_setting_if_absent("admin", "two") == "one"
    assert await store.get_setting("admin") == "one"


async def test_reopening_keeps_the_data_and_reapplies_nothing(store_url: str, store: Store) -> None:
    await add_agent(store, "alice")
    (first,) = await store.append([event("alice")])
    reopened = await open_store(store_url)
    try:
        assert (await reopened.get_event(first.event.id)) == first.event
        (second,) = await reopened.append([event("alice")])
        assert second.event.seq == 2
    finally:
        await reopened.close()


async def test_take_includes_what_the_same_consumer_holds_but_not_others(store: Store) -> None:
    alice = await add_agent(store, "alice")
    ids = await publish(store, "alice", 3)
    await store.claim(alice.id, "mine", 1, 30_000, "heartbeat")
    await store.claim(alice.id, "theirs", 1, 30_000, "heartbeat")
    taken = await store.take(alice.id, 10, "heartbeat", "mine")
    assert [e.id for e in taken] == [ids[0], ids[2]]


async def test_sender_reply_to_and_form_round_trip(store: Store) -> None:
    alice = await add_agent(store, "alice")
    form = '{"type":"object","properties":{"ok":{"type":"boolean"}}}'
    new = NewEvent(
        to="alice", type="dm", text="x", reply_schema_json=form, sender="bob", reply_to="evt_1"
    )
    (published,) = await store.append([new])
    (read,) = await store.read_open(alice.id, 0, 10)
    assert read == published.event == await store.get_event(published.event.id)
    assert read.sender == "bob" and read.reply_to == "evt_1" and read.interactive
    assert read.reply_schema == {"type": "object", "properties": {"ok": {"type": "boolean"}}}


async def test_sent_events_stay_open_until_acknowledged(store: Store, clock: ManualClock) -> None:
    alice = await add_agent(store, "alice")
    ids = await publish(store, "alice", 3)
    await store.ack(alice.id, ids=[ids[2]])
    clock.advance(1)
    assert await store.mark_sent(alice.id, ids) == 2
    assert await store.mark_sent(alice.id, ids) == 0
    sent = await store.get_event(ids[0])
    assert sent is not None and sent.status is EventStatus.SENT and sent.status_at == store.now()
    assert [e.id for e in await store.read_open(alice.id, 0, 10)] == ids[:2]
    assert await store.ack(alice.id, up_to_seq=1, unheld=True) == 1


async def test_overdue_events_are_counted_from_their_last_push(
    store: Store, clock: ManualClock
) -> None:
    alice = await add_agent(store, "alice")
    ids = await publish(store, "alice", 3)
    clock.advance(10)
    await store.mark_sent(alice.id, [ids[0]])
    await store.ack(alice.id, ids=[ids[1]])
    assert await store.count_unread(alice.id, store.now() - 5_000) == 1
    clock.advance(10)
    assert await store.count_unread(alice.id, store.now() - 5_000) == 2


async def test_a_reply_is_stored_with_the_event_that_routes_it(store: Store) -> None:
    alice = await add_agent(store, "alice")
    bob = await add_agent(store, "bob")
    (question,) = await store.append([NewEvent(to="alice", type="q", text="?", sender="bob")])
    reply = Reply("rpl_1", question.event.id, alice.id, "yes", '{"ok":true}', store.now())
    answer = NewEvent(
        to="bob", type="reply", text="yes", sender="alice", reply_to=question.event.id
    )
    stored, routed = await store.add_reply(reply, answer)
    assert routed is not None and routed.event.agent_id == bob.id
    assert stored.routed_event_id == routed.event.id
    app_reply, none = await store.add_reply(
        Reply("rpl_2", question.event.id, alice.id, "b", "{}", store.now()), None
    )
    assert none is None and app_reply.routed_event_id is None
    assert await store.replies(question.event.id) == [stored, app_reply]
    lost = Reply("rpl_3", question.event.id, alice.id, "x", "{}", store.now())
    with pytest.raises(NotFound):
        await store.add_reply(lost, NewEvent(to="gone", type="reply", text="x"))
    assert len(await store.replies(question.event.id)) == 2


async def test_delivery_overrides_are_kept_per_agent(store: Store) -> None:
    alice = await add_agent(store, "alice")
    assert (await store.get_agent(alice.id)).delivery == {}  # type: ignore[union-attr]
    assert await store.set_agent_delivery(alice.id, '{"channel":false}')
    assert (await store.get_agent(alice.id)).delivery == {"channel": False}  # type: ignore[union-attr]
    assert not await store.set_agent_delivery("agt_none", "{}")


async def test_a_failing_publish_among_concurrent_ones_fails_alone(store: Store) -> None:
    alice = await add_agent(store, "alice")
    batches = [[event("alice", f"ok{n}")] if n % 3 else [event("nobody")] for n in range(30)]
    results = await asyncio.gather(*(store.append(b) for b in batches), return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    assert len(failures) == 10 and all(isinstance(f, NotFound) for f in failures)
    stored = await store.read_open(alice.id, 0, 100)
    assert [e.seq for e in stored] == list(range(1, 21))


async def test_a_claim_can_acknowledge_up_to_a_cursor_first(store: Store) -> None:
    alice = await add_agent(store, "alice")
    ids = await publish(store, "alice", 4)
    await store.claim(alice.id, "c1", 2, 30_000, "heartbeat")
    other = await store.claim(alice.id, "c2", 1, 30_000, "heartbeat")
    nxt = await store.claim(alice.id, "c1", 2, 30_000, "heartbeat", ack_up_to=3)
    assert [e.id for e in nxt] == [ids[3]]
    assert [e.id for e in await store.read_open(alice.id, 0, 10)] == [other[0].id, ids[3]]
    attempts = await store.attempts(ids[0])
    assert [(a.mechanism, a.outcome) for a in attempts][-1] == ("ack", "delivered")


async def test_each_committed_acknowledgement_is_told_when_its_events_were_published(
    store: Store, clock: ManualClock
) -> None:
    told: list[list[int]] = []
    store.on_acknowledged = lambda created_at: told.append(sorted(created_at))
    alice = await add_agent(store, "alice")
    first = await publish(store, "alice", 2)
    clock.advance(1)
    await publish(store, "alice", 2)
    published = [e.created_at for e in await store.read_open(alice.id, 0, 10)]
    await store.claim(alice.id, "c", 3, 30_000, "heartbeat")
    assert await store.ack(alice.id, ids=[first[1]]) == 1  # by id
    await store.claim(alice.id, "c", 3, 30_000, "heartbeat", ack_up_to=3)  # a claim's cursor
    assert await store.ack(alice.id, ids=[first[1]]) == 0  # nothing: not told
    with pytest.raises(CursorAhead):
        await store.ack(alice.id, up_to_seq=9, unheld=True)  # refused: not told
    assert await store.ack(alice.id, up_to_seq=4, consumer="c") == 1  # a cursor
    assert told == [[published[1]], [published[0], published[2]], [published[3]]]
    assert published[3] - published[0] == 1000


async def test_history_lost_after_a_cursor_is_counted(store: Store, clock: ManualClock) -> None:
    alice = await add_agent(store, "alice")
    ids = await publish(store, "alice", 3)
    (short,) = await store.append([event("alice", "short", ttl_s=1)])
    await store.ack(alice.id, ids=[ids[0]])
    assert await store.missing_after(alice.id, 0) == 0
    clock.advance(2)
    assert await store.missing_after(alice.id, 0) == 1
    await store.expire()
    assert await store.missing_after(alice.id, 0) == 1
    assert await store.missing_after(alice.id, 4) == 0
    clock.advance(8 * 24 * 3600)
    assert await store.prune(store.now() - 1000) == 2
    assert await store.missing_after(alice.id, 0) == 2
    assert await store.missing_after(alice.id, 1) == 1
    assert await store.missing_after(alice.id, 0, through_seq=3) == 1  # seq 4 is not counted
    assert await store.missing_after(alice.id, 1, through_seq=3) == 0
    assert short.event.seq == 4
    assert (await store.get_agent(alice.id)).last_seq == 4  # type: ignore[union-attr]


async def test_an_inbox_mark_changes_with_every_change_to_the_inbox(
    store: Store, clock: ManualClock
) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    ids = await publish(store, "alice", 2)  # seqs 1 and 2
    assert await store.inbox_marks([alice.id, bob.id]) == {alice.id: (2, 3)}  # bob: empty
    await store.ack(alice.id, ids=[ids[0]])
    await store.append([event("alice", "later", ttl_s=1)])  # seq 3: one gone, one come
    assert await store.inbox_marks([alice.id]) == {alice.id: (2, 5)}
    clock.advance(2)  # it expires
    assert await store.inbox_marks([alice.id]) == {alice.id: (1, 2)}
    assert await store.inbox_marks([]) == {}


def typed(to: str, type_: str, text: str, sender: str | None = None) -> NewEvent:
    return NewEvent(to=to, type=type_, text=text, sender=sender)


async def test_a_match_narrows_what_is_claimed_and_what_its_cursor_acknowledges(
    store: Store,
) -> None:
    alice = await add_agent(store, "alice")
    await store.append(
        [
            typed("alice", "dm.received", "dm from bob", "bob"),
            typed("alice", "build.failed", "red"),
            typed("alice", "dm_read", "underscore is no wildcard"),
            typed("alice", "dm.received", "dm from carol", "carol"),
        ]
    )
    bobs_dms = EventMatch(("dm.*",), "bob")
    claimed = await store.claim(alice.id, "dms", 10, 60_000, "poll", match=bobs_dms)
    assert [e.text for e in claimed] == ["dm from bob"]
    any_dm = EventMatch(("dm?received", "nothing*"))
    assert [
        e.text for e in await store.claim(alice.id, "any", 10, 60_000, "poll", match=any_dm)
    ] == [
        "dm from carol"  # the one from bob is leased to another consumer
    ]
    # Up to seq 4, the matching events handed to this consumer are acknowledged; not the rest.
    await store.claim(alice.id, "dms", 10, 60_000, "poll", ack_up_to=4, match=bobs_dms)
    open_texts = [e.text for e in await store.read_open(alice.id, 0, 10)]
    assert open_texts == ["red", "underscore is no wildcard", "dm from carol"]
    acked = await store.ack(alice.id, up_to_seq=4, unheld=True, match=EventMatch(("build.*",)))
    assert acked == 1
    assert [e.text for e in await store.read_open(alice.id, 0, 10)] == [
        "underscore is no wildcard",
        "dm from carol",
    ]


async def test_a_subscription_starts_before_the_oldest_open_matching_event(
    store: Store, clock: ManualClock
) -> None:
    alice = await add_agent(store, "alice")
    assert await store.start_position(alice.id, EventMatch()) == StartPosition(0, 0, 0)
    await store.append([typed("alice", "old.one", "old")])
    clock.advance(60)
    floor = store.now()
    await store.append([typed("alice", "dm.received", "a"), typed("alice", "old.two", "b")])
    assert await store.start_position(alice.id, EventMatch()) == StartPosition(0, 3, 0)
    assert await store.start_position(alice.id, EventMatch(), floor) == StartPosition(1, 2, 1)
    assert await store.start_position(alice.id, EventMatch(("old.*",)), floor) == StartPosition(
        2, 1, 1
    )
    await store.ack(alice.id, up_to_seq=3, unheld=True)
    assert await store.start_position(alice.id, EventMatch()) == StartPosition(3, 0, 0)
    with pytest.raises(NotFound):
        await store.start_position(new_id("agt_"), EventMatch())


async def test_pushes_of_several_agents_are_recorded_in_one_call(store: Store) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    alices = await publish(store, "alice", 2)
    bobs = await publish(store, "bob", 2)
    await store.ack(alice.id, ids=[alices[1]])
    now = store.now()
    await store.record_pushes(
        [
            (alice.id, Attempt(alices[0], now, "events.stream", "sent", "s1")),
            (alice.id, Attempt(alices[1], now, "events.stream", "sent", "s1")),  # delivered
            (bob.id, Attempt(bobs[0], now, "events.stream", "sent", "s2")),
            (alice.id, Attempt(bobs[1], now, "events.stream", "sent", "s1")),  # not alice's
        ]
    )
    found = [await store.get_event(i) for i in (*alices, *bobs)]
    statuses = [event.status for event in found if event is not None]
    assert statuses == [
        EventStatus.SENT,
        EventStatus.DELIVERED,
        EventStatus.SENT,
        EventStatus.PENDING,
    ]
    assert [a.mechanism for a in await store.attempts(bobs[0])] == ["events.stream"]


async def test_an_event_pushed_twice_in_one_record_is_held_by_the_last_push(
    store: Store,
) -> None:
    alice = await add_agent(store, "alice")
    (pushed,) = await publish(store, "alice", 1)
    now = store.now()
    await store.record_pushes(
        [(alice.id, Attempt(pushed, now, "events.stream", "sent", sub)) for sub in ("a", "b")]
    )
    assert [a.session for a in await store.attempts(pushed)] == ["a", "b"]
    # The cursor of the stream pushed to last acknowledges it, as pushes one after the other
    # would leave it; the other stream's does not.
    assert await store.ack(alice.id, up_to_seq=1, consumer="a") == 0
    assert await store.ack(alice.id, up_to_seq=1, consumer="b") == 1


async def test_a_claim_after_a_seq_leases_only_later_events(store: Store) -> None:
    alice = await add_agent(store, "alice")
    await publish(store, "alice", 4)
    claimed = await store.claim(alice.id, "sub", 10, 60_000, "poll", after=2)
    assert [e.seq for e in claimed] == [3, 4]
    again = await store.claim(alice.id, "sub", 10, 60_000, "poll", ack_up_to=2, after=2)
    assert [e.seq for e in again] == [3, 4]  # a lost answer: the same events, none acknowledged
    assert [e.seq for e in await store.read_open(alice.id, 0, 10)] == [1, 2, 3, 4]


async def test_a_pushed_event_is_acknowledged_by_its_subscriptions_cursor_only(
    store: Store,
) -> None:
    alice = await add_agent(store, "alice")
    first, second, third = await publish(store, "alice", 3)
    held = await store.claim(alice.id, "heartbeat", 1, 60_000, "heartbeat")  # leases the first
    assert [e.id for e in held] == [first]
    now = store.now()
    await store.record_pushes(
        [(alice.id, Attempt(e, now, "events.stream", "sent", "sub-a")) for e in (first, second)]
    )
    # Another subscription's cursor acknowledges nothing it was not handed.
    assert await store.ack(alice.id, up_to_seq=3, consumer="sub-b") == 0
    # Its own does: the second; not the first, which another consumer holds, nor the third.
    assert await store.ack(alice.id, up_to_seq=3, consumer="sub-a") == 1
    assert [e.id for e in await store.read_open(alice.id, 0, 10)] == [first, third]
    # A pushed event stays claimable by others (its lease has ended).
    assert [e.id for e in await store.claim(alice.id, "other", 10, 60_000, "poll")] == [third]


async def test_a_store_keeps_its_history_across_a_reopen(store_url: str, store: Store) -> None:
    """Positions given before a restart stay places in the store: its history is kept (only a
    restore or a store made anew starts another)."""
    history = await store.history()
    assert history.isascii() and history.isalnum() and history == history.lower()
    again = await open_store(store_url)
    try:
        assert await again.history() == history
    finally:
        await again.close()


async def handed_out_and_never_acknowledged(
    store: Store, agent_id: str, cursor: int, times: int
) -> list[str]:
    """A consumer that crashes on the event after ``cursor`` each time: it drains again from the
    same cursor, ``times`` times; the ids handed out each time."""
    handed = []
    for _ in range(times):
        events = await store.claim(agent_id, "c", 1, 30_000, "heartbeat", ack_up_to=cursor)
        handed.append(events[0].id if events else "")
    return handed


async def test_an_event_handed_out_max_deliveries_times_dies_while_the_rest_flow(
    store: Store, clock: ManualClock
) -> None:
    store.max_deliveries = 3
    alice = await add_agent(store, "alice")
    first, poison, third, fourth = await publish(store, "alice", 4)
    (handled,) = await store.claim(alice.id, "c", 1, 30_000, "heartbeat", ack_up_to=0)
    assert handled.id == first
    assert await handed_out_and_never_acknowledged(store, alice.id, handled.seq, 3) == [poison] * 3
    # The fourth time it would be handed out, it dies instead, and the next event is.
    assert await handed_out_and_never_acknowledged(store, alice.id, handled.seq, 1) == [third]
    died = await store.get_event(poison)
    assert died is not None and died.status is EventStatus.DEAD
    assert died.status_at == store.now()
    attempts = await store.attempts(poison)
    assert [(a.mechanism, a.outcome) for a in attempts] == [("heartbeat", "leased")] * 3 + [
        ("dead_letter", "dead")
    ]
    assert attempts[-1].error == "handed out 3 times without an acknowledgement"

    # Offered by no way again: not to another consumer once the leases ran out, not as open.
    clock.advance(60)
    others = await store.claim(alice.id, "other", 10, 30_000, "heartbeat")
    assert [e.id for e in others] == [third, fourth]
    assert poison not in [e.id for e in await store.read_open(alice.id, 0, 10)]
    assert (await store.stats()).events["dead"] == 1
    assert (await store.gauges()).dead == 1
    listed = await store.list_events(EventQuery(status=EventStatus.DEAD))
    assert [e.id for e in listed] == [poison]


async def test_pushes_not_acknowledged_count_and_the_read_that_would_push_again_buries(
    store: Store,
) -> None:
    store.max_deliveries = 3
    alice = await add_agent(store, "alice")
    pushed, replayed, streamed, other = await publish(store, "alice", 4)
    for times in range(1, 4):
        await store.mark_sent(alice.id, [pushed])  # an MCP session's push
        await store.count_handed_out(alice.id, [replayed])  # a stream's replay
        # A stream's push: not counted (its replays are).
        push = Attempt(streamed, store.now(), "events_stream", "sent", "session-1")
        await store.record_pushes([(alice.id, push)])
        if times < 3:
            assert len(await store.read_open(alice.id, 0, 10)) == 4

    # The read that would push them again buries each, and looks again while it found no other.
    assert [e.id for e in await store.read_open(alice.id, 0, 2)] == [streamed, other]
    for dead in (pushed, replayed):
        died = await store.get_event(dead)
        assert died is not None and died.status is EventStatus.DEAD
        death = (await store.attempts(dead))[-1]
        assert (death.mechanism, death.outcome) == ("dead_letter", "dead")
        assert death.error == "handed out 3 times without an acknowledgement"
    assert (await store.stats()).events["dead"] == 2
    claimed = await store.claim(alice.id, "c", 10, 30_000, "heartbeat")
    assert [e.id for e in claimed] == [streamed, other]


async def test_an_event_whose_leases_run_out_dies_whoever_held_it(
    store: Store, clock: ManualClock
) -> None:
    store.max_deliveries = 2
    alice = await add_agent(store, "alice")
    (only,) = await publish(store, "alice", 1)
    for consumer in ("a", "b"):
        assert [e.id for e in await store.claim(alice.id, consumer, 5, 1000, "poll")] == [only]
        clock.advance(2)
    assert await store.claim(alice.id, "a", 5, 1000, "poll") == []
    died = await store.get_event(only)
    assert died is not None and died.status is EventStatus.DEAD


async def test_a_claim_that_leases_some_buries_the_dying_among_them(
    store: Store, clock: ManualClock
) -> None:
    store.max_deliveries = 2
    alice = await add_agent(store, "alice")
    poison, second, third = await publish(store, "alice", 3)
    for consumer in ("a", "b"):  # handed out twice, its leases run out
        assert [e.id for e in await store.claim(alice.id, consumer, 1, 1000, "poll")] == [poison]
        clock.advance(2)
    # One claim hands out the live ones after it and buries it, in the same step.
    claimed = await store.claim(alice.id, "c", 10, 30_000, "heartbeat", ack_up_to=0)
    assert [e.id for e in claimed] == [second, third]
    died = await store.get_event(poison)
    assert died is not None and died.status is EventStatus.DEAD
    death = (await store.attempts(poison))[-1]
    assert (death.mechanism, death.outcome, death.session) == ("dead_letter", "dead", "c")
    assert (await store.stats()).events["dead"] == 1
    assert (await store.stats()).events["pending"] == 2


async def test_a_dead_event_redelivered_is_pending_with_its_count_begun_again(
    store: Store,
) -> None:
    store.max_deliveries = 2
    alice = await add_agent(store, "alice")
    (only,) = await publish(store, "alice", 1)
    assert await handed_out_and_never_acknowledged(store, alice.id, 0, 3) == [only, only, ""]
    redelivered = await store.redeliver(only)
    assert redelivered is not None and redelivered.status is EventStatus.PENDING
    assert (await store.stats()).events["dead"] == 0
    assert await handed_out_and_never_acknowledged(store, alice.id, 0, 3) == [only, only, ""]
    assert (await store.stats()).events["dead"] == 1


async def test_no_limit_hands_an_event_out_for_ever(store: Store) -> None:
    store.max_deliveries = 0
    alice = await add_agent(store, "alice")
    (only,) = await publish(store, "alice", 1)
    assert await handed_out_and_never_acknowledged(store, alice.id, 0, 30) == [only] * 30
    kept = await store.get_event(only)
    assert kept is not None and kept.status is EventStatus.PENDING


async def test_a_dead_event_is_kept_for_the_retention_from_when_it_died(
    store: Store, clock: ManualClock
) -> None:
    store.max_deliveries = 1
    retention_ms = 7 * 86_400_000
    alice = await add_agent(store, "alice")
    (old,) = await publish(store, "alice", 1)
    clock.advance(8 * 86_400)  # published longer ago than the retention, then handed out
    assert await handed_out_and_never_acknowledged(store, alice.id, 0, 2) == [old, ""]
    assert await store.prune(store.now() - retention_ms) == 0
    assert await store.get_event(old) is not None
    clock.advance(7 * 86_400 - 1)
    assert await store.prune(store.now() - retention_ms) == 0
    clock.advance(2)
    assert await store.prune(store.now() - retention_ms) == 1
    assert await store.get_event(old) is None
    assert (await store.stats()).events["dead"] == 0
