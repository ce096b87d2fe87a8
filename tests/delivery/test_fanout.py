"""The per-agent buffer that streams share: bounded by events and by bytes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from herald import Hub, open_store
from herald.delivery.fanout import Fanout, Subscription, TooSlow, event_bytes
from herald.inputs.events import parse_new_event

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def following_alice(hub: Hub) -> AsyncIterator[tuple[Fanout, Subscription]]:
    """A fan-out with one subscription to a new agent alice's events, after her first event
    ("1") came through it."""
    await hub.create_agent("alice")
    fanout = Fanout(hub)
    try:
        agent = (await hub.list_agents())[0]
        subscription = fanout.subscribe(agent.id, 0)
        await hub.publish("alice", "t", "1")
        assert await subscription.next_after(0, timeout_s=10)
        yield fanout, subscription
    finally:
        await fanout.close()


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
    async with following_alice(hub) as (fanout, subscription):
        topic = subscription._topic
        task = topic.task
        assert task is not None and topic.recent
        fanout.unsubscribe(subscription)
        await asyncio.wait([task])
        assert task.cancelled()
        assert topic.task is None
        assert not topic.recent and topic.recent_bytes == 0


async def test_an_event_published_here_is_in_the_buffer_once_its_publish_returns(
    hub: Hub,
) -> None:
    """The hub hands what it committed to the buffer: no read of the store comes between a
    publish and its streams (a read waited behind the next group of writes)."""
    async with following_alice(hub) as (_, subscription):  # "1": the pump's first read
        published = await hub.publish_many(
            [parse_new_event({"to": "alice", "type": "t", "text": t}) for t in ("a", "b")]
        )
        # Without waiting at all: already there.
        newer = await subscription.next_after(1, timeout_s=0)
        assert [event.id for event in newer] == [p.event.id for p in published]


async def test_events_a_handover_cannot_follow_on_are_read_from_the_store(
    hub: Hub, tmp_path: Path
) -> None:
    """Events committed without the hub's handover (another process's, on PostgreSQL) leave a
    gap: the next handover is not kept after it, and the reader of the store brings them all,
    in order, each once."""
    async with following_alice(hub) as (_, subscription):
        # Through a store of its own on the same file, as another process would: no handover,
        # no announcement.
        async with await open_store(f"sqlite:///{tmp_path / 'h.db'}") as other:
            await other.append([parse_new_event({"to": "alice", "type": "t", "text": "2"})])
        await hub.publish("alice", "t", "3")
        seen: list[str] = []
        last = 1
        while len(seen) < 2:
            newer = await subscription.next_after(last, timeout_s=10)
            assert newer, "the reader of the store brought nothing"
            seen += [event.text for event in newer]
            last = newer[-1].seq
        assert seen == ["2", "3"]
        assert [event.seq for event in subscription._topic.recent] == [1, 2, 3]


async def test_concurrent_publishes_reach_a_subscriber_in_order_each_once(hub: Hub) -> None:
    """Publishes that commit in groups and answer in any order: each handover follows on from
    the newest kept, or is left to the reader of the store; none is skipped or kept twice."""
    async with following_alice(hub) as (_, subscription):

        async def publisher(n: int) -> None:
            for k in range(20):
                await hub.publish("alice", "t", f"{n}-{k}")

        async with asyncio.TaskGroup() as publishers:
            for n in range(20):
                publishers.create_task(publisher(n))
        seqs: list[int] = []
        while len(seqs) < 400:
            newer = await subscription.next_after(seqs[-1] if seqs else 1, timeout_s=10)
            assert newer, f"{len(seqs)} of 400 came"
            seqs += [event.seq for event in newer]
        assert seqs == list(range(2, 402))


async def test_a_subscription_closed_leaves_the_others_of_its_agent_waiting(hub: Hub) -> None:
    """One stream of an agent ends (an MCP listen stream whose event type was removed, say):
    the agent's other subscribers wait on for the next event, neither woken for good nor
    told of a timeout early."""
    async with following_alice(hub) as (fanout, subscription):
        other = fanout.subscribe(subscription.agent_id, 1)
        subscription.close("its stream ended")
        waiting = asyncio.create_task(other.next_after(1, timeout_s=30))
        await asyncio.sleep(0)  # it waits now
        assert not waiting.done()
        await hub.publish("alice", "t", "2")
        newer = await asyncio.wait_for(waiting, 10)
        assert [event.text for event in newer] == ["2"]


async def test_a_wait_with_nothing_new_ends_empty_at_its_timeout(hub: Hub) -> None:
    """The subscribers of an agent share one timer: each wait still ends, empty, by its own
    timeout, also when a later one began first."""
    async with following_alice(hub) as (fanout, subscription):
        other = fanout.subscribe(subscription.agent_id, 1)
        late = asyncio.create_task(other.next_after(1, timeout_s=30))
        await asyncio.sleep(0)
        async with asyncio.timeout(10):
            assert await subscription.next_after(1, timeout_s=0.2) == []
        assert not late.done()
        late.cancel()
