"""Signed webhooks and OpenClaw hooks, sent by the worker to real HTTP receivers. Time is the
hub's manual clock: retries, leases and the ack timeout come by moving it, never by waiting."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import asyncpg
import pytest
from standardwebhooks import Webhook

from herald import EventStatus, Hub
from herald.addresses import AddressPolicy
from herald.config import DEFAULTS
from herald.errors import InvalidInput
from herald.models import REFUSED_PREFIX, Finished, Kind, Published, State
from herald.testing import ManualClock
from herald.webhooks import manage
from herald.webhooks.sender import Sender
from herald.webhooks.worker import WebhookWorker
from tests.store.test_claimants import cut_listening_connections
from tests.waiting import until
from tests.webhooks.receiver import HANG, Received, Receiver

pytestmark = pytest.mark.anyio

LOOPBACK = AddressPolicy(allow_loopback=True)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver()
    yield running
    running.close()


def worker(
    hub: Hub, policy: AddressPolicy = LOOPBACK, timeout_s: float = 0.5, **options: object
) -> WebhookWorker:
    sender = Sender("http://hub.test", policy, timeout_s=timeout_s, clock=hub.clock)
    return WebhookWorker(hub, sender, **options)  # type: ignore[arg-type]


async def round_trip(work: WebhookWorker) -> int:
    started = await work.run_once()
    await work.wait_idle()
    return started


async def status_and_outcomes(hub: Hub, event_id: str) -> tuple[EventStatus, list[str]]:
    """The event's status and the outcome of each of its attempts, oldest first."""
    event, attempts = await hub.get_event(event_id)
    return event.status, [a.outcome for a in attempts]


async def test_a_webhook_is_signed_per_standard_webhooks_and_delivers(
    hub: Hub, receiver: Receiver
) -> None:
    agent, _ = await hub.create_agent("alice")
    _, secret = await manage.set_webhook(hub, agent.id, receiver.url + "/hook")
    published = await hub.publish("alice", "dm.received", "hello", data={"from": "bob"})
    assert await round_trip(worker(hub)) == 1
    (request,) = receiver.requests
    assert request.path == "/hook" and request.headers["webhook-id"] == published.event.id
    payload = Webhook(secret).verify(request.body, request.headers)
    assert payload["id"] == published.event.id and payload["data"] == {"from": "bob"}
    event, attempts = await hub.get_event(published.event.id)
    assert event.status is EventStatus.DELIVERED
    assert [(a.mechanism, a.outcome) for a in attempts] == [("webhook", "delivered")]


async def test_during_a_rotation_both_secrets_sign(hub: Hub, receiver: Receiver) -> None:
    agent, _ = await hub.create_agent("alice")
    _, old = await manage.set_webhook(hub, agent.id, receiver.url)
    _, new = await manage.rotate_webhook_secret(hub, agent.id, grace_s=3600)
    await hub.publish("alice", "t", "during the rotation")
    await round_trip(worker(hub))
    (request,) = receiver.requests
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        Webhook(secret).verify(request.body, request.headers)


async def test_failures_are_retried_on_the_schedule_and_retry_after_is_honoured(
    hub: Hub, receiver: Receiver, clock: ManualClock
) -> None:
    agent, _ = await hub.create_agent("alice")
    await manage.set_webhook(hub, agent.id, receiver.url)
    receiver.script = [(500, {}), (429, {"Retry-After": "1200"}), (503, {}), (200, {})]
    published = await hub.publish("alice", "t", "persistent")
    work = worker(hub)
    assert await round_trip(work) == 1
    (delivery,) = await hub.store.deliveries(published.event.id)
    assert 4_500 <= delivery.next_at - hub.store.now() <= 5_500  # 5 s, with jitter
    assert await round_trip(work) == 0
    clock.advance(5.6)
    assert await round_trip(work) == 1
    (delivery,) = await hub.store.deliveries(published.event.id)
    assert delivery.next_at - hub.store.now() >= 1_200_000  # Retry-After beats the 5 min step
    clock.advance(1201)
    await round_trip(work)
    (delivery,) = await hub.store.deliveries(published.event.id)
    assert 1_620_000 <= delivery.next_at - hub.store.now() <= 1_980_000  # 30 min, with jitter
    clock.advance(2000)
    await round_trip(work)
    event, attempts = await hub.get_event(published.event.id)
    assert event.status is EventStatus.DELIVERED
    assert [a.outcome for a in attempts] == ["failed", "failed", "failed", "delivered"]
    assert "HTTP 500" in (attempts[0].error or "") and "HTTP 429" in (attempts[1].error or "")


@contextlib.contextmanager
def sqlite_writer_held(path: Path) -> Iterator[None]:
    """Another connection holds the SQLite file's write lock: whatever herald's writer runs
    meanwhile (its reads too, each a transaction) waits for it."""
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield
    finally:
        holder.close()  # its transaction is rolled back: the writer goes on


@contextlib.asynccontextmanager
async def postgres_endpoints_locked(url: str) -> AsyncIterator[None]:
    """Another connection holds the endpoints table, locked against reads too: a statement
    that reads it waits."""
    holder = await asyncpg.connect(url)
    try:
        async with holder.transaction():
            await holder.execute("LOCK TABLE endpoints IN ACCESS EXCLUSIVE MODE")
            yield
    finally:
        await holder.close()


async def rounds_without_the_store(work: WebhookWorker) -> None:
    """A few rounds that must not wait for a store held by another connection."""
    async with asyncio.timeout(10):
        for _ in range(3):
            assert await work.run_once() == 0


async def test_with_no_endpoint_a_round_leaves_the_store_alone_and_one_made_later_gets_all(
    tmp_path: Path, receiver: Receiver, clock: ManualClock
) -> None:
    # Rounds woken by publishes were a few transactions each on the SQLite writer, several
    # times a second, which the publishes queued behind them waited for: with no endpoint
    # they owe nothing.
    path = tmp_path / "h.db"
    async with Hub.from_url(f"sqlite:///{path}", clock=clock) as hub:
        agent, _ = await hub.create_agent("alice")
        work = worker(hub)
        assert await round_trip(work) == 0  # the store says there is no endpoint
        published = [await hub.publish("alice", "t", f"before the webhook {n}") for n in range(3)]
        with sqlite_writer_held(path):
            await rounds_without_the_store(work)
        await manage.set_webhook(hub, agent.id, receiver.url)
        assert await round_trip(work) == 3
        sent = sorted(request.headers["webhook-id"] for request in receiver.requests)
        assert sent == sorted(p.event.id for p in published)


async def test_once_the_last_endpoint_is_deleted_a_round_leaves_the_store_alone_again(
    tmp_path: Path, receiver: Receiver, clock: ManualClock
) -> None:
    path = tmp_path / "h.db"
    async with Hub.from_url(f"sqlite:///{path}", clock=clock) as hub:
        agent, _ = await hub.create_agent("alice")
        await manage.set_webhook(hub, agent.id, receiver.url)
        work = worker(hub)
        await hub.publish("alice", "t", "sent")
        assert await round_trip(work) == 1
        await manage.remove(hub, agent.id, Kind.WEBHOOK)
        await hub.publish("alice", "t", "owed to nobody")
        assert await round_trip(work) == 0  # the store is asked again, once
        with sqlite_writer_held(path):
            await rounds_without_the_store(work)


async def test_a_webhook_made_by_another_process_is_delivered_once_the_store_is_asked_again(
    postgres_database_url: str, receiver: Receiver, clock: ManualClock
) -> None:
    url = postgres_database_url
    async with Hub.from_url(url, clock=clock) as here, Hub.from_url(url, clock=clock) as there:
        work = worker(here)
        assert await round_trip(work) == 0  # the store says there is no endpoint
        async with postgres_endpoints_locked(url):
            await rounds_without_the_store(work)  # believed for a while by the store's clock
        agent, _ = await there.create_agent("alice")
        await manage.set_webhook(there, agent.id, receiver.url)
        published = await here.publish("alice", "t", "to a webhook made by another process")
        clock.advance(1)
        assert await round_trip(work) == 1
        (request,) = receiver.requests
        assert request.headers["webhook-id"] == published.event.id


async def test_a_restart_between_attempts_loses_no_retry(
    tmp_path: Path, receiver: Receiver, clock: ManualClock
) -> None:
    url = f"sqlite:///{tmp_path / 'restart.db'}"
    receiver.script = [(500, {})]
    async with Hub.from_url(url, clock=clock) as first:
        agent, _ = await first.create_agent("alice")
        await manage.set_webhook(first, agent.id, receiver.url)
        published = await first.publish("alice", "t", "survives")
        await round_trip(worker(first))
    clock.advance(6)
    async with Hub.from_url(url, clock=clock) as second:
        assert await round_trip(worker(second)) == 1
        event, _ = await second.get_event(published.event.id)
        assert event.status is EventStatus.DELIVERED
    assert len(receiver.requests) == 2


async def test_410_disables_the_endpoint_and_the_event_waits_for_the_drain(
    hub: Hub, receiver: Receiver
) -> None:
    agent, _ = await hub.create_agent("alice")
    await manage.set_webhook(hub, agent.id, receiver.url)
    receiver.script = [(410, {})]
    published = await hub.publish("alice", "t", "gone")
    for n in range(5):  # claimed with it, queued behind it: never sent once the endpoint is gone
        await hub.publish("alice", "t", f"queued {n}")
    await round_trip(worker(hub, per_endpoint=1))
    assert len(receiver.requests) == 1
    (endpoint,) = await hub.store.endpoints(agent.id)
    assert endpoint.state is State.DISABLED and "410" in (endpoint.disabled_reason or "")
    await hub.publish("alice", "t", "after")
    assert await round_trip(worker(hub)) == 0
    drained = await hub.drain(agent, cursor=0)
    queued = [f"queued {n}" for n in range(5)]
    assert [e.text for e in drained.events] == ["gone", *queued, "after"]
    _, attempts = await hub.get_event(published.event.id)
    assert ("webhook", "undeliverable") in [(a.mechanism, a.outcome) for a in attempts]


async def test_a_timeout_is_a_failure_and_all_tries_spent_leaves_it_undeliverable(
    hub: Hub, receiver: Receiver, clock: ManualClock
) -> None:
    agent, _ = await hub.create_agent("alice")
    await manage.set_webhook(hub, agent.id, receiver.url)
    receiver.script = [(HANG, {}), (500, {})]
    published = await hub.publish("alice", "t", "slow")
    work = worker(hub, schedule_s=(0, 1))
    await round_trip(work)
    clock.advance(2)
    await round_trip(work)
    (delivery,) = await hub.store.deliveries(published.event.id)
    _, attempts = await hub.get_event(published.event.id)
    assert [a.outcome for a in attempts] == ["failed", "undeliverable"]
    assert attempts[0].error == "timed out" and delivery.state == "dead"
    (endpoint,) = await hub.store.endpoints(agent.id)
    assert endpoint.last_error and "500" in endpoint.last_error
    assert [e.id for e in (await hub.drain(agent, cursor=0)).events] == [published.event.id]


async def test_an_endpoint_failing_too_long_is_disabled(
    hub: Hub, receiver: Receiver, clock: ManualClock
) -> None:
    agent, _ = await hub.create_agent("alice")
    await manage.set_webhook(hub, agent.id, receiver.url)
    receiver.script = [(500, {})] * 3
    published = await hub.publish("alice", "t", "x")
    work = worker(hub, schedule_s=(0, 1, 1, 1), disable_after_s=10)
    await round_trip(work)  # failing from now on
    clock.advance(9.5)
    assert await round_trip(work) == 1
    assert (await hub.endpoints.of_agent(agent.id))[0].state is State.ACTIVE  # 9.5 s: not yet
    clock.advance(1.2)
    assert await round_trip(work) == 1
    (endpoint,) = await hub.endpoints.of_agent(agent.id)  # 10.7 s: too long
    assert endpoint.state is State.DISABLED
    assert (endpoint.disabled_reason or "").startswith("kept failing for too long")
    clock.advance(60)
    assert await round_trip(work) == 0  # its last try is never sent...
    assert len(receiver.requests) == 3
    drained = await hub.drain(agent, cursor=0)  # ...and the event waits for the drain
    assert [e.id for e in drained.events] == [published.event.id]


async def test_a_password_in_an_endpoints_url_is_used_and_never_logged(
    hub: Hub, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    agent, _ = await hub.create_agent("alice")
    url = receiver.url.replace("http://", "http://hook-user:hunter2-secret@")
    await manage.set_webhook(hub, agent.id, url)
    await hub.publish("alice", "t", "x")
    await round_trip(worker(hub, policy=AddressPolicy()))  # refused: disabled
    (endpoint,) = await hub.endpoints.refused()
    assert [e.id for e in await worker(hub).reenable_allowed()] == [endpoint.id]
    assert await round_trip(worker(hub)) == 1
    (request,) = receiver.requests
    assert request.headers["authorization"] == "Basic aG9vay11c2VyOmh1bnRlcjItc2VjcmV0"
    # herald's own lines (herald serve keeps the HTTP client's at WARNING: logs.QUIET_LOGGERS)
    said = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("herald"))
    assert "re-enabled" in said and "hook-user@127.0.0.1" in said
    assert "hunter2" not in said


async def test_a_refused_address_disables_the_endpoint_until_the_policy_allows_it(
    hub: Hub, receiver: Receiver
) -> None:
    agent, _ = await hub.create_agent("alice")
    _, secret = await manage.set_webhook(hub, agent.id, receiver.url)
    published = await hub.publish("alice", "t", "x")
    await round_trip(worker(hub, policy=AddressPolicy()))
    assert receiver.requests == []
    (endpoint,) = await hub.store.endpoints(agent.id)
    assert endpoint.state is State.DISABLED
    assert endpoint.disabled_reason == (
        REFUSED_PREFIX
        + "127.0.0.1 is a loopback address; herald serve --webhook-allow loopback allows it"
    )
    # The same policy leaves it disabled; one that allows loopback brings it back, secret and
    # waiting delivery kept.
    assert await worker(hub, policy=AddressPolicy()).reenable_allowed() == []
    work = worker(hub, policy=LOOPBACK)
    assert [e.id for e in await work.reenable_allowed()] == [endpoint.id]
    assert await round_trip(work) == 1
    (request,) = receiver.requests
    Webhook(secret).verify(request.body, request.headers)
    assert await status_and_outcomes(hub, published.event.id) == (
        EventStatus.DELIVERED,
        ["failed", "delivered"],
    )
    assert (await hub.store.endpoints(agent.id))[0].state is State.ACTIVE


async def test_a_name_that_does_not_resolve_is_retried_like_any_failure(
    hub: Hub, receiver: Receiver, clock: ManualClock
) -> None:
    dns_is_up = False

    async def flaky_dns(host: str, port: int) -> list[str]:
        if not dns_is_up:
            raise OSError("Temporary failure in name resolution")
        return ["127.0.0.1"]

    agent, _ = await hub.create_agent("alice")
    await manage.set_webhook(hub, agent.id, f"http://hooks.test:{receiver.port}/h")
    published = await hub.publish("alice", "t", "x")
    sender = Sender("http://hub.test", LOOPBACK, timeout_s=0.5, resolver=flaky_dns)
    work = WebhookWorker(hub, sender)
    await round_trip(work)
    (endpoint,) = await hub.store.endpoints(agent.id)
    assert endpoint.state is State.ACTIVE and "does not resolve" in (endpoint.last_error or "")
    (delivery,) = await hub.store.deliveries(published.event.id)
    assert delivery.state == "waiting"
    dns_is_up = True
    clock.advance(6)
    assert await round_trip(work) == 1
    assert await status_and_outcomes(hub, published.event.id) == (
        EventStatus.DELIVERED,
        ["failed", "delivered"],
    )


async def test_redirects_are_not_followed(hub: Hub, receiver: Receiver) -> None:
    agent, _ = await hub.create_agent("alice")
    await manage.set_webhook(hub, agent.id, receiver.url)
    receiver.script = [(307, {"Location": "http://169.254.169.254/latest"})]
    published = await hub.publish("alice", "t", "x")
    await round_trip(worker(hub))
    assert len(receiver.requests) == 1
    _, attempts = await hub.get_event(published.event.id)
    assert "HTTP 307" in (attempts[0].error or "")


async def test_a_slow_endpoint_does_not_hold_up_another_agents(
    tmp_path: Path, clock: ManualClock
) -> None:
    slow, fast = Receiver(script=[(HANG, {})] * 10), Receiver()
    try:
        async with Hub.from_url(f"sqlite:///{tmp_path / 'h.db'}", clock=clock) as hub:
            for handle, target in (("slowpoke", slow), ("quick", fast)):
                agent, _ = await hub.create_agent(handle)
                await manage.set_webhook(hub, agent.id, target.url)
            for n in range(20):  # a backlog, more than the worker holds for one endpoint
                await hub.publish("slowpoke", "t", f"s{n}")
            for n in range(3):
                await hub.publish("quick", "t", f"q{n}")
            work = WebhookWorker(hub, Sender("http://hub", LOOPBACK, timeout_s=20), per_endpoint=3)
            await work.run_once()
            for _ in range(3):
                await asyncio.to_thread(fast.arrived.get, timeout=10)
            assert len(slow.requests) <= 3
            # Later events of the other agent are claimed past the slow one's backlog.
            for n in range(3, 6):
                await hub.publish("quick", "t", f"q{n}")
            await work.run_once()
            for _ in range(3):
                await asyncio.to_thread(fast.arrived.get, timeout=10)
            assert len(slow.requests) <= 3  # still at most 3 in flight to the slow endpoint
            slow.release.set()
            await work.wait_idle()
    finally:
        slow.close()
        fast.close()


async def test_openclaw_wake_and_agent_hooks(hub: Hub, receiver: Receiver) -> None:
    waker, _ = await hub.create_agent("waker")
    runner, _ = await hub.create_agent("runner")
    await manage.set_openclaw(hub, waker.id, receiver.url, "hook-token", "wake")
    await manage.set_openclaw(hub, runner.id, receiver.url + "/", "other-token", "agent")
    woken = await hub.publish("waker", "dm.received", "wake up")
    run = await hub.publish("runner", "build.failed", "build 7 failed")
    await round_trip(worker(hub))
    by_path = {r.path: r for r in receiver.requests}
    wake, agent = by_path["/hooks/wake"], by_path["/hooks/agent"]
    assert wake.headers["authorization"] == "Bearer hook-token"
    assert wake.json["mode"] == "now" and "/channel/heartbeat" in wake.json["text"]
    assert "wake up" in wake.json["text"]
    assert agent.headers["authorization"] == "Bearer other-token"
    assert agent.headers["idempotency-key"] == run.event.id
    assert "build 7 failed" in agent.json["message"]
    for published in (woken, run):
        event, attempts = await hub.get_event(published.event.id)
        assert event.status is EventStatus.SENT  # delivered only once drained
        assert attempts[-1].mechanism == "openclaw"
    drained = await hub.drain(waker, cursor=0)
    assert [e.id for e in drained.events] == [woken.event.id]
    await hub.drain(waker, cursor=drained.cursor)
    assert (await hub.get_event(woken.event.id))[0].status is EventStatus.DELIVERED


async def test_nothing_is_dropped_after_any_mix_of_failures(
    hub: Hub, receiver: Receiver, clock: ManualClock
) -> None:
    agent, _ = await hub.create_agent("alice")
    await manage.set_webhook(hub, agent.id, receiver.url)
    receiver.script = [(500, {}), (200, {}), (410, {})]
    ids = [(await hub.publish("alice", "t", f"e{n}")).event.id for n in range(5)]
    work = worker(hub, per_endpoint=1)
    for _ in range(len(DEFAULTS.webhooks.schedule_s)):
        await round_trip(work)
        clock.advance(40_000)
    drained = {e.id for e in (await hub.drain(agent, cursor=0, limit=100)).events}
    for event_id in ids:
        event, attempts = await hub.get_event(event_id)
        webhook_done = event.status is EventStatus.DELIVERED
        undeliverable = any(a.outcome == "undeliverable" and a.error for a in attempts)
        assert webhook_done or event_id in drained, event_id
        assert webhook_done or undeliverable or event.status.is_open


async def test_each_attempt_is_recorded_and_visible_however_the_results_were_grouped(
    hub: Hub, receiver: Receiver, clock: ManualClock
) -> None:
    handles = ["ann", "bob", "cy"]
    for handle in handles:
        agent, _ = await hub.create_agent(handle)
        await manage.set_webhook(hub, agent.id, f"{receiver.url}/{handle}")
    receiver.script = [(500, {})] * 30  # then 200s: each event fails once at most
    ids = [(await hub.publish(h, "t", f"{h}{n}")).event.id for n in range(40) for h in handles]
    work = worker(hub, timeout_s=10, per_endpoint=4)
    while await round_trip(work):  # more than one claim's worth, recorded as they come
        clock.advance(40_000)  # past each retry's delay
    requests = Counter(request.json["id"] for request in receiver.requests)
    assert requests.total() == len(ids) + 30
    for event_id in ids:
        event, attempts = await hub.get_event(event_id)
        tries = requests[event_id]
        assert [a.outcome for a in attempts] == ["failed"] * (tries - 1) + ["delivered"], event_id
        assert all(a.mechanism == "webhook" for a in attempts)
        assert event.status is EventStatus.DELIVERED


async def test_an_agent_with_a_live_session_gets_the_webhook_only_after_the_ack_timeout(
    hub: Hub, receiver: Receiver, clock: ManualClock
) -> None:
    agent, _ = await hub.create_agent("alice")
    await manage.set_webhook(hub, agent.id, receiver.url)
    acked = await hub.publish("alice", "t", "acknowledged in the session")
    unacked = await hub.publish("alice", "t", "never acknowledged")
    work = WebhookWorker(
        hub, Sender("http://hub", LOOPBACK), grace_s=300, present=lambda: {agent.id}
    )
    assert await round_trip(work) == 0
    await hub.ack(agent, ids=[acked.event.id])
    clock.advance(299)
    assert await round_trip(work) == 0  # the session may still acknowledge it
    clock.advance(2)
    assert await round_trip(work) == 1
    (request,) = receiver.requests
    assert request.headers["webhook-id"] == unacked.event.id


async def test_a_claim_must_outlast_a_request(hub: Hub) -> None:
    sender = Sender("http://hub.test", LOOPBACK, timeout_s=30)
    with pytest.raises(InvalidInput, match="lease_s"):
        WebhookWorker(hub, sender, lease_s=30)
    assert WebhookWorker(hub, sender).lease_s > 3 * 30  # room for the queue ahead of it
    await sender.close()


async def test_results_in_hand_are_recorded_before_the_worker_stops(
    hub: Hub, receiver: Receiver
) -> None:
    agent, _ = await hub.create_agent("alice")
    await manage.set_webhook(hub, agent.id, receiver.url)
    published = await hub.publish("alice", "t", "answered just before the stop")
    writing, go_on = asyncio.Event(), asyncio.Event()
    write = hub.store.finish_deliveries

    async def held_write(finished: Sequence[Finished]) -> None:
        writing.set()
        await go_on.wait()
        await write(finished)

    hub.store.finish_deliveries = held_write  # type: ignore[method-assign]
    running = asyncio.create_task(worker(hub).run())
    await asyncio.wait_for(writing.wait(), 10)  # answered; its result is being written
    running.cancel()
    go_on.set()
    await asyncio.gather(running, return_exceptions=True)
    (delivery,) = await hub.store.deliveries(published.event.id)
    assert delivery.state == "done"


@pytest.mark.parametrize(
    ("retry_after", "lowest_s", "highest_s"),
    [
        ("²", 4.5, 5.5),
        ("9" * 400, 24 * 3600, 24 * 3600),
        ("Fri, 31 Dec 9999 23:59:59 GMT", 86400, 86400),
    ],
)
async def test_a_retry_after_herald_cannot_honour_is_a_failure_like_any_other(
    hub: Hub, receiver: Receiver, retry_after: str, lowest_s: float, highest_s: float
) -> None:
    agent, _ = await hub.create_agent("alice")
    await manage.set_webhook(hub, agent.id, receiver.url)
    receiver.script = [(429, {"Retry-After": retry_after})]
    published = await hub.publish("alice", "t", "throttled")
    assert await round_trip(worker(hub)) == 1
    (delivery,) = await hub.store.deliveries(published.event.id)
    assert lowest_s * 1000 <= delivery.next_at - hub.store.now() <= highest_s * 1000
    _, attempts = await hub.get_event(published.event.id)
    assert [a.outcome for a in attempts] == ["failed"]


async def test_each_retry_waits_its_step_of_the_schedule_give_or_take_the_jitter(
    hub: Hub, receiver: Receiver, clock: ManualClock
) -> None:
    agent, _ = await hub.create_agent("alice")
    await manage.set_webhook(hub, agent.id, receiver.url)
    receiver.script = [(500, {})] * len(DEFAULTS.webhooks.schedule_s)
    published = await hub.publish("alice", "t", "never answered well")
    work = worker(hub)
    assert await round_trip(work) == 1  # the first try, at once
    for step_s in DEFAULTS.webhooks.schedule_s[1:]:
        (delivery,) = await hub.endpoints.deliveries(published.event.id)
        wait_ms = delivery.next_at - hub.now()
        assert step_s * 900 <= wait_ms <= step_s * 1100
        clock.advance((wait_ms - 50) / 1000)
        assert await round_trip(work) == 0  # not a moment early
        clock.advance(0.1)
        assert await round_trip(work) == 1
    _, attempts = await hub.get_event(published.event.id)
    assert [a.outcome for a in attempts] == ["failed"] * 7 + ["undeliverable"]
    clock.advance(48 * 3600)
    assert await round_trip(work) == 0


async def test_a_retry_after_date_is_counted_from_the_hubs_clock(
    hub: Hub, receiver: Receiver, clock: ManualClock
) -> None:
    agent, _ = await hub.create_agent("alice")
    await manage.set_webhook(hub, agent.id, receiver.url)
    clock.advance(12 * 3600)  # the hub's time, not this machine's, is what a retry is kept in
    retry_at = email.utils.formatdate(clock() + 600, usegmt=True)
    receiver.script = [(503, {"Retry-After": retry_at})]
    published = await hub.publish("alice", "t", "throttled until a date")
    assert await round_trip(worker(hub)) == 1
    (delivery,) = await hub.endpoints.deliveries(published.event.id)
    assert 599_000 <= delivery.next_at - hub.now() <= 600_000


async def test_a_claim_that_runs_out_while_queued_is_left_to_whoever_claims_it_next(
    hub: Hub, receiver: Receiver, clock: ManualClock
) -> None:
    agent, _ = await hub.create_agent("alice")
    await manage.set_webhook(hub, agent.id, receiver.url)
    first = await hub.publish("alice", "t", "first")
    second = await hub.publish("alice", "t", "second")
    work = worker(hub, per_endpoint=1)

    def the_lease_runs_out_meanwhile(request: Received) -> None:
        if request.headers["webhook-id"] == first.event.id:
            clock.advance(work.lease_s)

    receiver.on_request = the_lease_runs_out_meanwhile
    assert await round_trip(work) == 2  # one lane: the second waits behind the first
    assert [r.headers["webhook-id"] for r in receiver.requests] == [first.event.id]
    assert await round_trip(work) == 1  # its claim ran out: due again, claimed anew
    assert [r.headers["webhook-id"] for r in receiver.requests] == [
        first.event.id,
        second.event.id,
    ]
    for published in (first, second):
        assert await status_and_outcomes(hub, published.event.id) == (
            EventStatus.DELIVERED,
            ["delivered"],
        )


async def test_a_delivery_claimed_by_a_worker_that_died_is_sent_once_its_lease_runs_out(
    hub: Hub, receiver: Receiver, clock: ManualClock
) -> None:
    agent, _ = await hub.create_agent("alice")
    await manage.set_webhook(hub, agent.id, receiver.url)
    published = await hub.publish("alice", "t", "claimed, then its worker died")
    survivor = worker(hub)
    lease_ms = int(survivor.lease_s * 1000)
    # A process killed mid-request: its claim is in the store, and nothing of it lives to free it.
    await hub.endpoints.schedule(hub.now(), 10)
    assert len(await hub.endpoints.claim("wrk_killed", 10, lease_ms, per_endpoint=4)) == 1
    assert await round_trip(survivor) == 0
    clock.advance(survivor.lease_s - 0.1)
    assert await round_trip(survivor) == 0  # still the dead worker's
    clock.advance(0.2)
    assert await round_trip(survivor) == 1
    assert [r.headers["webhook-id"] for r in receiver.requests] == [published.event.id]
    assert await status_and_outcomes(hub, published.event.id) == (
        EventStatus.DELIVERED,
        ["delivered"],
    )


async def one_hanging_one_queued(hub: Hub, receiver: Receiver) -> tuple[Published, Published]:
    """Two events to an agent whose webhook is ``receiver``, which leaves the first request
    hanging: with one request at a time to it, the second waits behind the first."""
    agent, _ = await hub.create_agent("alice")
    await manage.set_webhook(hub, agent.id, receiver.url)
    receiver.script = [(HANG, {})]
    in_flight = await hub.publish("alice", "t", "in flight")
    return in_flight, await hub.publish("alice", "t", "queued behind it")


async def stopping_worker(
    hub: Hub, receiver: Receiver, caplog: pytest.LogCaptureFixture, stop_grace_s: float
) -> asyncio.Task[None]:
    """A worker with one request at a time to ``receiver``, told to stop once its first request
    is out (herald stops: a restart, a deploy), and given ``stop_grace_s``; returned once it
    waits for that request."""
    stopping = worker(hub, timeout_s=5, per_endpoint=1, stop_grace_s=stop_grace_s)
    running = asyncio.create_task(stopping.run())
    await asyncio.to_thread(receiver.arrived.get, timeout=10)  # both claimed, one request out
    caplog.set_level(logging.INFO, logger="herald.webhooks")
    running.cancel()
    async with asyncio.timeout(10):
        while "requests in flight have" not in caplog.text:
            await asyncio.sleep(0.01)
    return running


async def test_a_worker_that_stops_lets_the_request_in_flight_finish_and_starts_no_other(
    hub: Hub, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    in_flight, queued = await one_hanging_one_queued(hub, receiver)
    running = await stopping_worker(hub, receiver, caplog, stop_grace_s=30)
    receiver.release.set()  # answered within the grace
    await asyncio.gather(running, return_exceptions=True)
    assert [r.headers["webhook-id"] for r in receiver.requests] == [in_flight.event.id]
    assert await status_and_outcomes(hub, in_flight.event.id) == (
        EventStatus.DELIVERED,
        ["delivered"],
    )
    # The one queued behind it was not started, and is free at once for the next claim.
    assert await status_and_outcomes(hub, queued.event.id) == (EventStatus.PENDING, [])
    assert await round_trip(worker(hub)) == 1
    assert [r.headers["webhook-id"] for r in receiver.requests] == [
        in_flight.event.id,
        queued.event.id,
    ]


async def test_a_worker_told_twice_to_stop_cuts_its_requests_off_at_once(
    hub: Hub, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    await one_hanging_one_queued(hub, receiver)
    running = await stopping_worker(hub, receiver, caplog, stop_grace_s=600)
    running.cancel()  # a second Ctrl+C: the grace is not waited out
    async with asyncio.timeout(10):
        await asyncio.gather(running, return_exceptions=True)
    assert await round_trip(worker(hub)) == 2  # both freed for the next claim


async def test_a_worker_that_stops_frees_what_it_claimed_and_did_not_finish(
    hub: Hub, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    in_flight, queued = await one_hanging_one_queued(hub, receiver)
    # The request hangs past the grace: it is cut off.
    running = await stopping_worker(hub, receiver, caplog, stop_grace_s=0.2)
    await asyncio.gather(running, return_exceptions=True)
    # Free at once, not when the claims run out (the clock does not move).
    assert await round_trip(worker(hub)) == 2
    sent = [r.headers["webhook-id"] for r in receiver.requests]
    assert sorted(sent) == sorted([in_flight.event.id, in_flight.event.id, queued.event.id])
    for published in (in_flight, queued):
        assert await status_and_outcomes(hub, published.event.id) == (
            EventStatus.DELIVERED,
            ["delivered"],
        )


async def test_a_worker_told_to_stop_soon_starts_no_other_request_from_then_on(
    hub: Hub, receiver: Receiver
) -> None:
    # herald begins to stop (its HTTP server then waits for its own requests): the worker is
    # told before it is cancelled.
    in_flight, queued = await one_hanging_one_queued(hub, receiver)
    stopping = worker(hub, timeout_s=5, per_endpoint=1, stop_grace_s=30)
    running = asyncio.create_task(stopping.run())
    try:
        await asyncio.to_thread(receiver.arrived.get, timeout=10)  # both claimed, one out
        stopping.stop_soon()
        receiver.release.set()
        async with asyncio.timeout(10):
            while (await status_and_outcomes(hub, in_flight.event.id))[0] != EventStatus.DELIVERED:
                await asyncio.sleep(0.01)
        await stopping.wait_idle()
        assert [r.headers["webhook-id"] for r in receiver.requests] == [in_flight.event.id]
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert await status_and_outcomes(hub, queued.event.id) == (EventStatus.PENDING, [])
    assert await round_trip(worker(hub)) == 1  # freed when it ended


async def test_a_worker_cancelled_once_its_stop_grace_is_spent_cuts_off_at_once(
    hub: Hub, receiver: Receiver, clock: ManualClock
) -> None:
    # The grace began when herald began to stop, and ran out while the HTTP server waited:
    # none of it is left to wait for when the worker is cancelled.
    await one_hanging_one_queued(hub, receiver)
    stopping = worker(hub, timeout_s=5, per_endpoint=1, stop_grace_s=600)
    running = asyncio.create_task(stopping.run())
    await asyncio.to_thread(receiver.arrived.get, timeout=10)
    stopping.stop_soon()
    clock.advance(600)
    running.cancel()
    async with asyncio.timeout(10):
        await asyncio.gather(running, return_exceptions=True)
    assert await round_trip(worker(hub)) == 2  # both freed for the next claim


async def held_anew(hub: Hub, work: WebhookWorker, before: int | None) -> None:
    """Until the worker holds its claims on a new connection."""
    async with asyncio.timeout(20):
        while hub.endpoints.holding(work.claimant) in (None, before):
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("taken_meanwhile", [True, False], ids=["taken", "still-its-own"])
async def test_what_a_worker_claimed_before_its_connection_was_lost_is_not_sent_on_that_claim(
    postgres_database_url: str, receiver: Receiver, taken_meanwhile: bool
) -> None:
    async with Hub.from_url(postgres_database_url) as hub:  # listening, as herald serve is
        in_flight, queued = await one_hanging_one_queued(hub, receiver)
        # A claim lasts 3 x 20 s + 30 s: far past every wait here.
        cut = worker(hub, timeout_s=20, per_endpoint=1)
        running = asyncio.create_task(cut.run())
        try:
            await asyncio.to_thread(receiver.arrived.get, timeout=10)  # both claimed
            before = hub.endpoints.holding(cut.claimant)
            assert before is not None
            await cut_listening_connections(postgres_database_url)
            await held_anew(hub, cut, before)
            if taken_meanwhile:
                # Another process took this one for dead meanwhile, freed its claims and
                # claimed the queued delivery (written here as that process would).
                admin = await asyncpg.connect(postgres_database_url)
                try:
                    await admin.execute(
                        "UPDATE deliveries SET claimed_by = 'wrk_other' WHERE event_id = $1",
                        queued.event.id,
                    )
                finally:
                    await admin.close()
            receiver.release.set()  # the request in flight is answered; the lane goes on
            wanted = EventStatus.PENDING if taken_meanwhile else EventStatus.DELIVERED
            async with asyncio.timeout(20):
                for published, status in ((in_flight, EventStatus.DELIVERED), (queued, wanted)):
                    while (await hub.get_event(published.event.id))[0].status != status:
                        await asyncio.sleep(0.05)
            await cut.wait_idle()
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
        sent = [r.headers["webhook-id"] for r in receiver.requests]
        if taken_meanwhile:  # left to the process that took it
            assert sent == [in_flight.event.id]
        else:  # freed and claimed again at once, not once its claim ran out
            assert sent == [in_flight.event.id, queued.event.id]


async def test_a_running_worker_sends_a_held_back_webhook_once_the_clock_passes_the_ack_timeout(
    hub: Hub, receiver: Receiver, clock: ManualClock
) -> None:
    here, _ = await hub.create_agent("here")
    away, _ = await hub.create_agent("away")
    await manage.set_webhook(hub, here.id, receiver.url + "/here")
    await manage.set_webhook(hub, away.id, receiver.url + "/away")
    receiver.script = [(HANG, {})]
    await hub.publish("here", "t", "held back while its session may acknowledge it")
    await hub.publish("away", "t", "sent at once")
    # A long poll: after its first round the worker looks again only when woken.
    work = worker(hub, timeout_s=10, grace_s=300, present=lambda: {here.id}, poll_interval_s=60)
    running = asyncio.create_task(work.run())
    try:
        assert (await asyncio.to_thread(receiver.arrived.get, timeout=10)).path == "/away"
        clock.advance(301)
        receiver.release.set()  # the answer wakes the worker: no publish, no poll
        assert (await asyncio.to_thread(receiver.arrived.get, timeout=10)).path == "/here"
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


LOCK_WAITS = (
    "SELECT count(*) FROM pg_stat_activity"
    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
)


async def test_a_webhook_deleted_while_deliveries_are_scheduled_fails_no_round(
    postgres_database_url: str, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    """A round schedules the deliveries of two agents' events, one of whose webhooks is deleted
    while the schedule runs (it is held at a delivery another transaction is inserting). The
    round goes on: the other agent's event is delivered, the deleted webhook gets nothing, its
    event waits for the drain, and nothing is logged as an outage."""
    caplog.set_level(logging.WARNING, logger="herald")
    watcher = await asyncpg.connect(postgres_database_url)
    holder = await asyncpg.connect(postgres_database_url)

    async def waiting(count: int) -> bool:
        return bool(await watcher.fetchval(LOCK_WAITS) >= count)

    try:
        async with Hub.from_url(postgres_database_url) as hub:
            ids = {}
            for handle in ("kept", "gone"):
                agent, _ = await hub.create_agent(handle)
                if handle == "gone":  # scheduled in seq order: its event after the one held
                    await hub.publish(handle, "t", "drained")
                    await hub.drain(agent)
                await manage.set_webhook(hub, agent.id, receiver.url)
                ids[handle] = (agent.id, (await hub.publish(handle, "t", handle)).event.id)
            (kept_endpoint,) = await hub.endpoints.of_agent(ids["kept"][0])
            transaction = holder.transaction()
            await transaction.start()
            await holder.execute(
                "INSERT INTO deliveries (endpoint_id, event_id, next_at) VALUES ($1, $2, 0)",
                kept_endpoint.id,
                ids["kept"][1],
            )
            work = worker(hub)
            round_ = asyncio.create_task(work.run_once())
            await until(lambda: waiting(1), "the schedule waits for the delivery being inserted")
            deleted = asyncio.create_task(manage.remove(hub, ids["gone"][0], Kind.WEBHOOK))

            async def deleted_or_waiting() -> bool:
                return deleted.done() or await waiting(2)

            await until(deleted_or_waiting, "the deletion is done or waits for the schedule")
            await transaction.rollback()  # the schedule goes on
            assert await round_ == 1
            await deleted
            await work.wait_idle()
            assert await status_and_outcomes(hub, ids["kept"][1]) == (
                EventStatus.DELIVERED,
                ["delivered"],
            )
            assert await status_and_outcomes(hub, ids["gone"][1]) == (EventStatus.PENDING, [])
            assert [
                request.body for request in receiver.requests if b'"gone"' in request.body
            ] == []
    finally:
        await holder.close()
        await watcher.close()
    assert [record.getMessage() for record in caplog.records] == []
