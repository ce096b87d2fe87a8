"""Live events for streams: per agent, one reader of the store shares each new event with every
subscriber, through bounded queues. A subscriber that falls behind is cut off (and told why); it
resumes from its cursor, so it loses nothing and slows no one else."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from herald.events import Event
from herald.hub import Hub

log = logging.getLogger("herald.fanout")

PAGE = 500


@dataclass(eq=False)
class Subscription:
    agent_id: str
    queue: asyncio.Queue[Event | None]
    reason: str | None = None

    def close(self, reason: str) -> None:
        """Cut the subscription off: what waits is dropped (it is in the store) and the reader
        wakes up to a ``None``."""
        if self.reason is None:
            self.reason = reason
            while not self.queue.empty():
                self.queue.get_nowait()
            self.queue.put_nowait(None)


@dataclass(eq=False)
class _Topic:
    high_water: int
    subscribers: set[Subscription] = field(default_factory=set)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class Fanout:
    """Shares each agent's new events with its live subscribers.

    Args:
        hub: publishes wake the topic of their agent (locally, or from other processes through
            the store's notifications).
        queue_size: how many events a subscriber may have waiting before it is cut off.
        poll_interval_s: how often a topic looks at the store without a wake-up.
    """

    def __init__(self, hub: Hub, *, queue_size: int = 1000, poll_interval_s: float = 5.0) -> None:
        self.hub = hub
        self.queue_size = queue_size
        self.poll_interval_s = poll_interval_s
        self._topics: dict[str, _Topic] = {}
        hub.add_listener(self._wake)

    def subscribe(self, agent_id: str, seen_through: int) -> Subscription:
        """Start receiving the agent's events committed from now on. ``seen_through`` is a seq
        the caller reads up to from the store itself (the topic starts after it when new)."""
        topic = self._topics.get(agent_id)
        if topic is None:
            topic = self._topics[agent_id] = _Topic(high_water=seen_through)
            topic.task = asyncio.create_task(
                self._pump(agent_id, topic), name=f"herald-fanout-{agent_id}"
            )
        subscription = Subscription(agent_id, asyncio.Queue(self.queue_size))
        topic.subscribers.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        topic = self._topics.get(subscription.agent_id)
        if topic is None:
            return
        topic.subscribers.discard(subscription)
        if not topic.subscribers:
            del self._topics[subscription.agent_id]
            if topic.task is not None:
                topic.task.cancel()

    def subscribers(self, agent_id: str) -> int:
        topic = self._topics.get(agent_id)
        return len(topic.subscribers) if topic else 0

    async def close(self) -> None:
        for topic in list(self._topics.values()):
            for subscription in list(topic.subscribers):
                subscription.close("herald is shutting down; resume with Last-Event-ID")
                self.unsubscribe(subscription)
        with contextlib.suppress(ValueError):
            self.hub.remove_listener(self._wake)

    def _wake(self, agent_ids: set[str]) -> None:
        for agent_id in agent_ids:
            topic = self._topics.get(agent_id)
            if topic is not None:
                topic.wake.set()

    async def _pump(self, agent_id: str, topic: _Topic) -> None:
        while True:
            try:
                while events := await self.hub.store.read_open(agent_id, topic.high_water, PAGE):
                    for event in events:
                        self._share(topic, event)
                    topic.high_water = events[-1].seq
            except asyncio.CancelledError:
                raise
            except Exception:  # the store failed: log, and look again at the next tick
                log.exception("reading new events of %s failed", agent_id)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_interval_s):
                    await topic.wake.wait()
            topic.wake.clear()

    def _share(self, topic: _Topic, event: Event) -> None:
        for subscription in list(topic.subscribers):
            try:
                subscription.queue.put_nowait(event)
            except asyncio.QueueFull:
                subscription.close(
                    f"too slow: {self.queue_size} events were waiting; resume with Last-Event-ID"
                )
                topic.subscribers.discard(subscription)
