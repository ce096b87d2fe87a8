"""The endpoint half of the store contract, on every backend."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

import pytest

from herald import open_store
from herald.ids import new_id
from herald.models import (
    REFUSED_PREFIX,
    Agent,
    Attempt,
    Delivery,
    Endpoint,
    EventStatus,
    Finished,
    Kind,
    NewEvent,
    OneClaim,
    State,
)
from herald.store import Store
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio


async def setup(
    store: Store, handle: str = "alice", kind: Kind = Kind.WEBHOOK
) -> tuple[Agent, Endpoint]:
    agent = Agent(new_id("agt_"), handle, f"hash-{handle}", store.now())
    await store.create_agent(agent)
    endpoint = Endpoint(
        new_id("end_"), agent.id, kind, "https://example.com/hook", "whsec_x", store.now()
    )
    await store.put_endpoint(endpoint)
    return agent, endpoint


async def publish(store: Store, to: str, count: int) -> list[str]:
    published = await store.append([NewEvent(to=to, type="t", text=f"e{n}") for n in range(count)])
    return [p.event.id for p in published]


async def test_open_events_get_one_delivery_per_endpoint(store: Store) -> None:
    agent, endpoint = await setup(store)
    ids = await publish(store, "alice", 3)
    await store.ack(agent.id, ids=[ids[2]])
    assert await store.schedule_deliveries(store.now(), 100) == 2
    assert await store.schedule_deliveries(store.now(), 100) == 0
    claimed = await store.claim_deliveries("w1", 10, 60_000)
    assert [(d.event_id, w.id, e.id, a.id) for d, w, e, a in claimed] == [
        (ids[0], endpoint.id, ids[0], agent.id),
        (ids[1], endpoint.id, ids[1], agent.id),
    ]
    assert await store.claim_deliveries("w2", 10, 60_000) == []


async def test_scheduling_can_wait_for_agents_with_a_live_session(
    store: Store, clock: ManualClock
) -> None:
    agent, _ = await setup(store)
    await publish(store, "alice", 1)
    assert await store.schedule_deliveries(store.now(), 100, not_agents=[agent.id]) == 0
    assert await store.schedule_deliveries(store.now() - 10_000, 100, agents=[agent.id]) == 0
    clock.advance(11)
    assert await store.schedule_deliveries(store.now() - 10_000, 100, agents=[agent.id]) == 1


async def scheduled(
    store: Store, endpoint: Endpoint, ids: list[str], before_ms: int | None = None
) -> list[str]:
    """A schedule pass, then which of the events ``ids`` it gave the endpoint a delivery."""
    before = await _scheduled_to(store, endpoint, ids)
    await store.schedule_deliveries(store.now() if before_ms is None else before_ms, 100)
    return sorted(await _scheduled_to(store, endpoint, ids) - before)


async def _scheduled_to(store: Store, endpoint: Endpoint, ids: list[str]) -> set[str]:
    return {
        event_id
        for event_id in ids
        if any(d.endpoint_id == endpoint.id for d in await store.deliveries(event_id))
    }


async def test_an_event_in_its_push_grace_is_scheduled_once_it_runs_out_after_later_ones(
    store: Store, clock: ManualClock
) -> None:
    agent, endpoint = await setup(store)
    ids = first, second = await publish(store, "alice", 2)
    clock.advance(20_000)
    await store.mark_sent(agent.id, [first])  # pushed now: its grace starts again
    assert await scheduled(store, endpoint, ids, store.now() - 10_000) == [second]
    assert await scheduled(store, endpoint, ids, store.now() - 10_000) == []
    clock.advance(10_001)
    assert await scheduled(store, endpoint, ids, store.now() - 10_000) == [first]


async def test_events_past_a_pass_s_limit_are_scheduled_by_the_next_pass(store: Store) -> None:
    _, endpoint = await setup(store)
    _, other = await setup(store, "bob")
    ids = await publish(store, "alice", 2) + await publish(store, "bob", 2)
    counts = [await store.schedule_deliveries(store.now(), 1) for _ in range(5)]
    assert counts == [1, 1, 1, 1, 0]
    assert await _scheduled_to(store, endpoint, ids) == set(ids[:2])
    assert await _scheduled_to(store, other, ids) == set(ids[2:])


async def test_events_of_a_type_no_longer_muted_are_scheduled_after_later_ones(
    store: Store,
) -> None:
    agent, endpoint = await setup(store)
    await store.set_agent_preferences(agent.id, '{"muted": ["t"]}')
    (muted,) = await publish(store, "alice", 1)
    (other,) = [p.event.id for p in await store.append([NewEvent(to="alice", type="u", text="u")])]
    ids = [muted, other]
    assert await scheduled(store, endpoint, ids) == [other]
    assert await scheduled(store, endpoint, ids) == []
    await store.set_agent_preferences(agent.id, '{"muted": []}')
    assert await scheduled(store, endpoint, ids) == [muted]


async def test_a_redelivered_event_is_scheduled_after_later_ones(store: Store) -> None:
    agent, endpoint = await setup(store)
    ids = first, second = await publish(store, "alice", 2)
    await store.ack(agent.id, ids=[first])  # delivered before any pass: no delivery of it
    assert await scheduled(store, endpoint, ids) == [second]
    assert await store.redeliver(first) is not None
    assert await scheduled(store, endpoint, ids) == [first]


async def test_a_new_endpoint_gets_the_open_events_scheduled_to_an_earlier_one(
    store: Store,
) -> None:
    agent, webhook = await setup(store)
    ids = await publish(store, "alice", 2)
    assert await scheduled(store, webhook, ids) == sorted(ids)
    openclaw = Endpoint(new_id("end_"), agent.id, Kind.OPENCLAW, "https://example.com/oc",
                        "whsec_y", store.now())  # fmt: skip
    await store.put_endpoint(openclaw)
    assert await scheduled(store, openclaw, ids) == sorted(ids)
    replaced = Endpoint(new_id("end_"), agent.id, Kind.WEBHOOK, "https://example.com/new",
                        "whsec_z", store.now())  # fmt: skip
    await store.put_endpoint(replaced)
    assert await scheduled(store, replaced, ids) == sorted(ids)


async def test_a_timed_event_is_scheduled_when_due_after_later_ones(
    store: Store, clock: ManualClock
) -> None:
    _, endpoint = await setup(store)
    later = NewEvent(to="alice", type="t", text="later", deliver_at=store.now() + 60_000)
    (timed,) = await store.schedule([later])
    (now,) = await publish(store, "alice", 1)
    ids = [timed.event.id, now]
    assert await scheduled(store, endpoint, ids) == [now]
    clock.advance(60_000)
    assert [e.id for e in await store.release_due(10)] == [timed.event.id]
    assert await scheduled(store, endpoint, ids) == [timed.event.id]


async def test_a_topic_s_copy_is_scheduled_after_the_events_scheduled_before_it(
    store: Store,
) -> None:
    agent, endpoint = await setup(store)
    (first,) = await publish(store, "alice", 1)
    assert await scheduled(store, endpoint, [first]) == [first]
    await store.put_topic("repo/herald", "pushes")
    await store.subscribe_topic(agent.id, "repo/*")
    copies = await store.append_to_topic("repo/herald", NewEvent("", "t", "copy"))
    assert copies is not None
    ids = [first, copies[0].event.id]
    assert await scheduled(store, endpoint, ids) == [copies[0].event.id]


async def test_an_endpoint_enabled_again_gets_what_was_stored_while_it_was_disabled(
    store: Store,
) -> None:
    _, endpoint = await setup(store)
    (event_id,) = await publish(store, "alice", 1)
    assert await scheduled(store, endpoint, [event_id]) == [event_id]
    ((delivery, *_),) = await store.claim_deliveries("w", 10, 60_000)
    reason = REFUSED_PREFIX + "example.com resolves to 10.0.0.1, a private address"
    refused = Attempt(event_id, store.now(), "webhook", "failed", endpoint.id, reason)
    await store.finish_deliveries([Finished(delivery, refused, store.now(), None, False,
                                            disable_reason=reason)])  # fmt: skip
    while_disabled = await publish(store, "alice", 2)
    assert await scheduled(store, endpoint, while_disabled) == []
    assert await store.enable_endpoint(endpoint.id, reason)
    assert await scheduled(store, endpoint, while_disabled) == sorted(while_disabled)


async def test_a_failed_attempt_waits_for_its_next_time_and_a_success_delivers(
    store: Store, clock: ManualClock
) -> None:
    agent, endpoint = await setup(store)
    (event_id,) = await publish(store, "alice", 1)
    await store.schedule_deliveries(store.now(), 10)
    ((delivery, *_),) = await store.claim_deliveries("w1", 10, 60_000)
    failed = Attempt(event_id, store.now(), "webhook", "failed", endpoint.id, "HTTP 500")
    await store.finish_deliveries(
        [Finished(delivery, failed, store.now() + 5_000, None, endpoint_ok=False)]
    )
    assert await store.claim_deliveries("w1", 10, 60_000) == []
    (state,) = await store.endpoints(agent.id)
    assert state.failing_since == store.now() and state.last_error == "HTTP 500"
    clock.advance(5)
    ((again, *_),) = await store.claim_deliveries("w2", 10, 60_000)
    assert again.attempts == 1
    ok = Attempt(event_id, store.now(), "webhook", "delivered", endpoint.id)
    await store.finish_deliveries([Finished(again, ok, None, "delivered", endpoint_ok=True)])
    event = await store.get_event(event_id)
    assert event is not None and event.status is EventStatus.DELIVERED
    (done,) = await store.deliveries(event_id)
    assert (done.state, done.attempts) == ("done", 2)
    (healthy,) = await store.endpoints(agent.id)
    assert healthy.failing_since is None and healthy.last_error is None
    assert [a.outcome for a in await store.attempts(event_id)] == ["failed", "delivered"]


async def test_a_claim_runs_out_and_another_worker_takes_it(
    store: Store, clock: ManualClock
) -> None:
    await setup(store)
    await publish(store, "alice", 1)
    await store.schedule_deliveries(store.now(), 10)
    assert len(await store.claim_deliveries("w1", 10, 1_000)) == 1
    assert await store.claim_deliveries("w2", 10, 1_000) == []
    clock.advance(2)
    assert len(await store.claim_deliveries("w2", 10, 1_000)) == 1


async def test_released_claims_are_taken_at_once_and_finished_deliveries_stay_finished(
    store: Store,
) -> None:
    _, endpoint = await setup(store)
    first, second = await publish(store, "alice", 2)
    await store.schedule_deliveries(store.now(), 10)
    (done, *_), (held, *_) = await store.claim_deliveries("w1", 10, 3_600_000)
    ok = Attempt(first, store.now(), "webhook", "delivered", endpoint.id)
    await store.finish_deliveries([Finished(done, ok, None, "delivered", endpoint_ok=True)])
    assert await store.claim_deliveries("w2", 10, 3_600_000) == []
    assert await store.release_claims() == 1
    assert await store.release_claims() == 0
    ((taken, *_),) = await store.claim_deliveries("w2", 10, 3_600_000)
    assert (taken.event_id, taken.attempts) == (second, 0) == (held.event_id, held.attempts)


async def test_freeing_one_claim_leaves_a_later_claim_of_the_same_delivery(
    store: Store, clock: ManualClock
) -> None:
    _, endpoint = await setup(store)
    (event_id,) = await publish(store, "alice", 1)
    await store.schedule_deliveries(store.now(), 10)
    assert len(await store.claim_deliveries("w1", 10, 60_000)) == 1
    first_runs_out_by = store.now() + 60_000
    assert await store.release_claims("w1") == 1  # freed (its process taken for dead, say)
    clock.advance(1)
    assert len(await store.claim_deliveries("w1", 10, 60_000)) == 1  # and claimed again
    first = OneClaim(endpoint.id, event_id, first_runs_out_by)
    assert await store.release_claims("w1", first) == 0  # the first claim is no more
    assert await store.claim_deliveries("w2", 10, 60_000) == []
    second = OneClaim(endpoint.id, event_id, store.now() + 60_000)
    assert await store.release_claims("w1", second) == 1
    assert len(await store.claim_deliveries("w2", 10, 60_000)) == 1


async def test_a_claimant_frees_its_own_claims_and_no_one_elses(store: Store) -> None:
    await setup(store)
    first, second = await publish(store, "alice", 2)
    await store.schedule_deliveries(store.now(), 10)
    ((mine, *_),) = await store.claim_deliveries("w1", 1, 3_600_000)
    ((theirs, *_),) = await store.claim_deliveries("w2", 1, 3_600_000)
    assert (mine.event_id, theirs.event_id) == (first, second)
    assert await store.release_claims("w1") == 1
    assert await store.release_claims("w1") == 0
    ((taken, *_),) = await store.claim_deliveries("w3", 10, 3_600_000)
    assert taken.event_id == first  # w2's is still w2's


async def test_an_endpoint_is_disabled_for_good_or_after_failing_too_long(
    store: Store, clock: ManualClock
) -> None:
    agent, endpoint = await setup(store)
    ids = await publish(store, "alice", 2)
    await store.schedule_deliveries(store.now(), 10)
    claimed = await store.claim_deliveries("w", 10, 60_000)
    first, second = sorted(claimed, key=lambda c: c[0].event_id != ids[0])
    gone = Attempt(ids[0], store.now(), "webhook", "undeliverable", endpoint.id, "HTTP 410")
    await store.finish_deliveries(
        [
            Finished(
                first[0],
                gone,
                None,
                None,
                endpoint_ok=False,
                disable_reason="HTTP 410",
            )
        ]
    )
    (disabled,) = await store.endpoints(agent.id)
    assert disabled.state is State.DISABLED and disabled.disabled_reason == "HTTP 410"
    assert await store.claim_deliveries("w", 10, 60_000) == []
    event = await store.get_event(ids[0])
    assert event is not None and event.status is EventStatus.PENDING  # kept for the drain
    assert (await store.deliveries(ids[0]))[0].state == "dead"
    _, fresh = await setup(store, "bob")
    (bob_event,) = await publish(store, "bob", 1)
    await store.schedule_deliveries(store.now(), 10)
    ((delivery, *_),) = await store.claim_deliveries("w", 10, 60_000)
    fail = Attempt(bob_event, store.now(), "webhook", "failed", fresh.id, "timed out")

    async def time_out(delivery: Delivery) -> None:
        """Fail it, disabling the endpoint if it has been failing for over a second."""
        since = store.now() - 1000
        failed = Finished(delivery, fail, store.now() + 1, None, False, None, since)
        await store.finish_deliveries([failed])

    await time_out(delivery)
    assert (await store.endpoints(fresh.agent_id))[0].state is State.ACTIVE
    clock.advance(2)
    ((delivery, *_),) = await store.claim_deliveries("w", 10, 60_000)
    await time_out(delivery)
    (stale,) = await store.endpoints(fresh.agent_id)
    assert stale.state is State.DISABLED and "timed out" in (stale.disabled_reason or "")
    assert second  # the other delivery to the disabled endpoint stays waiting


async def test_an_endpoint_disabled_for_its_address_is_listed_and_can_be_enabled(
    store: Store,
) -> None:
    agent, endpoint = await setup(store)
    (event_id,) = await publish(store, "alice", 1)
    await store.schedule_deliveries(store.now(), 10)
    ((delivery, *_),) = await store.claim_deliveries("w", 10, 60_000)
    reason = REFUSED_PREFIX + "example.com resolves to 10.0.0.1, a private address"
    refused = Attempt(event_id, store.now(), "webhook", "failed", endpoint.id, reason)
    waits = Finished(delivery, refused, store.now(), None, False, disable_reason=reason)
    await store.finish_deliveries([waits])
    _, gone = await setup(store, "bob")  # disabled for another reason: not listed
    (bob_event,) = await publish(store, "bob", 1)
    await store.schedule_deliveries(store.now(), 10)
    ((bob_delivery, *_),) = await store.claim_deliveries("w", 10, 60_000)
    http_410 = Attempt(bob_event, store.now(), "webhook", "undeliverable", gone.id, "HTTP 410")
    await store.finish_deliveries([Finished(bob_delivery, http_410, None, None, False, "HTTP 410")])
    (listed,) = await store.refused_endpoints()
    assert (listed.id, listed.disabled_reason, listed.secret) == (endpoint.id, reason, "whsec_x")
    assert not await store.enable_endpoint(endpoint.id, "another reason")
    assert not await store.enable_endpoint(gone.id, reason)
    assert await store.enable_endpoint(endpoint.id, reason)
    (enabled,) = await store.endpoints(agent.id)
    assert enabled.state is State.ACTIVE and enabled.disabled_reason is None
    assert enabled.failing_since is None and enabled.secret == "whsec_x"
    assert await store.refused_endpoints() == []
    ((again, *_),) = await store.claim_deliveries("w", 10, 60_000)  # the delivery waited
    assert again.event_id == event_id


async def test_an_agents_webhook_url_is_read_from_its_webhook_endpoint(store: Store) -> None:
    agent, endpoint = await setup(store)
    assert agent.webhook_url is None  # not stored with the agent
    fetched = await store.get_agent(agent.id)
    assert fetched is not None and fetched.webhook_url == endpoint.url
    by_key = await store.agent_by_key_hash(agent.key_hash)
    assert by_key is not None and by_key.webhook_url == endpoint.url
    await publish(store, "alice", 1)
    await store.schedule_deliveries(store.now(), 10)
    ((_, _, _, claimed_agent),) = await store.claim_deliveries("w", 10, 60_000)
    assert claimed_agent.webhook_url == endpoint.url
    other = Endpoint(
        new_id("end_"), agent.id, Kind.WEBHOOK, "https://example.org/h", "whsec_z", store.now()
    )
    await store.put_endpoint(other)
    assert [a.webhook_url for a in await store.list_agents()] == ["https://example.org/h"]
    await store.delete_endpoint(agent.id, "webhook")
    await setup_openclaw(store, agent)
    fetched = await store.get_agent(agent.id)
    assert fetched is not None and fetched.webhook_url is None


async def setup_openclaw(store: Store, agent: Agent) -> None:
    gateway = Endpoint(
        new_id("end_"), agent.id, Kind.OPENCLAW, "https://gw.example", "token", store.now()
    )
    await store.put_endpoint(gateway)


async def test_an_openclaw_success_only_marks_the_event_sent(store: Store) -> None:
    _, endpoint = await setup(store, kind=Kind.OPENCLAW)
    (event_id,) = await publish(store, "alice", 1)
    await store.schedule_deliveries(store.now(), 10)
    ((delivery, *_),) = await store.claim_deliveries("w", 10, 60_000)
    ok = Attempt(event_id, store.now(), "openclaw", "sent", endpoint.id)
    await store.finish_deliveries([Finished(delivery, ok, None, "sent", endpoint_ok=True)])
    event = await store.get_event(event_id)
    assert event is not None and event.status is EventStatus.SENT


async def test_secrets_rotate_and_endpoints_are_replaced(store: Store, clock: ManualClock) -> None:
    agent, endpoint = await setup(store)
    rotated = await store.rotate_secret(endpoint.id, "whsec_new", store.now() + 60_000)
    assert rotated is not None and rotated.secret == "whsec_new"
    assert rotated.signing_secrets(store.now()) == ["whsec_new", "whsec_x"]
    clock.advance(61)
    assert rotated.signing_secrets(store.now()) == ["whsec_new"]
    assert await store.rotate_secret("end_none", "whsec_y", 0) is None
    other = Endpoint(
        new_id("end_"), agent.id, Kind.WEBHOOK, "https://example.org/h", "whsec_z", store.now()
    )
    await store.put_endpoint(other)
    assert [e.id for e in await store.endpoints(agent.id)] == [other.id]
    assert await store.delete_endpoint(agent.id, "webhook")
    assert await store.endpoints(agent.id) == []


async def test_two_workers_never_claim_the_same_delivery(
    store_url: str, store: Store, clock: ManualClock
) -> None:
    await setup(store)
    await publish(store, "alice", 200)
    await store.schedule_deliveries(store.now(), 1000)
    claimed: list[list[str]] = [[], []]

    def worker(index: int) -> None:
        async def run() -> None:
            own = await open_store(store_url, clock=clock)
            try:
                while batch := await own.claim_deliveries(f"w{index}", 7, 600_000):
                    claimed[index] += [d.event_id for d, *_ in batch]
            finally:
                await own.close()

        asyncio.run(run())

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    counts = Counter(claimed[0] + claimed[1])
    assert len(counts) == 200 and max(counts.values()) == 1


async def test_a_claim_takes_at_most_so_many_per_endpoint(store: Store) -> None:
    await setup(store, "alice")
    await setup(store, "bob")
    await publish(store, "alice", 5)
    await publish(store, "bob", 5)
    await store.schedule_deliveries(store.now(), 100)
    claimed = await store.claim_deliveries("w", 100, 60_000, per_endpoint=2)
    per = Counter(agent.handle for *_, agent in claimed)
    assert per == {"alice": 2, "bob": 2}
    endpoint_ids = {agent.handle: endpoint.id for _, endpoint, _, agent in claimed}
    busy = {endpoint_ids["alice"]: 4, endpoint_ids["bob"]: 3}
    rest = await store.claim_deliveries("w", 100, 60_000, per_endpoint=4, in_flight=busy)
    assert Counter(agent.handle for *_, agent in rest) == {"bob": 1}


async def test_a_batch_of_results_is_recorded_at_once_and_the_last_one_decides(
    store: Store, clock: ManualClock
) -> None:
    agent, endpoint = await setup(store)
    ids = await publish(store, "alice", 5)
    await store.schedule_deliveries(store.now(), 10)
    claimed = sorted(
        await store.claim_deliveries("w", 10, 60_000, per_endpoint=5),
        key=lambda c: ids.index(c[0].event_id),
    )
    deliveries = [delivery for delivery, *_ in claimed]

    def ok(delivery: Delivery) -> Finished:
        attempt = Attempt(delivery.event_id, store.now(), "webhook", "delivered", endpoint.id)
        return Finished(delivery, attempt, None, "delivered", endpoint_ok=True)

    def failed(delivery: Delivery, error: str) -> Finished:
        attempt = Attempt(delivery.event_id, store.now(), "webhook", "failed", endpoint.id, error)
        return Finished(delivery, attempt, store.now() + 5_000, None, endpoint_ok=False)

    await store.finish_deliveries([failed(deliveries[0], "HTTP 500"), ok(deliveries[1])])
    (healthy,) = await store.endpoints(agent.id)
    assert healthy.failing_since is None and healthy.last_error is None
    assert [(await store.deliveries(i))[0].state for i in ids[:2]] == ["waiting", "done"]
    first_failure = store.now()
    await store.finish_deliveries([failed(deliveries[2], "HTTP 502")])
    clock.advance(10)
    await store.finish_deliveries([ok(deliveries[3]), failed(deliveries[4], "HTTP 503")])
    (failing,) = await store.endpoints(agent.id)
    # A success in the batch ended the failing span that began with HTTP 502: a new one began.
    assert failing.failing_since == store.now() != first_failure
    assert failing.last_error == "HTTP 503"
    assert [(await store.deliveries(i))[0].attempts for i in ids] == [1] * 5


async def test_an_event_two_endpoints_finish_in_one_batch_is_delivered_if_either_delivered(
    store: Store,
) -> None:
    agent, webhook = await setup(store)
    openclaw = Endpoint(
        new_id("end_"), agent.id, Kind.OPENCLAW, "https://example.com/oc", "tok", store.now()
    )
    await store.put_endpoint(openclaw)
    (event_id,) = await publish(store, "alice", 1)
    await store.schedule_deliveries(store.now(), 10)
    claimed = {w.id: d for d, w, _, _ in await store.claim_deliveries("w", 10, 60_000)}

    def result(endpoint: Endpoint, status: str) -> Finished:
        attempt = Attempt(event_id, store.now(), endpoint.kind.value, status, endpoint.id)
        return Finished(claimed[endpoint.id], attempt, None, status, endpoint_ok=True)

    await store.finish_deliveries([result(webhook, "delivered"), result(openclaw, "sent")])
    assert (await store.get_event(event_id)).status is EventStatus.DELIVERED  # type: ignore[union-attr]
    assert {d.state for d in await store.deliveries(event_id)} == {"done"}


async def test_every_agents_endpoints_are_listed_by_id_a_page_at_a_time(store: Store) -> None:
    made = [await setup(store, handle) for handle in ("p-alice", "p-bob", "p-carol")]
    openclaw = Endpoint(
        new_id("end_"), made[0][0].id, Kind.OPENCLAW, "https://gw.example", "token", store.now()
    )
    await store.put_endpoint(openclaw)
    handles = {e.id: a.handle for a, e in made} | {openclaw.id: "p-alice"}
    first = await store.endpoint_page(None, 3, failing=False)
    rest = await store.endpoint_page(first[-1][0].id, 3, failing=False)
    listed = [(endpoint.id, handle) for endpoint, handle in first + rest]
    assert listed == sorted(handles.items())  # by id, each once, with its agent's handle
    assert await store.endpoint_page(None, 10, failing=True) == []

    carol, carol_endpoint = made[2]
    (event_id,) = await publish(store, "p-carol", 1)
    await store.schedule_deliveries(store.now(), 10)
    ((delivery, *_),) = await store.claim_deliveries("w", 10, 60_000)
    gone = Attempt(event_id, store.now(), "webhook", "undeliverable", carol_endpoint.id, "410")
    await store.finish_deliveries([Finished(delivery, gone, None, None, False, "HTTP 410")])
    ((failing, handle),) = await store.endpoint_page(None, 10, failing=True)
    assert (failing.id, failing.state, handle) == (carol_endpoint.id, State.DISABLED, carol.handle)
