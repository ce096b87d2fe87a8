"""The sender against a real receiver: connections kept alive, and kept apart per endpoint."""

from __future__ import annotations

import pytest

from herald.endpoints import Endpoint, Kind
from herald.events import Agent, Event, EventStatus
from herald.webhooks.addresses import AddressPolicy
from herald.webhooks.sender import Sender
from tests.webhooks.receiver import Receiver

pytestmark = pytest.mark.anyio

LOOPBACK = AddressPolicy(allow_loopback=True)


def endpoint(name: str, url: str) -> Endpoint:
    return Endpoint(f"end_{name}", f"agt_{name}", Kind.WEBHOOK, url, "whsec_" + "a" * 32, 0)


def event(n: int) -> Event:
    return Event(f"evt_{n}", "agt_x", n, "t", f"event {n}", "{}", 0, EventStatus.PENDING)


async def test_an_endpoint_reuses_its_connections_and_shares_them_with_no_other() -> None:
    receiver = Receiver()
    sender = Sender("http://hub.test", LOOPBACK, timeout_s=5)
    first, second = endpoint("a", receiver.url + "/a"), endpoint("b", receiver.url + "/b")
    agent = Agent("agt_x", "x", "hash", 0)
    try:
        for n in range(3):
            assert (await sender.send(first, agent, event(n), 0)).ok
        assert (await sender.send(second, agent, event(3), 0)).ok
    finally:
        await sender.close()
        receiver.close()
    connections = [received.connection for received in receiver.requests]
    assert len(set(connections[:3])) == 1  # one connection, kept alive
    assert connections[3] not in connections[:3]  # the other endpoint's own


async def test_a_webhook_body_is_the_event_as_its_agent_sees_it() -> None:
    receiver = Receiver()
    sender = Sender("http://hub.test", LOOPBACK, timeout_s=5)
    sent = event(7)
    try:
        outcome = await sender.send(
            endpoint("a", receiver.url), Agent("agt_x", "x", "hash", 0), sent, 0
        )
    finally:
        await sender.close()
        receiver.close()
    assert outcome.ok
    (request,) = receiver.requests
    drained_view = sent.to_json()  # what the drain and the stream show
    del drained_view["status"]
    assert request.json == drained_view
    assert Event.from_json(request.json) == sent
