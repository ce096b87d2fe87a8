"""``events/stream`` without a transport: what it does with a client that stops reading."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from herald import Hub
from herald.delivery.fanout import Fanout
from herald.inputs.subscriptions import StreamInput
from herald.subscriptions.stream import ClientNotReading, stream

pytestmark = pytest.mark.anyio


async def test_a_client_that_stops_reading_ends_its_stream_and_leaves_no_subscription(
    hub: Hub,
) -> None:
    agent, _ = await hub.create_agent("alice")
    await hub.publish("alice", "t", "never taken")
    fanout = Fanout(hub)
    taken: list[str] = []
    stuck = asyncio.Event()

    async def notify(method: str, params: dict[str, Any]) -> None:
        taken.append(method)
        if method == "notifications/events/event":
            await stuck.wait()  # the client's side of the connection is full

    params = StreamInput.model_validate({"name": "herald.event"})
    with pytest.raises(ClientNotReading):
        async with asyncio.timeout(10):  # bounded: without the send timeout it would hang
            await stream(hub, fanout, agent, params, notify, send_timeout_s=0.05)
    assert taken == ["notifications/events/active", "notifications/events/event"]
    assert fanout.subscribers(agent.id) == 0
    await fanout.close()
