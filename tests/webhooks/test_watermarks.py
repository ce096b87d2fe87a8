"""The cursors a subscription's deliveries carry, read from a real store now and then: lanes
that need a reading at once share one."""

from __future__ import annotations

import asyncio
import base64

import pytest

from herald import Hub
from herald.models import Endpoint, Kind, OwedEvents, WebhookSubscription
from herald.webhooks.watermarks import Watermarks

pytestmark = pytest.mark.anyio

SECRET = "whsec_" + base64.b64encode(b"w" * 32).decode()


async def subscribed(hub: Hub) -> Endpoint:
    agent, _ = await hub.create_agent("alice")
    endpoint = Endpoint(
        "sub_00000000000000a1", agent.id, Kind.SUBSCRIPTION, "https://example.com/a", SECRET,
        hub.now(),
    )  # fmt: skip
    record = WebhookSubscription(endpoint.id, agent.id, "herald.event", "{}", "[]", None, 0)
    await hub.subscriptions.put(endpoint, record, hub.now())
    return endpoint


async def test_lanes_beyond_the_last_reading_at_once_wait_for_one_reading(hub: Hub) -> None:
    endpoint = await subscribed(hub)
    published = [await hub.publish("alice", "t", f"event {n}") for n in range(4)]
    await hub.subscriptions.schedule(100)
    reads: list[int] = []

    async def read(subscription_id: str, limit: int) -> OwedEvents | None:
        reads.append(limit)
        return await hub.subscriptions.owed(subscription_id, limit)

    watermarks = Watermarks(read)
    # Four lanes of the subscription, each with one of its claimed events, none read yet.
    cursors = await asyncio.gather(
        *(watermarks.cursor(endpoint, p.event.id, len(published)) for p in published)
    )
    assert len(reads) == 1
    # Each body's cursor stops before the oldest event still owed other than its own.
    assert cursors == [1, 0, 0, 0]
