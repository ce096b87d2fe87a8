"""The journal half of the store contract, on every backend: each transaction that the feed
shows writes one row naming what it changed, rows are read back in commit order, and pruning
keeps a horizon."""

from __future__ import annotations

import pytest

from herald.feed import (
    AttemptGroup,
    EndpointChange,
    JournalEntry,
    JournalPosition,
    JournalRow,
    PublishedRange,
)
from herald.ids import new_id
from herald.models import Agent, Attempt, Endpoint, Finished, Kind, NewEvent, State
from herald.store import Store
from herald.store.journal import decode, published_alone, record
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio


async def add_agent(store: Store, handle: str) -> Agent:
    agent = Agent(new_id("agt_"), handle, f"hash-{handle}", store.now())
    await store.create_agent(agent)
    return agent


def event(to: str, **fields: object) -> NewEvent:
    return NewEvent(to=to, type="note", text="hello", **fields)  # type: ignore[arg-type]


async def rows_after(store: Store, after: JournalPosition) -> list[JournalRow]:
    page = await store.read_journal(after, 1000)
    return page.rows


async def head(store: Store) -> JournalPosition:
    return (await store.journal_bounds()).head


async def test_a_publish_writes_one_row_naming_its_events_and_a_repeat_writes_none(
    store: Store,
) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    start = await head(store)
    await store.append([event("alice", dedupe_key="k")])
    await store.append([event("alice"), event("bob"), event("alice")])
    await store.append([event("alice", dedupe_key="k")])  # a repeat: nothing new
    one, batch = await rows_after(store, start)
    assert (one.kind, one.agent_id) == ("append", alice.id)
    assert one.entry == JournalEntry(published=(PublishedRange(alice.id, 1, 1),))
    assert batch.agent_id is None  # two agents
    assert set(batch.entry.published) == {
        PublishedRange(alice.id, 2, 3),
        PublishedRange(bob.id, 1, 1),
    }
    assert one.at < batch.at


async def test_each_lone_publish_of_one_event_writes_a_row_naming_its_seq(store: Store) -> None:
    alice = await add_agent(store, "alice")
    start = await head(store)
    first = await store.append([event("alice")])
    second = await store.append([event("alice")])
    rows = await rows_after(store, start)
    assert [(row.kind, row.agent_id) for row in rows] == [("append", alice.id)] * 2
    assert [row.entry for row in rows] == [
        JournalEntry(published=(PublishedRange(alice.id, 1, 1),)),
        JournalEntry(published=(PublishedRange(alice.id, 2, 2),)),
    ]
    assert [p.event.seq for p in (*first, *second)] == [1, 2]


async def test_drains_acks_and_pushes_write_their_attempts_one_row_each(store: Store) -> None:
    alice = await add_agent(store, "alice")
    ids = [p.event.id for p in await store.append([event("alice") for _ in range(3)])]
    start = await head(store)
    await store.claim(alice.id, "c", 2, 60_000, "heartbeat")
    await store.claim(alice.id, "c", 2, 60_000, "heartbeat", ack_up_to=2)
    await store.ack(alice.id, ids=[ids[2]], consumer="reader")
    await store.claim(alice.id, "c", 2, 60_000, "heartbeat")  # nothing left: no row
    claimed, acked_and_leased, acked = await rows_after(store, start)
    assert claimed.kind == "claim" and claimed.entry == JournalEntry(
        attempts=(AttemptGroup("heartbeat", "leased", tuple(ids[:2]), session="c"),)
    )
    assert acked_and_leased.entry.attempts == (
        AttemptGroup("ack", "delivered", tuple(ids[:2]), session="c"),
        AttemptGroup("heartbeat", "leased", (ids[2],), session="c"),
    )
    assert (acked.kind, acked.agent_id) == ("ack", alice.id)
    assert acked.entry.attempts == (AttemptGroup("ack", "delivered", (ids[2],), session="reader"),)
    bob = await add_agent(store, "bob")
    (bobs,) = [p.event.id for p in await store.append([event("bob")])]
    start = await head(store)
    await store.take(bob.id, 5, "heartbeat", "s1")
    await store.record_attempts([Attempt(bobs, store.now(), "channel", "failed", "s2", "gone")])
    await store.record_pushes([(bob.id, Attempt(bobs, store.now(), "events.stream", "sent", "s3"))])
    taken, recorded, pushed = await rows_after(store, start)
    assert taken.entry.attempts == (AttemptGroup("heartbeat", "delivered", (bobs,), session="s1"),)
    assert recorded.agent_id is None  # attempts alone do not say whose events they are
    assert recorded.entry.attempts == (
        AttemptGroup("channel", "failed", (bobs,), session="s2", error="gone"),
    )
    assert (pushed.kind, pushed.agent_id) == ("pushes", bob.id)


async def test_expiry_and_endpoint_changes_are_journaled(store: Store, clock: ManualClock) -> None:
    alice = await add_agent(store, "alice")
    (short,) = [p.event.id for p in await store.append([event("alice", ttl_s=1)])]
    endpoint = Endpoint(
        new_id("end_"), alice.id, Kind.WEBHOOK, "https://example.com/hook", "whsec_x", store.now()
    )
    start = await head(store)
    await store.put_endpoint(endpoint)
    clock.advance(2)
    assert await store.expire() == 1
    assert await store.expire() == 0  # nothing expired: no row
    (publish_row,) = await store.append([event("alice")])
    await store.schedule_deliveries(store.now(), 10)
    ((delivery, *_),) = await store.claim_deliveries("w", 10, 60_000)
    failed = Attempt(delivery.event_id, store.now(), "webhook", "undeliverable", endpoint.id, "410")
    await store.finish_deliveries(
        [Finished(delivery, failed, None, None, endpoint_ok=False, disable_reason="HTTP 410")]
    )
    assert await store.enable_endpoint(endpoint.id, "HTTP 410")
    assert await store.delete_endpoint(alice.id, "webhook")
    assert not await store.delete_endpoint(alice.id, "webhook")  # none: no row
    rows = await rows_after(store, start)
    assert [row.kind for row in rows] == [
        "endpoint",
        "expire",
        "append",
        "deliveries",
        "endpoint",
        "endpoint",
    ]
    created, expired, _, finished, enabled, deleted = rows
    assert created.entry.endpoints == (EndpointChange(endpoint.id, alice.id, "webhook", "created"),)
    assert expired.entry == JournalEntry(expired=(short,))
    assert finished.entry == JournalEntry(
        attempts=(
            AttemptGroup(
                "webhook",
                "undeliverable",
                (publish_row.event.id,),
                endpoint_id=endpoint.id,
                error="410",
            ),
        ),
        endpoints=(EndpointChange(endpoint.id, alice.id, "webhook", "disabled", "HTTP 410"),),
    )
    assert enabled.entry.endpoints[0].state == "enabled"
    assert deleted.entry.endpoints[0].state == "deleted"


async def test_a_batch_of_deliveries_to_one_endpoint_is_journaled_as_one_group(
    store: Store,
) -> None:
    alice = await add_agent(store, "alice")
    endpoint = Endpoint(
        new_id("end_"), alice.id, Kind.WEBHOOK, "https://example.com/hook", "whsec_x", store.now()
    )
    await store.put_endpoint(endpoint)
    published = await store.append([event("alice") for _ in range(3)])
    await store.schedule_deliveries(store.now(), 10)
    claimed = await store.claim_deliveries("w", 10, 60_000)
    start = await head(store)
    await store.finish_deliveries(
        [
            Finished(
                delivery,
                Attempt(delivery.event_id, store.now(), "webhook", "delivered", endpoint.id),
                None,
                "delivered",
                endpoint_ok=True,
            )
            for delivery, *_ in claimed
        ]
    )
    (row,) = await rows_after(store, start)
    ids = tuple(p.event.id for p in published)
    assert row.entry.attempts == (
        AttemptGroup("webhook", "delivered", ids, endpoint_id=endpoint.id),
    )


async def test_an_endpoint_that_begins_to_fail_and_recovers_is_journaled_once_each(
    store: Store,
) -> None:
    alice = await add_agent(store, "alice")
    endpoint = Endpoint(
        new_id("end_"), alice.id, Kind.WEBHOOK, "https://example.com/hook", "whsec_x", store.now()
    )
    await store.put_endpoint(endpoint)
    await store.append([event("alice") for _ in range(3)])
    await store.schedule_deliveries(store.now(), 10)
    start = await head(store)
    for outcome in ("failed", "failed", "delivered"):
        ((delivery, *_), *_) = await store.claim_deliveries("w", 1, 60_000)
        ok = outcome == "delivered"
        attempt = Attempt(delivery.event_id, store.now(), "webhook", outcome, endpoint.id)
        next_at = None if ok else store.now() + 60_000
        status = "delivered" if ok else None
        await store.finish_deliveries([Finished(delivery, attempt, next_at, status, ok)])
    rows = await rows_after(store, start)
    changes = [change.state for row in rows for change in row.entry.endpoints]
    assert changes == ["failing", "recovered"]
    next_attempts = [group.next_at for row in rows for group in row.entry.attempts]
    assert next_attempts[:2] != [None, None] and next_attempts[2] is None


async def test_an_endpoint_refusing_for_good_is_journaled_disabled_whatever_follows_in_the_batch(
    store: Store,
) -> None:
    alice = await add_agent(store, "alice")
    endpoint = Endpoint(
        new_id("end_"), alice.id, Kind.WEBHOOK, "https://example.com/hook", "whsec_x", store.now()
    )
    await store.put_endpoint(endpoint)
    await store.append([event("alice") for _ in range(2)])
    await store.schedule_deliveries(store.now(), 10)
    first, second = [item[0] for item in await store.claim_deliveries("w", 10, 60_000)]
    start = await head(store)
    # 410 Gone, then (a request that was in flight at the same time) a success: one batch.
    gone = Attempt(first.event_id, store.now(), "webhook", "undeliverable", endpoint.id, "410")
    ok = Attempt(second.event_id, store.now(), "webhook", "delivered", endpoint.id)
    await store.finish_deliveries(
        [
            Finished(first, gone, None, None, endpoint_ok=False, disable_reason="HTTP 410"),
            Finished(second, ok, None, "delivered", endpoint_ok=True),
        ]
    )
    (disabled,) = await store.endpoints(alice.id)
    assert disabled.state is State.DISABLED and disabled.disabled_reason == "HTTP 410"
    (row,) = await rows_after(store, start)
    assert row.entry.endpoints == (
        EndpointChange(endpoint.id, alice.id, "webhook", "disabled", "HTTP 410"),
    )


async def test_rows_are_read_in_pages_from_a_position_and_narrowed_to_an_agent(
    store: Store,
) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    start = await head(store)
    for _ in range(3):
        await store.append([event("alice")])
        await store.append([event("bob")])
    await store.append([event("alice"), event("bob")])
    every = await rows_after(store, start)
    assert len(every) == 7 and [row.at for row in every] == sorted(row.at for row in every)
    first = await store.read_journal(start, 4)
    rest = await store.read_journal(first.rows[-1].at, 4)
    assert first.rows + rest.rows == every
    assert rest.end >= every[-1].at  # every row up to the end was read
    again = await store.read_journal(every[2].at, 1, inclusive=True)
    assert again.rows == [every[2]]
    of_alice = await store.read_journal(start, 100, agent_id=alice.id)
    assert [row.agent_id for row in of_alice.rows] == [alice.id] * 3 + [None]
    assert bob.id not in {row.agent_id for row in of_alice.rows}


async def test_the_journal_listeners_hear_each_commit_that_wrote_a_row(store: Store) -> None:
    heard: list[str] = []
    store.add_journal_listener(lambda: heard.append("row"))
    alice = await add_agent(store, "alice")
    assert heard == []
    await store.append([event("alice")])
    assert heard == ["row"]
    await store.claim(alice.id, "c", 5, 60_000, "inbox")
    await store.claim(alice.id, "c", 5, 60_000, "inbox", ack_up_to=1)
    await store.claim(alice.id, "c", 5, 60_000, "inbox", ack_up_to=1)  # nothing changes
    assert heard == ["row"] * 3


async def test_events_the_rows_name_are_read_with_their_agents_handles(store: Store) -> None:
    alice = await add_agent(store, "alice")
    ids = [p.event.id for p in await store.append([event("alice") for _ in range(3)])]
    heads = await store.feed_events([ids[0], "evt_nothing"], [(alice.id, 2, 3), (alice.id, 9, 9)])
    assert sorted((h.id, h.handle, h.seq, h.type) for h in heads) == [
        (ids[0], "alice", 1, "note"),
        (ids[1], "alice", 2, "note"),
        (ids[2], "alice", 3, "note"),
    ]
    assert await store.agent_handles([alice.id, "agt_gone"]) == {alice.id: "alice"}


async def test_pruning_deletes_the_oldest_rows_keeps_the_newest_and_notes_the_horizon(
    store: Store, clock: ManualClock
) -> None:
    await add_agent(store, "alice")
    start = await head(store)
    for _ in range(3):
        await store.append([event("alice")])
    old = await rows_after(store, start)
    assert (await store.journal_bounds()).horizon is None
    clock.advance(10)
    await store.append([event("alice")])
    assert await store.prune_journal(store.now() - 5_000) == 3
    bounds = await store.journal_bounds()
    assert bounds.horizon == old[-1].at
    (kept,) = await rows_after(store, start)
    clock.advance(10)
    assert await store.prune_journal(store.now()) == 0  # the newest row stays
    await store.append([event("alice")])
    (_, newest) = await rows_after(store, start)
    assert newest.at > kept.at  # no position is given twice
    assert await store.prune_journal(store.now() - 5_000) == 1
    assert (await store.journal_bounds()).horizon == kept.at


@pytest.mark.parametrize(
    "agent_id", ["agt_01J0000000000000000000000", 'agt_"quoted"\\', "agt_ünï\n"]
)
def test_the_row_of_a_lone_publish_is_the_one_its_entry_makes(agent_id: str) -> None:
    entry = JournalEntry(published=(PublishedRange(agent_id, 7, 7),))
    assert published_alone(5, agent_id, 7) == record(5, "append", agent_id, entry)
    assert decode(published_alone(5, agent_id, 7).detail) == entry
