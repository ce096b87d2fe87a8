"""The webhook-subscription part of the store contract, on every backend: an agent has many, each
scheduled only the events it matches after its start, refreshed in place, expired with its
deliveries, and its cursor a safe watermark."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import asyncpg
import pytest

from herald.errors import LimitReached
from herald.ids import new_id
from herald.models import (
    Agent,
    Attempt,
    Delivery,
    Endpoint,
    EventStatus,
    Finished,
    Kind,
    NewEvent,
    State,
    WebhookSubscription,
)
from herald.store import Store, open_store
from herald.store.rules import SUSPENDED
from herald.testing import ManualClock
from tests.waiting import until

pytestmark = pytest.mark.anyio

SECRET = "whsec_" + "A" * 32


async def agent_of(store: Store, handle: str = "alice") -> Agent:
    agent = Agent(new_id("agt_"), handle, f"hash-{handle}", store.now())
    await store.create_agent(agent)
    return agent


def subscription(
    store: Store,
    agent: Agent,
    number: int,
    *,
    types: tuple[str, ...] = (),
    sender: str | None = None,
    after_seq: int = 0,
    secret: str = SECRET,
    expires_at: int | None = None,
) -> tuple[Endpoint, WebhookSubscription]:
    sub_id = f"sub_{number:016x}"
    endpoint = Endpoint(
        sub_id,
        agent.id,
        Kind.SUBSCRIPTION,
        f"https://example.com/{number}",
        secret,
        store.now(),
        expires_at=expires_at,
    )
    record = WebhookSubscription(
        sub_id, agent.id, "herald.event", "{}", json.dumps(list(types)), sender, after_seq
    )
    return endpoint, record


async def publish(store: Store, to: str, *types: str, sender: str | None = None) -> list[str]:
    published = await store.append([NewEvent(to=to, type=t, text=t, sender=sender) for t in types])
    return [p.event.id for p in published]


async def scheduled(store: Store, event_ids: list[str]) -> dict[str, list[str]]:
    return {e: [d.endpoint_id for d in await store.deliveries(e)] for e in event_ids}


async def test_an_agent_has_many_subscriptions_beside_its_webhook(store: Store) -> None:
    agent = await agent_of(store)
    hook = Endpoint(new_id("end_"), agent.id, Kind.WEBHOOK, "https://a.example/", SECRET, 1)
    await store.put_endpoint(hook)
    for number in (1, 2):
        assert await store.put_subscription(*subscription(store, agent, number), 0) is None
    found = await store.subscriptions(agent_id=agent.id)
    assert [(e.id, e.kind, s.name) for e, s in found] == [
        ("sub_0000000000000001", Kind.SUBSCRIPTION, "herald.event"),
        ("sub_0000000000000002", Kind.SUBSCRIPTION, "herald.event"),
    ]
    # The agent's endpoints (webhook, OpenClaw) are only those.
    assert [e.id for e in await store.endpoints(agent.id)] == [hook.id]
    assert [e.id for e, _ in await store.subscriptions(ids=["sub_0000000000000002"])] == [
        "sub_0000000000000002"
    ]


async def test_a_new_subscription_is_refused_at_the_limit_of_live_ones_a_refresh_is_taken(
    store: Store, clock: ManualClock
) -> None:
    agent = await agent_of(store)
    bob = await agent_of(store, "bob")
    lapsing = subscription(store, agent, 2, expires_at=store.now() + 10_000)
    for put in (subscription(store, agent, 1), lapsing):
        assert await store.put_subscription(*put, 0, max_live=2) is None
    with pytest.raises(LimitReached) as refused:
        await store.put_subscription(*subscription(store, agent, 3), 0, max_live=2)
    assert (refused.value.limit, refused.value.maximum) == ("subscriptions", 2)
    assert "you hold 2 webhook subscriptions" in refused.value.message
    held = await store.subscriptions(agent_id=agent.id)
    assert [e.id for e, _ in held] == ["sub_0000000000000001", "sub_0000000000000002"]
    # A refresh of one it holds, and another agent's, are taken; no limit takes any.
    assert await store.put_subscription(*subscription(store, agent, 1), 0, max_live=2) is not None
    assert await store.put_subscription(*subscription(store, bob, 4), 0, max_live=1) is None
    assert await store.put_subscription(*subscription(store, agent, 3), 0) is None
    # An expired one is not held: two live ones of a limit of three.
    clock.advance(11)
    assert await store.put_subscription(*subscription(store, agent, 5), 0, max_live=3) is None
    with pytest.raises(LimitReached):
        await store.put_subscription(*subscription(store, agent, 6), 0, max_live=3)


async def test_a_subscription_is_scheduled_only_the_open_events_it_matches_after_its_start(
    store: Store,
) -> None:
    agent = await agent_of(store)
    early = await publish(store, "alice", "dm.received")
    await store.put_subscription(
        *subscription(store, agent, 1, types=("dm.*", "build.f?iled"), after_seq=1), 0
    )
    await store.put_subscription(*subscription(store, agent, 2, sender="bob"), 0)
    ids = await publish(store, "alice", "dm.received", "build.failed", "other", "dm_x")
    from_bob = await publish(store, "alice", "other", sender="bob")
    assert await store.schedule_subscription_deliveries(100) == 3
    assert await store.schedule_subscription_deliveries(100) == 0
    assert await scheduled(store, early + ids + from_bob) == {
        early[0]: [],
        ids[0]: ["sub_0000000000000001"],
        ids[1]: ["sub_0000000000000001"],
        ids[2]: [],
        ids[3]: [],
        from_bob[0]: ["sub_0000000000000002"],
    }
    # Endpoint scheduling (webhooks, with their hold-back) leaves subscriptions alone.
    assert await store.schedule_deliveries(store.now(), 100) == 0


async def test_a_refresh_replaces_the_secret_keeps_the_old_one_signing_and_reactivates(
    store: Store, clock: ManualClock
) -> None:
    agent = await agent_of(store)
    endpoint, record = subscription(store, agent, 1, after_seq=0)
    await store.put_subscription(endpoint, record, 0)
    await store.append([NewEvent(to="alice", type="t", text="x")])
    # Suspended after failing for long (as the worker disables an endpoint).
    await store.schedule_subscription_deliveries(10)
    (delivery, claimed, _, _) = (await store.claim_deliveries("w", 10, 60_000))[0]
    failed = Attempt(delivery.event_id, store.now(), "subscription", "failed", claimed.id, "x")
    await store.finish_deliveries(
        [Finished(delivery, failed, None, None, False, disable_reason="kept failing")]
    )
    new_secret = "whsec_" + "B" * 32
    verified = WebhookSubscription(**{**record.__dict__, "verified_at": 5, "after_seq": 1})
    again = Endpoint(**{**endpoint.__dict__, "secret": new_secret, "expires_at": 9_000_000})
    before = await store.put_subscription(again, verified, store.now() + 60_000)
    assert before is not None and before[0].state is State.DISABLED
    ((stored, kept),) = await store.subscriptions(agent_id=agent.id)
    assert stored.state is State.ACTIVE and stored.disabled_reason is None
    assert stored.secret == new_secret and stored.expires_at == 9_000_000
    assert stored.signing_secrets(store.now()) == [new_secret, SECRET]
    assert kept.after_seq == 1 and kept.verified_at == 5
    # A start never moves back.
    await store.put_subscription(again, record, 0)
    ((_, kept),) = await store.subscriptions(agent_id=agent.id)
    assert kept.after_seq == 1 and kept.verified_at == 5


async def test_an_expired_subscription_is_not_claimed_and_expire_deletes_it(
    store: Store, clock: ManualClock
) -> None:
    agent = await agent_of(store)
    await store.put_subscription(*subscription(store, agent, 1, expires_at=store.now() + 10_000), 0)
    (event_id,) = await publish(store, "alice", "t")
    assert await store.schedule_subscription_deliveries(10) == 1
    clock.advance(11)
    assert await store.claim_deliveries("w", 10, 60_000) == []
    assert await store.schedule_subscription_deliveries(10) == 0
    await store.expire()
    assert await store.subscriptions(agent_id=agent.id) == []
    assert await store.deliveries(event_id) == []


async def test_the_cursor_is_a_watermark_below_every_outstanding_event(store: Store) -> None:
    agent = await agent_of(store)
    endpoint, record = subscription(store, agent, 1, types=("a",))
    await store.put_subscription(endpoint, record, 0)
    ids = await publish(store, "alice", "a", "b", "a", "a")  # seqs 1..4; 2 does not match
    assert await store.subscription_cursor(endpoint.id) == 0  # nothing scheduled yet
    await store.schedule_subscription_deliveries(10)
    claimed = {d.event_id: d for d, _, _, _ in await store.claim_deliveries("w", 10, 60_000)}
    # The body of event 1 may say 1 (it is the one being sent); event 3's says 0.
    assert await store.subscription_cursor(endpoint.id, sending=ids[0]) == 2
    assert await store.subscription_cursor(endpoint.id, sending=ids[2]) == 0
    now = store.now()
    done = [
        Finished(
            claimed[ids[2]],
            Attempt(ids[2], now, "subscription", "delivered", endpoint.id),
            None,
            EventStatus.DELIVERED.value,
            True,
        ),
        Finished(
            claimed[ids[0]],
            Attempt(ids[0], now, "subscription", "undeliverable", endpoint.id, "http_4xx: 410"),
            None,
            None,
            False,
        ),
    ]
    await store.finish_deliveries(done)
    # 1 was given up on, 2 is not its, 3 delivered: 4 is outstanding.
    assert await store.subscription_cursor(endpoint.id) == 3
    assert await store.subscription_cursor("sub_ffffffffffffffff") is None
    ((stored, kept),) = await store.subscriptions(agent_id=agent.id)
    assert kept.after_seq == 3  # the watermark moved its start up
    assert stored.last_ok_at == now


async def test_deleting_a_subscription_takes_its_deliveries(store: Store) -> None:
    agent = await agent_of(store)
    endpoint, record = subscription(store, agent, 1)
    await store.put_subscription(endpoint, record, 0)
    (event_id,) = await publish(store, "alice", "t")
    await store.schedule_subscription_deliveries(10)
    assert await store.delete_subscription(endpoint.id)
    assert not await store.delete_subscription(endpoint.id)
    assert await store.deliveries(event_id) == []
    event = await store.get_event(event_id)
    assert event is not None and event.status is EventStatus.PENDING


async def test_what_a_subscription_owes_is_read_oldest_first_up_to_a_limit(store: Store) -> None:
    agent = await agent_of(store)
    endpoint, record = subscription(store, agent, 1, types=("a",))
    await store.put_subscription(endpoint, record, 0)
    ids = await publish(store, "alice", "a", "b", "a", "a")  # seqs 1..4; 2 does not match
    owed = await store.subscription_owed(endpoint.id, 2)
    assert owed is not None and owed.events == ((1, ids[0]), (3, ids[2]))
    assert not owed.complete and owed.last_seq == 4
    # Past the two read, as far as the last one read: the one after it was not read.
    assert owed.cursor(ids[0]) == 2
    assert owed.cursor(ids[2], delivered={ids[0]}) == 3
    everything = await store.subscription_owed(endpoint.id, 10)
    assert everything is not None and everything.complete
    assert everything.cursor(ids[3], delivered={ids[0], ids[2]}) == 4
    assert await store.subscription_owed("sub_ffffffffffffffff", 2) is None


LOCK_WAITS = (
    "SELECT count(*) FROM pg_stat_activity"
    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
)


async def test_a_subscription_deleted_while_deliveries_are_scheduled_fails_no_schedule(
    postgres_database_url: str,
) -> None:
    """PostgreSQL: a schedule of two subscriptions' deliveries, held at a delivery another
    transaction is inserting, while one of them is deleted. It goes on and schedules the other's
    (it failed whole on the deleted one's foreign key)."""
    store = await open_store(postgres_database_url)
    watcher = await asyncpg.connect(postgres_database_url)
    holder = await asyncpg.connect(postgres_database_url)

    async def waiting(count: int) -> bool:
        return bool(await watcher.fetchval(LOCK_WAITS) >= count)

    try:
        agent = await agent_of(store)
        kept = subscription(store, agent, 1, types=("first",))
        gone = subscription(store, agent, 2, types=("second",))
        for put in (kept, gone):
            await store.put_subscription(*put, 0)
        # Scheduled in seq order: the deleted one's after the one held.
        event_id, later_id = await publish(store, "alice", "first", "second")
        transaction = holder.transaction()
        await transaction.start()
        await holder.execute(
            "INSERT INTO deliveries (endpoint_id, event_id, next_at) VALUES ($1, $2, 0)",
            kept[0].id,
            event_id,
        )
        scheduling = asyncio.create_task(store.schedule_subscription_deliveries(10))
        await until(lambda: waiting(1), "the schedule waits for the delivery being inserted")
        deleted = asyncio.create_task(store.delete_subscription(gone[0].id))

        async def deleted_or_waiting() -> bool:
            return deleted.done() or await waiting(2)

        await until(deleted_or_waiting, "the deletion is done or waits for the schedule")
        await transaction.rollback()
        assert await scheduling == 1
        assert await deleted
        assert await scheduled(store, [event_id, later_id]) == {
            event_id: [kept[0].id],
            later_id: [],
        }
    finally:
        await holder.close()
        await watcher.close()
        await store.close()


def tries(
    endpoint: Endpoint, event_id: str, at: int, *, failed: int = 0, ok: int = 0
) -> list[Finished]:
    """A subscription's attempts at ``at``: ``failed`` failures then ``ok`` successes."""
    delivery = Delivery(endpoint.id, event_id, 0, at, "waiting")
    failure = Attempt(event_id, at, "subscription", "failed", endpoint.id, "http_5xx: HTTP 500")
    success = Attempt(event_id, at, "subscription", "delivered", endpoint.id)
    return [Finished(delivery, failure, at + 1, None, False, subscription=True)] * failed + [
        Finished(delivery, success, None, "delivered", True, subscription=True)
    ] * ok


async def state_of(store: Store, endpoint: Endpoint) -> State:
    ((stored, _),) = await store.subscriptions(ids=[endpoint.id])
    return stored.state


async def test_more_than_95_percent_failing_over_at_least_100_attempts_suspends(
    store: Store,
) -> None:
    agent = await agent_of(store)
    (event_id,) = await publish(store, "alice", "t")
    few, share = subscription(store, agent, 1), subscription(store, agent, 2)
    for endpoint, record in (few, share):
        await store.put_subscription(endpoint, record, 0)
    now = store.now()
    endpoint_few = few[0]
    await store.finish_deliveries(tries(endpoint_few, event_id, now, failed=99))
    await store.finish_deliveries(tries(share[0], event_id, now, failed=95, ok=5))
    assert await state_of(store, endpoint_few) is State.ACTIVE  # 99 attempts: too few
    assert await state_of(store, share[0]) is State.ACTIVE  # exactly 95%: not more
    await store.finish_deliveries(tries(endpoint_few, event_id, now, failed=1))
    await store.finish_deliveries(tries(share[0], event_id, now, failed=1))
    for endpoint in (endpoint_few, share[0]):
        ((stored, _),) = await store.subscriptions(ids=[endpoint.id])
        assert stored.state is State.DISABLED
        assert stored.disabled_reason is not None and stored.disabled_reason.startswith(SUSPENDED)


async def test_the_window_rolls_over_an_hour_and_a_refresh_starts_it_afresh(
    store: Store, clock: ManualClock
) -> None:
    agent = await agent_of(store)
    (event_id,) = await publish(store, "alice", "t")
    endpoint, record = subscription(store, agent, 1)
    await store.put_subscription(endpoint, record, 0)
    await store.finish_deliveries(tries(endpoint, event_id, store.now(), failed=60))
    clock.advance(61 * 60)
    await store.expire()  # maintenance forgets the minutes that left every window
    await store.finish_deliveries(tries(endpoint, event_id, store.now(), failed=60))
    assert await state_of(store, endpoint) is State.ACTIVE  # the first 60 left the window
    await store.finish_deliveries(tries(endpoint, event_id, store.now(), failed=40))
    assert await state_of(store, endpoint) is State.DISABLED
    await store.put_subscription(endpoint, record, 0)  # a refresh reactivates
    assert await state_of(store, endpoint) is State.ACTIVE
    await store.finish_deliveries(tries(endpoint, event_id, store.now(), failed=1))
    assert await state_of(store, endpoint) is State.ACTIVE  # its old failures are forgotten


async def test_a_receivers_retry_after_is_kept_and_is_no_failure(store: Store) -> None:
    agent = await agent_of(store)
    (event_id,) = await publish(store, "alice", "t")
    endpoint, record = subscription(store, agent, 1)
    await store.put_subscription(endpoint, record, 0)
    now = store.now()
    (held,) = tries(endpoint, event_id, now, failed=1)
    throttled = replace(held, held_until=now + 120_000)
    await store.finish_deliveries([throttled] * 200)
    ((stored, kept),) = await store.subscriptions(ids=[endpoint.id])
    assert kept.held_until == now + 120_000 and stored.state is State.ACTIVE


async def test_a_claim_passes_over_a_held_subscription_and_takes_a_paced_one_at_its_pace(
    store: Store, clock: ManualClock
) -> None:
    agent = await agent_of(store)
    held, held_record = subscription(store, agent, 1)
    paced, paced_record = subscription(store, agent, 2)
    for endpoint, record in ((held, held_record), (paced, paced_record)):
        await store.put_subscription(endpoint, record, 0)
    first, *_ = await publish(store, "alice", "t", "t", "t")
    await store.schedule_subscription_deliveries(100)
    now = store.now()
    (asked,) = tries(held, first, now, failed=1)
    await store.finish_deliveries([replace(asked, held_until=now + 120_000)])

    async def claimed() -> list[str]:
        # Claims that outlast the test: only the hold and the pace decide what is taken.
        taken = await store.claim_deliveries("w", 100, 10**9, per_endpoint=24, pace_ms=500.0)
        return sorted(endpoint.id for _, endpoint, _, _ in taken)

    assert await claimed() == [paced.id] * 2  # 2 a second: a second's worth at once
    assert await claimed() == []  # its pace is reached, and the other is held
    clock.advance(0.5)
    assert await claimed() == [paced.id]
    clock.advance(120)
    assert await claimed() == [held.id] * 2  # the wait is over, at its own pace
    clock.advance(0.5)
    assert await claimed() == [held.id]  # all three, none lost
    ((_, kept),) = await store.subscriptions(ids=[paced.id])
    assert kept.paced_until == now + 1500


async def test_a_paced_claim_locks_its_subscriptions_in_id_order_so_claims_never_deadlock(
    postgres_database_url: str,
) -> None:
    """PostgreSQL: a paced claim moves on the pace of each subscription it takes from. Another
    transaction (a claim in another process) holds the first subscription in id order; the
    claim waits for it holding no other, so that the other can go on to lock the rest in the
    same order (in any other order, each would wait for the other: a deadlock)."""
    store = await open_store(postgres_database_url)
    watcher = await asyncpg.connect(postgres_database_url)
    holder = await asyncpg.connect(postgres_database_url)

    async def waiting() -> bool:
        return bool(await watcher.fetchval(LOCK_WAITS) >= 1)

    try:
        agent = await agent_of(store)
        puts = [subscription(store, agent, number) for number in range(1, 9)]
        for endpoint, record in puts:
            await store.put_subscription(endpoint, record, 0)
        await publish(store, "alice", "t")
        assert await store.schedule_subscription_deliveries(100) == len(puts)
        ids = sorted(endpoint.id for endpoint, _ in puts)
        lock = "SELECT id FROM subscriptions WHERE id = ANY($1::text[])"
        lock += ' ORDER BY id COLLATE "C" FOR NO KEY UPDATE'
        transaction = holder.transaction()
        await transaction.start()
        await holder.execute(lock, ids[:1])
        claiming = asyncio.create_task(
            store.claim_deliveries("w", 100, 10**9, per_endpoint=24, pace_ms=500.0)
        )
        await until(waiting, "the claim waits for the first subscription")
        assert len(await holder.fetch(lock, ids[1:])) == len(ids) - 1  # none held by the claim
        await transaction.commit()
        claimed = await claiming
        assert sorted(endpoint.id for _, endpoint, _, _ in claimed) == ids
    finally:
        await holder.close()
        await watcher.close()
        await store.close()


async def test_a_refresh_locks_its_subscription_before_its_agent_as_a_batch_of_attempts_does(
    postgres_database_url: str,
) -> None:
    """PostgreSQL: a batch of attempts locks a subscription's endpoint, then (counting its events)
    the agent's row. Another transaction holds the endpoint as such a batch does; a refresh of
    the subscription waits for it holding nothing, so the agent's row is free for the batch (in
    the other order, each would wait for the other: a deadlock)."""
    store = await open_store(postgres_database_url)
    watcher = await asyncpg.connect(postgres_database_url)
    holder = await asyncpg.connect(postgres_database_url)

    async def waiting() -> bool:
        return bool(await watcher.fetchval(LOCK_WAITS) >= 1)

    try:
        agent = await agent_of(store)
        endpoint, record = subscription(store, agent, 1)
        await store.put_subscription(endpoint, record, 0)
        transaction = holder.transaction()
        await transaction.start()
        await holder.execute("SELECT FROM endpoints WHERE id = $1 FOR NO KEY UPDATE", endpoint.id)
        refreshing = asyncio.create_task(store.put_subscription(endpoint, record, 0, max_live=5))
        await until(waiting, "the refresh waits for the subscription's endpoint")
        agent_lock = "SELECT id FROM agents WHERE id = $1 FOR NO KEY UPDATE NOWAIT"
        assert await holder.fetchval(agent_lock, agent.id) == agent.id  # not held by the refresh
        await transaction.commit()
        refreshed = await refreshing
        assert refreshed is not None and refreshed[0].id == endpoint.id
    finally:
        await holder.close()
        await watcher.close()
        await store.close()


async def test_events_that_expire_or_are_pruned_while_owed_leave_a_gap_until_told(
    store: Store, clock: ManualClock
) -> None:
    agent = await agent_of(store)
    endpoint, record = subscription(store, agent, 1)
    await store.put_subscription(endpoint, record, 0)
    expiring = await store.append([NewEvent(to="alice", type="t", text="t", ttl_s=60)])
    assert await store.subscription_gaps() == []
    clock.advance(61)
    await store.expire()
    ((_, owed),) = await store.subscription_gaps()
    assert owed.gap_at == store.now() and expiring
    assert not await store.gap_told(endpoint.id, owed.gap_at - 1)  # not the gap it was told
    assert await store.gap_told(endpoint.id, owed.gap_at)
    assert await store.subscription_gaps() == []
    # A waiting delivery of an event delivered another way goes when the event is pruned.
    (kept,) = await publish(store, "alice", "t")
    await store.schedule_subscription_deliveries(10)
    await store.ack(agent.id, ids=[kept])
    clock.advance(10)
    await store.prune(store.now())
    ((_, pruned),) = await store.subscription_gaps()
    assert pruned.gap_at == store.now()
