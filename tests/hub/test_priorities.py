"""An event's priority given through the hub's Python API, on each backend: ``Hub.publish`` (to
one agent or a list), ``Hub.publish_topic`` and ``Hub.send_message`` (sent now or scheduled)
store it with the event; a priority herald does not know is refused and stores nothing."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from herald import Hub, InvalidInput
from herald.models import Agent, Priority
from herald.store import open_store
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio


@pytest.fixture
async def hub(store_url: str, clock: ManualClock) -> AsyncIterator[Hub]:
    async with Hub(await open_store(store_url, clock=clock)) as opened:
        yield opened


async def new_agent(hub: Hub) -> Agent:
    agent, _ = await hub.create_agent(f"prio-{uuid.uuid4().hex[:8]}")
    return agent


async def drained(hub: Hub, agent: Agent) -> list[tuple[str, Priority]]:
    return [(e.text, e.priority) for e in (await hub.drain(agent, cursor=0, limit=50)).events]


async def test_publish_to_one_to_a_list_and_to_a_topic_stores_the_priority_given(
    hub: Hub,
) -> None:
    alice, bob = await new_agent(hub), await new_agent(hub)
    await hub.topics.put("repo/prio", "a topic")
    await hub.topics.subscribe(bob.id, "repo/prio")
    published = await hub.publish(alice.handle, "t", "quiet", priority="low")
    assert published.event.priority is Priority.LOW
    await hub.publish(alice.handle, "t", "plain")
    await hub.publish([alice.handle, bob.handle], "t", "both", priority="urgent")
    await hub.publish_topic("repo/prio", "t", "topical", priority="high")
    assert await drained(hub, alice) == [
        ("quiet", Priority.LOW),
        ("plain", Priority.NORMAL),
        ("both", Priority.URGENT),
    ]
    assert await drained(hub, bob) == [("both", Priority.URGENT), ("topical", Priority.HIGH)]


async def test_a_message_between_agents_keeps_its_priority_sent_now_or_when_due(
    hub: Hub, clock: ManualClock
) -> None:
    sender, addressee = await new_agent(hub), await new_agent(hub)
    now = await hub.send_message(sender, addressee.handle, "by the way", priority="low")
    later = await hub.send_message(
        sender, addressee.handle, "at once", delay_s=60, priority="urgent"
    )
    assert (now.event.priority, later.event.priority) == (Priority.LOW, Priority.URGENT)
    assert await drained(hub, addressee) == [("by the way", Priority.LOW)]
    clock.advance(61)
    await hub.release_due()
    assert await drained(hub, addressee) == [
        ("by the way", Priority.LOW),
        ("at once", Priority.URGENT),
    ]


async def test_a_priority_herald_does_not_know_is_refused_naming_the_values_and_stores_nothing(
    hub: Hub,
) -> None:
    sender, addressee = await new_agent(hub), await new_agent(hub)
    await hub.topics.put("repo/refused", "a topic")
    await hub.topics.subscribe(addressee.id, "repo/refused")
    with pytest.raises(InvalidInput, match=r"event\.priority must be one of low, normal"):
        await hub.publish(addressee.handle, "t", "x", priority="critical")
    with pytest.raises(InvalidInput, match=r"event\.priority must be one of low, normal"):
        await hub.publish([addressee.handle, sender.handle], "t", "x", priority="LOW")
    with pytest.raises(InvalidInput, match=r"event\.priority must be one of low, normal"):
        await hub.publish_topic("repo/refused", "t", "x", priority="")
    with pytest.raises(InvalidInput, match=r"priority must be one of low, normal"):
        await hub.send_message(sender, addressee.handle, "x", priority="asap")
    assert await drained(hub, addressee) == []
    assert await drained(hub, sender) == []


async def test_a_topic_publish_for_later_is_offered_to_each_subscriber_once_due(
    hub: Hub, clock: ManualClock
) -> None:
    alice, bob = await new_agent(hub), await new_agent(hub)
    topic = f"repo/later-{uuid.uuid4().hex[:6]}"
    await hub.topics.put(topic, "a topic")
    await hub.topics.subscribe(alice.id, topic)
    await hub.topics.subscribe(bob.id, "repo/later-*")
    copies = await hub.publish_topic(topic, "t", "at nine", delay_s=60, priority="high")
    assert sorted(c.event.agent_id for c in copies) == sorted([alice.id, bob.id])
    assert {(c.event.status.value, c.event.topic) for c in copies} == {("scheduled", topic)}
    assert await drained(hub, alice) == [] and await drained(hub, bob) == []
    clock.advance(61)
    await hub.release_due()
    for agent in (alice, bob):
        assert await drained(hub, agent) == [("at nine", Priority.HIGH)]
