"""``events/subscribe`` on herald's MCP server, in process, with the ``mcp`` SDK's client: a
subscription takes the kind of ``webhook-id`` its client's profile asks for, and the webhook
worker sends its deliveries to a real receiver with it."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import pytest

from herald.addresses import AddressPolicy
from herald.capabilities import CLIENT_PROFILES, WEBHOOK_ID_MESSAGE, ClientProfile, EventsProfile
from herald.delivery.engine import Notifier
from herald.mcp import create_server
from herald.mcp import webhooks as mcp_webhooks
from herald.models import Agent
from herald.testing import ManualClock
from herald.webhooks.sender import Sender
from herald.webhooks.worker import WebhookWorker
from tests.mcp.conftest import connect
from tests.mcp.test_events import call
from tests.webhooks.receiver import Receiver

pytestmark = pytest.mark.anyio

SECRET = "whsec_" + base64.b64encode(b"m" * 32).decode()


@pytest.fixture
def clock() -> ManualClock:
    # Real time as the start: a receiver checks signature timestamps against its own clock.
    return ManualClock(start=time.time())


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver(answers_challenges=True)
    yield running
    running.close()


@pytest.mark.parametrize(("name", "by_message"), [("message-client", True), ("openai-mcp", False)])
async def test_a_subscription_takes_the_webhook_id_its_clients_profile_checks(
    notifier: Notifier,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    by_message: bool,
) -> None:
    by_messages = ClientProfile(events=EventsProfile(webhook_id=WEBHOOK_ID_MESSAGE))
    monkeypatch.setitem(CLIENT_PROFILES, "message-client", by_messages)
    hub = notifier.hub
    agent, _ = await hub.create_agent("alice")

    async def identify(ctx: Any) -> Agent:
        return agent

    sender = Sender("http://hub.test", AddressPolicy(allow_loopback=True), clock=hub.clock)
    server = create_server(notifier, identify=identify, transport="memory")
    mcp_webhooks.attach(server, hub, identify, sender)
    delivery = {"mode": "webhook", "url": receiver.url, "secret": SECRET}
    async with connect(notifier, agent, mode="auto", name=name, server=server) as (client, _):
        made = await call(client, "events/subscribe", name="herald.event", arguments={},
                          delivery=delivery)  # fmt: skip
    assert made["id"].startswith("sub_")
    published = await hub.publish("alice", "t", "to the receiver")
    worker = WebhookWorker(hub, sender)
    assert await worker.run_once() == 1
    await worker.wait_idle()
    (sent,) = [r for r in receiver.requests if "type" not in r.json]
    assert sent.json["eventId"] == published.event.id
    message_id = sent.headers["webhook-id"]
    assert message_id.startswith("msg_") is by_message
    assert (message_id == published.event.id) is not by_message
