"""The per-agent buffer that streams share: bounded by events and by bytes."""

from __future__ import annotations

import asyncio

import pytest

from herald import Hub
from herald.delivery.fanout import Fanout, TooSlow, event_bytes

pytestmark = pytest.mark.anyio


async def test_the_buffer_holds_no_more_bytes_than_its_bound(hub: Hub) -> None:
    await hub.create_agent("alice")
    fanout = Fanout(hub, buffer_size=2000, buffer_bytes=200_000)
    try:
        agent = (await hub.list_agents())[0]
        subscription = fanout.subscribe(agent.id, 0)
        texts = [f"{n}:" + "x" * 50_000 for n in range(10)]
        for text in texts:
            await hub.publish("alice", "t", text)
        newest = await subscription.next_after(9, timeout_s=10)  # the pump has read all ten
        assert [event.text for event in newest] == texts[9:]
        topic = subscription._topic
        assert topic.recent_bytes == sum(event_bytes(e) for e in topic.recent) <= 200_000
        assert len(topic.recent) < 10
        with pytest.raises(TooSlow):  # a reader at the start fell out of the bytes kept
            await subscription.next_after(0, timeout_s=1)
    finally:
        await fanout.close()


async def test_a_topic_that_ends_keeps_neither_its_events_nor_its_pump(hub: Hub) -> None:
    """The pump's task, once cancelled, keeps the topic (a local of its last frame): were the
    topic to keep the task and its buffer, they would wait together for the collector's full
    pass, which comes rarely and takes long with many."""
    await hub.create_agent("alice")
    fanout = Fanout(hub)
    try:
        agent = (await hub.list_agents())[0]
        subscription = fanout.subscribe(agent.id, 0)
        await hub.publish("alice", "t", "kept in the buffer")
        assert await subscription.next_after(0, timeout_s=10)
        topic = subscription._topic
        task = topic.task
        assert task is not None and topic.recent
        fanout.unsubscribe(subscription)
        await asyncio.wait([task])
        assert task.cancelled()
        assert topic.task is None
        assert not topic.recent and topic.recent_bytes == 0
    finally:
        await fanout.close()
