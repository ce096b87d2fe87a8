"""MCP Events webhook subscriptions in process: ``events/subscribe`` verifies the endpoint, the
webhook worker delivers each matching event, signed, to a real HTTP receiver; refresh, TTL,
410/413, unsubscribe and bad input. Time is the hub's manual clock: expiry and retries come by
moving it, never by waiting."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from standardwebhooks import Webhook

from herald import EventStatus, Hub
from herald.addresses import AddressPolicy
from herald.capabilities import WEBHOOK_ID_MESSAGE
from herald.config import SubscriptionConfig
from herald.errors import (
    CallbackEndpointError,
    InvalidInput,
    LimitReached,
    NotFound,
    SubscriptionNotFound,
    Unsupported,
)
from herald.inputs.refusals import parse
from herald.inputs.subscriptions import SubscribeInput, UnsubscribeInput
from herald.models import Agent, Kind
from herald.testing import ManualClock
from herald.webhooks import subscriptions
from herald.webhooks.sender import MAX_BODY_BYTES, SUBSCRIPTION_HEADER, Sender
from herald.webhooks.worker import HOLD, WebhookWorker
from tests.webhooks.receiver import HANG, Received, Receiver

pytestmark = pytest.mark.anyio

LOOPBACK = AddressPolicy(allow_loopback=True)
SECRET = "whsec_" + base64.b64encode(b"s" * 32).decode()
OTHER_SECRET = "whsec_" + base64.b64encode(b"t" * 32).decode()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver(answers_challenges=True)
    yield running
    running.close()


@pytest.fixture
def sender(hub: Hub) -> Sender:
    return Sender("http://hub.test", LOOPBACK, timeout_s=2, clock=hub.clock)


@pytest.fixture
def worker(hub: Hub, sender: Sender) -> WebhookWorker:
    return WebhookWorker(hub, sender)


async def alice(hub: Hub) -> Agent:
    agent, _ = await hub.create_agent("alice")
    return agent


def params(url: str, **fields: Any) -> SubscribeInput:
    raw: dict[str, Any] = {
        "name": "herald.event",
        "arguments": {"types": ["dm.*"]},
        "delivery": {"mode": "webhook", "url": url, "secret": SECRET},
        **fields,
    }
    return parse(SubscribeInput, raw, "params")


async def subscribe(
    hub: Hub, sender: Sender, agent: Agent, url: str, **fields: Any
) -> dict[str, Any]:
    return await subscriptions.subscribe(hub, sender, agent, params(url, **fields))


async def deliver(worker: WebhookWorker) -> int:
    started = await worker.run_once()
    await worker.wait_idle()
    return started


def events_of(receiver: Receiver) -> list[Received]:
    return [r for r in receiver.requests if "type" not in r.json]


async def test_subscribe_verifies_the_endpoint_then_each_matching_event_is_delivered_signed(
    hub: Hub, sender: Sender, worker: WebhookWorker, receiver: Receiver
) -> None:
    agent = await alice(hub)
    result = await subscribe(hub, sender, agent, receiver.url + "/hooks")
    assert result["id"].startswith("sub_") and len(result["id"]) == 20
    assert (
        result["cursor"] == f"{agent.id}~{await hub.history()}~0" and result["truncated"] is False
    )
    assert "deliveryStatus" not in result and result["refreshBefore"].endswith("Z")
    (challenge,) = receiver.requests
    assert challenge.headers["webhook-id"].startswith("msg_verification_")
    assert challenge.headers[SUBSCRIPTION_HEADER.lower()] == result["id"]
    assert challenge.headers["content-type"] == "application/json"
    assert Webhook(SECRET).verify(challenge.body, challenge.headers)["type"] == "verification"

    dm = await hub.publish("alice", "dm.received", "hello", data={"n": 1})
    await hub.publish("alice", "build.failed", "not matched")
    assert await deliver(worker) == 1
    (request,) = events_of(receiver)
    assert request.path == "/hooks" and request.headers["webhook-id"] == dm.event.id
    assert request.headers[SUBSCRIPTION_HEADER.lower()] == result["id"]
    body = Webhook(SECRET).verify(request.body, request.headers)
    assert body["eventId"] == dm.event.id and body["name"] == "herald.event"
    assert body["data"]["type"] == "dm.received" and body["data"]["data"] == {"n": 1}
    assert body["cursor"] == f"{agent.id}~{await hub.history()}~2"  # past the one it does not match
    event, attempts = await hub.get_event(dm.event.id)
    assert event.status is EventStatus.DELIVERED
    assert [(a.mechanism, a.outcome, a.session) for a in attempts] == [
        ("subscription", "delivered", result["id"])
    ]
    # Nothing more is sent: the other event does not match.
    assert await deliver(worker) == 0


async def test_a_subscription_made_after_a_round_found_no_endpoint_gets_its_events(
    hub: Hub, sender: Sender, worker: WebhookWorker, receiver: Receiver
) -> None:
    # With no endpoint the worker's rounds leave the store alone: a subscription is one.
    agent = await alice(hub)
    assert await deliver(worker) == 0
    await subscribe(hub, sender, agent, receiver.url)
    dm = await hub.publish("alice", "dm.received", "to the new subscription")
    assert await deliver(worker) == 1
    assert [r.json["eventId"] for r in events_of(receiver)] == [dm.event.id]


async def test_a_given_cursor_starts_delivery_after_it_and_acknowledges_nothing_unseen(
    hub: Hub, sender: Sender, worker: WebhookWorker, receiver: Receiver
) -> None:
    agent = await alice(hub)
    first = await hub.publish("alice", "dm.received", "waiting before")
    second = await hub.publish("alice", "dm.received", "also waiting")
    result = await subscribe(
        hub, sender, agent, receiver.url, cursor=f"{agent.id}~{await hub.history()}~1"
    )
    assert result["cursor"] == f"{agent.id}~{await hub.history()}~1"
    event, _ = await hub.get_event(first.event.id)
    assert event.status is EventStatus.PENDING  # never handed to this subscription: still owed
    await deliver(worker)
    assert [r.json["eventId"] for r in events_of(receiver)] == [second.event.id]


async def test_a_refresh_keeps_the_id_replaces_the_secret_and_reports_the_delivery_status(
    hub: Hub, sender: Sender, worker: WebhookWorker, receiver: Receiver, clock: ManualClock
) -> None:
    agent = await alice(hub)
    first = await subscribe(hub, sender, agent, receiver.url, ttlMs=120_000)
    receiver.script = [(503, {})]
    await hub.publish("alice", "dm.received", "fails once")
    await deliver(worker)
    clock.advance(10)
    second = await subscriptions.subscribe(
        hub,
        sender,
        agent,
        parse(
            SubscribeInput,
            {
                "name": "herald.event",
                "arguments": {"types": ["dm.*"]},
                "delivery": {"url": receiver.url, "secret": OTHER_SECRET},
                "ttlMs": 600_000,
            },
        ),
    )
    assert second["id"] == first["id"]
    assert second["refreshBefore"] > first["refreshBefore"]
    status = second["deliveryStatus"]
    assert status["active"] is True and status["lastDeliveryAt"] is None
    assert status["lastError"] == "http_5xx" and "failedSince" in status
    assert (
        second["cursor"] == f"{agent.id}~{await hub.history()}~0"
    )  # the failed event is still outstanding
    assert len([r for r in receiver.requests if "type" in r.json]) == 1  # verified once
    await deliver(worker)  # the retry, 5 s later: signed with both secrets meanwhile
    retry = events_of(receiver)[-1]
    assert len(retry.headers["webhook-signature"].split(" ")) == 2
    Webhook(OTHER_SECRET).verify(retry.body, retry.headers)
    third = await subscribe(hub, sender, agent, receiver.url)
    assert third["deliveryStatus"]["lastError"] is None
    assert third["deliveryStatus"]["lastDeliveryAt"] is not None
    assert third["cursor"] == f"{agent.id}~{await hub.history()}~1"


async def test_the_ttl_is_granted_within_the_bounds_never_refused(
    hub: Hub, sender: Sender, receiver: Receiver
) -> None:
    agent = await alice(hub)
    config = SubscriptionConfig(default_ttl_s=600, max_ttl_s=3600, min_ttl_s=60)
    now = hub.now()
    for fields, granted_s in [
        ({}, 600),
        ({"ttlMs": 1}, 60),
        ({"ttlMs": -1}, 60),
        ({"ttlMs": 10_000_000}, 3600),
        ({"ttlMs": 367 * 86_400_000}, 3600),
        ({"ttlMs": 10**400}, 3600),
        ({"ttlMs": 120_000}, 120),
        ({"ttlMs": None}, 3600),
    ]:
        assert (
            subscriptions.expiry(params(receiver.url, **fields), config, now)
            == now + granted_s * 1000
        )
    allowing = SubscriptionConfig(allow_no_expiry=True)
    assert subscriptions.expiry(params(receiver.url, ttlMs=None), allowing, now) is None
    result = await subscriptions.subscribe(
        hub, sender, agent, params(receiver.url, ttlMs=None), allowing
    )
    assert result["refreshBefore"] is None


async def test_an_agent_holds_at_most_the_limit_a_refresh_is_always_taken(
    hub: Hub, sender: Sender, receiver: Receiver, clock: ManualClock
) -> None:
    agent = await alice(hub)
    bob, _ = await hub.create_agent("bob")
    config = SubscriptionConfig(max_per_agent=2)

    def of_type(glob: str, url: str = receiver.url) -> SubscribeInput:
        raw = {
            "name": "herald.event",
            "arguments": {"types": [glob]},
            "delivery": {"url": url, "secret": SECRET},
            "ttlMs": 60_000,
        }
        return parse(SubscribeInput, raw, "params")

    first = await subscriptions.subscribe(hub, sender, agent, of_type("a.*"), config)
    await subscriptions.subscribe(hub, sender, agent, of_type("b.*"), config)
    challenges = len(receiver.requests)
    with pytest.raises(LimitReached) as refused:
        await subscriptions.subscribe(
            hub, sender, agent, of_type("c.*", receiver.url + "/new"), config
        )
    assert (refused.value.limit, refused.value.maximum) == ("subscriptions", 2)
    assert "events/unsubscribe" in refused.value.message
    assert len(receiver.requests) == challenges  # not verified
    assert len(await hub.subscriptions.of_agent(agent.id)) == 2
    again = await subscriptions.subscribe(hub, sender, agent, of_type("a.*"), config)
    assert again["id"] == first["id"]
    await subscriptions.subscribe(hub, sender, bob, of_type("a.*"), config)  # per agent
    await subscriptions.subscribe(
        hub, sender, agent, of_type("c.*"), SubscriptionConfig(max_per_agent=0)
    )
    clock.advance(61)  # the three lapse: expired ones are not held
    await subscriptions.subscribe(hub, sender, agent, of_type("d.*"), config)


async def test_subscribes_racing_past_the_check_still_end_at_the_limit(
    store_url: str, clock: ManualClock, receiver: Receiver
) -> None:
    config = SubscriptionConfig(max_per_agent=2)
    sender = Sender("http://hub.test", LOOPBACK, timeout_s=10, clock=clock)
    async with Hub.from_url(store_url, clock=clock) as hub:
        agent = await alice(hub)
        await subscriptions.subscribe(hub, sender, agent, params(receiver.url + "/held"), config)
        # Each challenge is answered only once both have come: both subscribes are past the
        # early check, each seeing one held of two, before either stores anything.
        both_verifying = threading.Barrier(2, timeout=5)
        receiver.on_request = lambda _: both_verifying.wait()
        results = await asyncio.gather(
            *(
                subscriptions.subscribe(hub, sender, agent, params(receiver.url + path), config)
                for path in ("/one", "/two")
            ),
            return_exceptions=True,
        )
        refused = [r for r in results if isinstance(r, BaseException)]
        assert len(refused) == 1 and isinstance(refused[0], LimitReached), results
        assert (refused[0].limit, refused[0].maximum) == ("subscriptions", 2)
        assert len(await hub.subscriptions.of_agent(agent.id)) == 2


async def test_an_expired_subscription_stops_and_maintenance_deletes_it(
    hub: Hub, sender: Sender, worker: WebhookWorker, receiver: Receiver, clock: ManualClock
) -> None:
    agent = await alice(hub)
    result = await subscribe(hub, sender, agent, receiver.url, ttlMs=60_000)
    receiver.script = [(500, {})]
    published = await hub.publish("alice", "dm.received", "retried until it lapses")
    await deliver(worker)
    clock.advance(61)
    assert await deliver(worker) == 0  # its retry is not sent
    await hub.maintain_once()
    assert await hub.subscriptions.get(result["id"]) is None
    assert await hub.endpoints.deliveries(published.event.id) == []
    event, _ = await hub.get_event(published.event.id)
    assert event.status is EventStatus.PENDING  # still drainable


@pytest.mark.parametrize("status", [410, 413])
async def test_410_and_413_end_that_delivery_not_the_subscription(
    hub: Hub,
    sender: Sender,
    worker: WebhookWorker,
    receiver: Receiver,
    clock: ManualClock,
    status: int,
) -> None:
    agent = await alice(hub)
    result = await subscribe(hub, sender, agent, receiver.url)
    receiver.script = [(status, {})]
    refused = await hub.publish("alice", "dm.received", "refused")
    await deliver(worker)
    # The endpoint is told at once that this event was given up on, with a cursor past it.
    gap = receiver.requests[-1]
    assert gap.headers["webhook-id"].startswith("msg_gap_")
    assert gap.headers[SUBSCRIPTION_HEADER.lower()] == result["id"]
    assert Webhook(SECRET).verify(gap.body, gap.headers) == {
        "type": "gap",
        "cursor": f"{agent.id}~{await hub.history()}~1",
    }
    clock.advance(700)  # past every retry
    later = await hub.publish("alice", "dm.received", "delivered")
    await deliver(worker)
    assert [r.json["eventId"] for r in events_of(receiver)] == [refused.event.id, later.event.id]
    (delivery,) = await hub.endpoints.deliveries(refused.event.id)
    assert delivery.state == "dead" and delivery.attempts == 1
    found = await hub.subscriptions.get(result["id"])
    assert found is not None and found[0].kind is Kind.SUBSCRIPTION
    refreshed = await subscribe(hub, sender, agent, receiver.url)
    assert refreshed["deliveryStatus"]["active"] is True
    assert (
        refreshed["cursor"] == f"{agent.id}~{await hub.history()}~2"
    )  # the refused one was given up on


async def test_a_body_over_256_kib_is_not_sent_and_the_attempt_says_why(
    hub: Hub, sender: Sender, worker: WebhookWorker, receiver: Receiver
) -> None:
    agent = await alice(hub)
    await subscribe(hub, sender, agent, receiver.url)
    # Within an event's limit, but each newline is two bytes in the JSON body.
    big = await hub.publish("alice", "dm.received", "\n" * (MAX_BODY_BYTES * 3 // 4))
    await deliver(worker)
    assert events_of(receiver) == []
    _, attempts = await hub.get_event(big.event.id)
    (attempt,) = attempts
    assert attempt.outcome == "undeliverable" and "over the 262144" in (attempt.error or "")


async def test_failures_are_retried_on_the_subscription_schedule(
    hub: Hub, sender: Sender, worker: WebhookWorker, receiver: Receiver, clock: ManualClock
) -> None:
    agent = await alice(hub)
    await subscribe(hub, sender, agent, receiver.url)
    receiver.script = [(500, {})] * 5
    published = await hub.publish("alice", "dm.received", "never taken")
    waits = [5, 30, 120, 600]
    await deliver(worker)
    for wait in waits:
        assert await deliver(worker) == 0
        clock.advance(wait * 1.2)
        assert await deliver(worker) == 1
    (delivery,) = await hub.endpoints.deliveries(published.event.id)
    assert delivery.state == "dead" and delivery.attempts == 5
    # Given up on after the fifth: a gap follows it (answered 200: the script is out).
    assert [r.json.get("type") for r in receiver.requests[1:]] == [None] * 5 + ["gap"]
    assert receiver.requests[-1].json["cursor"] == f"{agent.id}~{await hub.history()}~1"
    event, _ = await hub.get_event(published.event.id)
    assert event.status is EventStatus.PENDING  # still in the inbox for its other ways


@pytest.mark.parametrize(
    ("script", "answers", "reason"),
    [
        ([(200, {})], False, "challenge_failed"),
        ([(404, {})], True, "http_4xx"),
        ([(500, {})], True, "http_5xx"),
    ],
)
async def test_an_endpoint_that_fails_verification_is_refused_and_nothing_is_stored(
    hub: Hub,
    sender: Sender,
    receiver: Receiver,
    script: list[tuple[int, dict[str, str]]],
    answers: bool,
    reason: str,
) -> None:
    agent = await alice(hub)
    receiver.script, receiver.answers_challenges = script, answers
    with pytest.raises(CallbackEndpointError) as refused:
        await subscribe(hub, sender, agent, receiver.url)
    assert refused.value.reason == reason and "params.delivery.url" in refused.value.message
    assert await hub.subscriptions.of_agent(agent.id) == []


async def test_an_endpoint_that_refuses_connections_fails_verification(
    hub: Hub, sender: Sender
) -> None:
    agent = await alice(hub)
    closed = Receiver()
    closed.close()
    with pytest.raises(CallbackEndpointError) as refused:
        await subscribe(hub, sender, agent, closed.url)
    assert refused.value.reason == "connection_refused"


@pytest.mark.parametrize(
    ("change", "error", "names"),
    [
        ({"delivery": {"url": "http://example.com/", "secret": SECRET}}, InvalidInput, "url"),
        ({"delivery": {"url": "ftp://x/", "secret": SECRET}}, InvalidInput, "url"),
        (
            {"delivery": {"url": "https://user:pass@x.example/h", "secret": SECRET}},
            InvalidInput,
            "params.delivery.url must not hold credentials",
        ),
        (
            {"delivery": {"url": "https://x.example/h#part", "secret": SECRET}},
            InvalidInput,
            "params.delivery.url must not have a fragment",
        ),
        ({"delivery": {"url": "https://x/", "secret": "whsec_c2hvcnQ="}}, InvalidInput, "secret"),
        ({"delivery": {"url": "https://x/", "secret": "nope"}}, InvalidInput, "secret"),
        ({"name": "no.such.entry"}, NotFound, "no.such.entry"),
        ({"arguments": {"types": "dm.*"}}, InvalidInput, "arguments.types"),
        ({"arguments": {"colour": 1}}, InvalidInput, "colour"),
        ({"delivery": {"mode": "push", "url": "https://x/", "secret": SECRET}}, Unsupported, ""),
        ({"cursor": "agt_someone~1"}, InvalidInput, "cursor"),
        ({"maxEvents": 10}, InvalidInput, "params.maxEvents is not taken by events/subscribe"),
        ({"ttlMs": "60000"}, InvalidInput, "params.ttlMs must be a whole number"),
        ({"ttlMs": True}, InvalidInput, "params.ttlMs must be a whole number"),
        ({"ttlMs": 60000.5}, InvalidInput, "params.ttlMs must be a whole number"),
    ],
)
async def test_bad_input_is_refused_naming_the_field_and_changes_nothing(
    hub: Hub,
    sender: Sender,
    receiver: Receiver,
    change: dict[str, Any],
    error: type[Exception],
    names: str,
) -> None:
    agent = await alice(hub)
    raw: dict[str, Any] = {
        "name": "herald.event",
        "arguments": {},
        "delivery": {"url": receiver.url, "secret": SECRET},
        **change,
    }
    with pytest.raises(error) as refused:
        await subscriptions.subscribe(hub, sender, agent, parse(SubscribeInput, raw, "params"))
    assert names in str(refused.value)
    if isinstance(refused.value, Unsupported):
        assert (refused.value.feature, refused.value.value) == ("deliveryMode", "push")
    assert receiver.requests == [] and await hub.subscriptions.of_agent(agent.id) == []


async def test_unsubscribe_ends_only_the_callers_own_subscription(
    hub: Hub, sender: Sender, worker: WebhookWorker, receiver: Receiver
) -> None:
    agent = await alice(hub)
    mallory, _ = await hub.create_agent("mallory")
    result = await subscribe(hub, sender, agent, receiver.url)
    raw = {
        "name": "herald.event",
        "arguments": {"types": ["dm.*"]},
        "delivery": {"url": receiver.url},
    }
    target = parse(UnsubscribeInput, raw, "params")
    with pytest.raises(SubscriptionNotFound):
        await subscriptions.unsubscribe(hub, mallory, target)
    assert await hub.subscriptions.get(result["id"]) is not None
    assert await subscriptions.unsubscribe(hub, agent, target) == {}
    assert await hub.subscriptions.get(result["id"]) is None
    with pytest.raises(SubscriptionNotFound):
        await subscriptions.unsubscribe(hub, agent, target)
    await hub.publish("alice", "dm.received", "after the end")
    assert await deliver(worker) == 0


async def test_each_body_carries_a_cursor_past_the_events_delivered_before_it(
    hub: Hub, sender: Sender, receiver: Receiver
) -> None:
    agent = await alice(hub)
    await subscribe(hub, sender, agent, receiver.url)
    for n in range(HOLD + 1):
        await hub.publish("alice", "dm.received", f"dm {n}")  # seqs 1 to HOLD + 1
    worker = WebhookWorker(hub, sender, per_endpoint=1)  # one request at a time, in seq order
    assert await deliver(worker) == HOLD  # as many as one endpoint holds: the last comes next
    assert await deliver(worker) == 1
    # Each body's cursor passes its own event and those before it, though the store hears of
    # their deliveries only later: a client that keeps the newest cursor has seen all of them.
    assert [r.json["cursor"] for r in events_of(receiver)] == [
        f"{agent.id}~{await hub.history()}~{seq}" for seq in range(1, HOLD + 2)
    ]


async def test_what_is_held_of_a_subscription_is_not_sent_once_it_is_unsubscribed(
    hub: Hub, sender: Sender, receiver: Receiver
) -> None:
    agent = await alice(hub)
    receiver.script = [(200, {}), (HANG, {})]  # the challenge, then the first event hangs
    await subscribe(hub, sender, agent, receiver.url)
    receiver.arrived.get(timeout=10)  # the challenge
    first = await hub.publish("alice", "dm.received", "in flight")
    for n in range(2):
        await hub.publish("alice", "dm.received", f"held {n}")
    worker = WebhookWorker(hub, sender, per_endpoint=1)
    assert await worker.run_once() == 3  # all three claimed; one request at a time
    in_flight = await asyncio.to_thread(receiver.arrived.get, timeout=10)
    assert in_flight.json["eventId"] == first.event.id
    target = {
        "name": "herald.event",
        "arguments": {"types": ["dm.*"]},
        "delivery": {"url": receiver.url},
    }
    await subscriptions.unsubscribe(hub, agent, parse(UnsubscribeInput, target, "params"))
    receiver.release.set()
    await worker.wait_idle()
    assert [r.json["eventId"] for r in events_of(receiver)] == [first.event.id]


async def test_the_id_is_derived_from_the_key_alone() -> None:
    agent = Agent("agt_1", "alice", "h", 0)
    same = subscriptions.subscription_id(
        agent, "https://x/", "n", {"b": 1, "a": [1, {"d": 2, "c": 3}]}
    )
    assert same == subscriptions.subscription_id(
        agent, "https://x/", "n", json.loads('{"a": [1, {"c": 3, "d": 2}], "b": 1}')
    )
    assert same != subscriptions.subscription_id(agent, "https://x/", "n", {"b": 2})
    assert same != subscriptions.subscription_id(
        Agent("agt_2", "bob", "h", 0), "https://x/", "n", {}
    )


def terminations(receiver: Receiver) -> list[dict[str, Any]]:
    return [
        Webhook(SECRET).verify(r.body, r.headers)
        for r in receiver.requests
        if r.json.get("type") == "terminated"
    ]


async def test_deleting_its_event_type_ends_a_subscription_and_tells_the_endpoint(
    hub: Hub, sender: Sender, worker: WebhookWorker, receiver: Receiver
) -> None:
    agent = await alice(hub)
    await hub.event_types.put("build.failed", "a build failed", None)
    raw = {"name": "build.failed", "delivery": {"url": receiver.url, "secret": SECRET}}
    typed = await subscriptions.subscribe(hub, sender, agent, parse(SubscribeInput, raw, "params"))
    kept = await subscribe(hub, sender, agent, receiver.url)
    await deliver(worker)
    assert terminations(receiver) == []
    await hub.event_types.delete("build.failed")
    await deliver(worker)
    (ended,) = terminations(receiver)
    assert ended["error"]["code"] == -32023 and ended["error"]["data"]["kind"] == "event"
    terminated = next(r for r in receiver.requests if r.json.get("type") == "terminated")
    assert terminated.headers["webhook-id"].startswith("msg_terminated_")
    assert terminated.headers[SUBSCRIPTION_HEADER.lower()] == typed["id"]
    assert await hub.subscriptions.get(typed["id"]) is None
    assert await hub.subscriptions.get(kept["id"]) is not None


async def test_deleting_the_agent_ends_its_subscriptions_and_tells_the_endpoint(
    hub: Hub, sender: Sender, worker: WebhookWorker, receiver: Receiver
) -> None:
    agent = await alice(hub)
    made = await subscribe(hub, sender, agent, receiver.url)
    await hub.delete_agent(agent.id)
    await worker.wait_idle()
    (ended,) = terminations(receiver)
    assert ended["error"]["code"] == -32024
    assert receiver.requests[-1].headers[SUBSCRIPTION_HEADER.lower()] == made["id"]
    assert await hub.subscriptions.get(made["id"]) is None


async def test_an_event_the_webhook_gave_up_on_stays_owed_whatever_cursor_a_refresh_sends(
    hub: Hub, sender: Sender, worker: WebhookWorker, receiver: Receiver
) -> None:
    agent = await alice(hub)
    first = await subscribe(hub, sender, agent, receiver.url)
    receiver.script = [(410, {})]
    gone = await hub.publish("alice", "dm.received", "answered 410: not retried")
    await deliver(worker)
    refreshed = await subscribe(hub, sender, agent, receiver.url, cursor=first["cursor"])
    await subscribe(hub, sender, agent, receiver.url, cursor=refreshed["cursor"])
    event, _ = await hub.get_event(gone.event.id)
    assert event.status is EventStatus.PENDING  # owed to the agent another way


async def test_a_subscription_made_anew_under_the_same_id_gets_cursors_from_its_own_debts(
    hub: Hub, sender: Sender, receiver: Receiver, clock: ManualClock
) -> None:
    agent = await alice(hub)
    await subscribe(hub, sender, agent, receiver.url, ttlMs=60_000)
    first = await hub.publish("alice", "dm.received", "given up, stays pending")  # seq 1
    second = await hub.publish("alice", "dm.received", "given up too")  # seq 2
    worker = WebhookWorker(hub, sender, per_endpoint=1)
    receiver.script = [(410, {}), (200, {}), (410, {}), (200, {})]  # each event, then its gap
    assert await deliver(worker) == 2
    # The grant lapses and maintenance deletes it; the client subscribes again (same key, so
    # the same id) from the cursor its first subscribe gave: both events are owed again.
    clock.advance(61)
    await hub.maintain_once()
    again = await subscribe(
        hub, sender, agent, receiver.url, cursor=f"{agent.id}~{await hub.history()}~0"
    )
    assert again["cursor"] == f"{agent.id}~{await hub.history()}~0"
    receiver.requests.clear()
    receiver.script = [(200, {}), (500, {})]  # the first delivered, the second to be retried
    await deliver(worker)
    bodies = {r.json["eventId"]: r.json["cursor"] for r in events_of(receiver)}
    # The first's body must not pass the second, still owed (its try failed, a retry is due).
    (delivery,) = await hub.endpoints.deliveries(second.event.id)
    assert delivery.state == "waiting"
    assert bodies[first.event.id] == f"{agent.id}~{await hub.history()}~1"


async def test_a_subscription_for_a_client_that_checks_message_ids_gets_one_per_delivery(
    hub: Hub, sender: Sender, worker: WebhookWorker, clock: ManualClock
) -> None:
    # The challenge is answered; the first delivery fails once and is sent again.
    receiver = Receiver(answers_challenges=True, script=[(200, {}), (503, {})])
    try:
        agent = await alice(hub)
        made = await subscriptions.subscribe(
            hub, sender, agent, params(receiver.url), webhook_id=WEBHOOK_ID_MESSAGE
        )
        dm = await hub.publish("alice", "dm.received", "sent twice")
        await deliver(worker)
        clock.advance(10)
        await deliver(worker)
        failed, sent = events_of(receiver)
        message_id = sent.headers["webhook-id"]
        assert message_id.startswith("msg_") and message_id != dm.event.id
        assert failed.headers["webhook-id"] == message_id  # a retry is the same message
        assert Webhook(SECRET).verify(sent.body, sent.headers)["eventId"] == dm.event.id
        # A refresh keeps the subscription's kind of id, whatever the refreshing client asks.
        again = await subscriptions.subscribe(hub, sender, agent, params(receiver.url))
        assert again["id"] == made["id"]
        later = await hub.publish("alice", "dm.received", "after the refresh")
        await deliver(worker)
        last = events_of(receiver)[-1]
        assert last.json["eventId"] == later.event.id
        assert last.headers["webhook-id"].startswith("msg_")
        assert last.headers["webhook-id"] not in (later.event.id, message_id)
    finally:
        receiver.close()
