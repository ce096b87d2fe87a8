"""Two herald processes on one PostgreSQL database serve one MCP Events webhook subscription:
each matching event, published through either, is delivered once (the worker's claim keeps the
other process away), never twice; and once one ends it, the other sends nothing more of it."""

from __future__ import annotations

import asyncio
import queue
import time
from collections import Counter

import pytest
from standardwebhooks import Webhook

from herald import Hub
from herald.addresses import AddressPolicy
from herald.inputs.refusals import parse
from herald.inputs.subscriptions import SubscribeInput, UnsubscribeInput
from herald.webhooks import subscriptions
from herald.webhooks.sender import Sender
from herald.webhooks.worker import WebhookWorker
from tests.herald_process import HeraldProcess
from tests.http.test_mcp import new_agent, publish
from tests.http.test_mcp_events import agent_http
from tests.http.test_mcp_webhooks import LOOPBACK, SECRET, call, subscription
from tests.webhooks.receiver import HANG, Receiver

pytestmark = pytest.mark.anyio

EVENTS = 40
WAIT_S = 30.0


async def test_two_processes_deliver_each_event_of_a_subscription_once(
    postgres_database_url: str,
) -> None:
    receiver = Receiver(answers_challenges=True)
    first = HeraldProcess(postgres_database_url, extra_args=LOOPBACK)
    second = HeraldProcess(postgres_database_url, extra_args=LOOPBACK)
    try:
        agent = new_agent(first)
        async with agent_http(first, agent["api_key"]) as http:
            made = await call(http, "modern", "events/subscribe", subscription(receiver.url))
        assert made["result"]["id"].startswith("sub_")
        published = [
            publish(first if n % 2 else second, agent["handle"], f"event {n}")
            for n in range(EVENTS)
        ]
        received: list[str] = []
        deadline = time.monotonic() + WAIT_S
        while len(received) < EVENTS:
            left = deadline - time.monotonic()
            assert left > 0, f"only {len(received)} of {EVENTS} events arrived"
            try:
                got = await asyncio.to_thread(receiver.arrived.get, timeout=left)
            except queue.Empty:
                continue
            body = Webhook(SECRET).verify(got.body, got.headers)
            if "type" not in body:
                received.append(body["eventId"])
        assert sorted(received) == sorted(published)
        with first.client(first.admin_key) as admin:
            for event_id in published:
                shown = admin.get(f"/v1/events/{event_id}").json()
                outcomes = Counter(
                    a["outcome"] for a in shown["attempts"] if a["mechanism"] == "subscription"
                )
                assert shown["status"] == "delivered" and outcomes == {"delivered": 1}
        assert len([r for r in receiver.requests if "type" not in r.json]) == EVENTS
    finally:
        first.stop()
        second.stop()
        receiver.close()


async def test_what_a_process_holds_of_a_subscription_another_ends_is_not_sent(
    postgres_database_url: str,
) -> None:
    receiver = Receiver(answers_challenges=True, script=[(200, {}), (HANG, {})])
    raw = {
        "name": "herald.event",
        "arguments": {"types": ["dm.*"]},
        "delivery": {"mode": "webhook", "url": receiver.url, "secret": SECRET},
    }
    target = {k: v for k, v in raw.items() if k != "delivery"} | {"delivery": {"url": receiver.url}}
    try:
        async with (
            Hub.from_url(postgres_database_url) as here,
            Hub.from_url(postgres_database_url) as there,
        ):
            sender = Sender("http://hub.test", AddressPolicy(allow_loopback=True), timeout_s=5)
            agent, _ = await here.create_agent("alice")
            await subscriptions.subscribe(here, sender, agent, parse(SubscribeInput, raw, "params"))
            receiver.arrived.get(timeout=10)  # the challenge
            first = await here.publish("alice", "dm.received", "in flight")
            for n in range(2):
                await here.publish("alice", "dm.received", f"held {n}")
            worker = WebhookWorker(here, sender, per_endpoint=1)
            assert await worker.run_once() == 3  # all three held here, one request at a time
            in_flight = await asyncio.to_thread(receiver.arrived.get, timeout=10)
            assert in_flight.json["eventId"] == first.event.id
            heard = asyncio.Event()
            here.subscriptions.on_deleted(lambda _id: heard.set())  # after the worker's own
            await subscriptions.unsubscribe(there, agent, parse(UnsubscribeInput, target, "params"))
            async with asyncio.timeout(10):
                await heard.wait()
            receiver.release.set()
            await worker.wait_idle()
        assert [r.json.get("eventId") for r in receiver.requests[1:]] == [first.event.id]
    finally:
        receiver.close()
