"""Live events for streams. Per agent, one bounded buffer of the newest events that every
subscriber of that agent reads at its own pace: memory does not grow with the number of
subscribers, nor with how far one falls behind. A subscriber that falls out of the buffer is cut
off (and told why); it resumes from its cursor, so it loses nothing and slows no one else.

The events this process publishes go into the buffer as the hub hands them over, once
committed: reading them back from the store would wait behind the next group of writes, which
was half of a streamed event's latency. A reader of the store (one task per agent) takes the
rest: other processes' events (PostgreSQL), events open again, and whatever a handover cannot
place right after the buffer's newest (nothing may be skipped)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from herald.config import DEFAULTS
from herald.hub import Hub
from herald.models import Event

log = logging.getLogger("herald.fanout")

PUMP_PAGE = 500
"""New events one read of the store takes into an agent's live buffer, shared by all of its
streams: larger, since one read serves every subscriber."""


AGENT_DELETED = "the agent was deleted"
"""Why the subscriptions of a deleted agent end."""


class TooSlow(Exception):
    """The subscriber fell further behind than the buffer holds."""


@dataclass(eq=False)
class _Topic:
    high_water: int
    recent: deque[Event]
    dropped_through: int = 0
    """The seq of the newest event that left ``recent``: a reader behind it has lost its place."""
    recent_bytes: int = 0
    subscribers: int = 0
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle | None = None
    """When the subscribers waiting with nothing new are woken, to give up their wait."""

    def ring_by(self, deadline: float) -> None:
        """Wake the subscribers by ``deadline`` (loop time) if nothing arrives before: one
        timer for all of them, at the earliest deadline asked for. A timer per wait (made at
        each event, cancelled at the next) was a tenth of the CPU of one event sent to 10,000
        streams."""
        if self.timer is not None and self.timer.when() <= deadline:
            return
        if self.timer is not None:
            self.timer.cancel()
        self.timer = asyncio.get_running_loop().call_at(deadline, self._ring)

    def _ring(self) -> None:
        self.timer = None
        self.wake_subscribers()

    def wake_subscribers(self) -> None:
        arrived, self.arrived = self.arrived, asyncio.Event()
        arrived.set()


@dataclass(eq=False)
class Subscription:
    agent_id: str
    _topic: _Topic
    covered_through: int = 0
    """Every event up to this seq was committed before the subscription began: a reader that
    has read the store's backlog after subscribing is at least this far."""
    reason: str | None = None

    def close(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            # A new event for the next wait: the one set here would end every later wait of
            # the topic's other subscribers at once, again and again, until an event came.
            self._topic.wake_subscribers()

    async def next_after(self, last: int, timeout_s: float) -> list[Event]:
        """The events newer than ``last``, once there are some; [] after ``timeout_s`` (or up
        to a tenth of it sooner: the subscribers of an agent, woken by the same event, wait
        again at nearly the same time, and one wake-up ends all their waits).

        Raises:
            TooSlow: events after ``last`` already left the buffer.
            ConnectionAbortedError: the subscription was closed (``reason`` says why).
        """
        topic = self._topic
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            if self.reason is not None:
                raise ConnectionAbortedError(self.reason)
            if last < topic.dropped_through:
                raise TooSlow(
                    f"too slow: more than {len(topic.recent)} events behind;"
                    " resume with Last-Event-ID"
                )
            newer: list[Event] = []
            for event in reversed(topic.recent):
                if event.seq <= last:
                    break
                newer.append(event)
            if newer:
                newer.reverse()
                return newer
            if loop.time() >= deadline - timeout_s / 10:
                return []
            topic.ring_by(deadline)
            await topic.arrived.wait()


def event_bytes(event: Event) -> int:
    """About what an event costs in memory: its text, data and form, and a little more."""
    return len(event.text) + len(event.data_json) + len(event.reply_schema_json or "") + 256


class Fanout:
    """Shares each agent's new events with its live subscribers.

    Args:
        hub: publishes wake the topic of their agent (locally, or from other processes through
            the store's notifications).
        buffer_size: how many of an agent's newest events are kept for its subscribers: how far
            one may fall behind before it is cut off.
        buffer_bytes: the most bytes of events kept per agent, whatever their number.
        poll_interval_s: how often a topic looks at the store without a wake-up.
    """

    def __init__(
        self,
        hub: Hub,
        *,
        buffer_size: int = DEFAULTS.streams.buffer_size,
        buffer_bytes: int = DEFAULTS.streams.buffer_bytes,
        poll_interval_s: float = DEFAULTS.streams.poll_interval_s,
    ) -> None:
        self.hub = hub
        self.buffer_size = buffer_size
        self.buffer_bytes = buffer_bytes
        self.poll_interval_s = poll_interval_s
        self._topics: dict[str, _Topic] = {}
        self._subscriptions: set[Subscription] = set()
        self._closers: list[Callable[[], None]] = []
        self._handed: set[str] = set()
        """Agents whose new events were just taken from the hub: no read of the store needed."""
        hub.add_commit_listener(self._take)
        hub.add_listener(self._wake)

    def on_close(self, closer: Callable[[], None]) -> None:
        """Call ``closer`` when the fan-out closes: another kind of live stream that never ends
        by itself (an MCP ``subscriptions/listen``) ends with the rest at shutdown."""
        self._closers.append(closer)

    def subscribe(self, agent_id: str, seen_through: int) -> Subscription:
        """Start following the agent's events committed from now on. ``seen_through`` is the
        agent's newest seq, read before this call. The caller reads what came before from the
        store itself, then goes on from ``covered_through`` at least."""
        topic = self._topics.get(agent_id)
        if topic is None:
            topic = _Topic(seen_through, deque(maxlen=self.buffer_size))
            topic.dropped_through = seen_through
            topic.task = asyncio.create_task(
                self._pump(agent_id, topic), name=f"herald-fanout-{agent_id}"
            )
            self._topics[agent_id] = topic
        topic.subscribers += 1
        subscription = Subscription(agent_id, topic, covered_through=topic.high_water)
        self._subscriptions.add(subscription)
        self.hub.metrics.streams_open(len(self._subscriptions))
        return subscription

    def close_agent(self, agent_id: str, reason: str) -> None:
        """End every subscription to the agent's events (it was deleted)."""
        for subscription in list(self._subscriptions):
            if subscription.agent_id == agent_id:
                subscription.close(reason)

    def unsubscribe(self, subscription: Subscription) -> None:
        if subscription not in self._subscriptions:
            return
        self._subscriptions.discard(subscription)
        self.hub.metrics.streams_open(len(self._subscriptions))
        topic = subscription._topic
        topic.subscribers -= 1
        if topic.subscribers == 0 and self._topics.get(subscription.agent_id) is topic:
            del self._topics[subscription.agent_id]
            # The pump's task, cancelled, keeps the topic (a local of its last frame) as long as
            # the topic keeps the task: a cycle that only the collector's rare full pass frees,
            # with every event of the buffer in it. Both links go now.
            task, topic.task = topic.task, None
            topic.recent.clear()
            topic.recent_bytes = 0
            if topic.timer is not None:
                topic.timer.cancel()
                topic.timer = None
            if task is not None:
                task.cancel()

    @property
    def streams(self) -> int:
        """The subscriptions open now, of every agent."""
        return len(self._subscriptions)

    def subscribers(self, agent_id: str) -> int:
        topic = self._topics.get(agent_id)
        return topic.subscribers if topic else 0

    async def close(self) -> None:
        for subscription in list(self._subscriptions):
            subscription.close("herald is shutting down; resume with Last-Event-ID")
            self.unsubscribe(subscription)
        for closer in self._closers:
            closer()
        with contextlib.suppress(ValueError):
            self.hub.remove_listener(self._wake)
        with contextlib.suppress(ValueError):
            self.hub.remove_commit_listener(self._take)

    def _take(self, events: list[Event]) -> None:
        """Keep the events just published here for their agents' subscribers, where they follow
        the newest kept; the rest is left to the reader of the store."""
        followed = self._topics  # only the agents with a stream here
        if not followed:
            return
        by_agent: dict[str, list[Event]] = {}
        for event in events:
            if event.agent_id in followed:
                by_agent.setdefault(event.agent_id, []).append(event)
        for agent_id, its in by_agent.items():
            topic = self._topics.get(agent_id)
            if topic is not None and its[0].seq == topic.high_water + 1 and _consecutive(its):
                self._keep(topic, its, self.buffer_bytes)
                self._handed.add(agent_id)

    def _wake(self, agent_ids: set[str]) -> None:
        handed = self._handed & agent_ids  # announced right after the handover: nothing to read
        self._handed -= handed
        # Only the agents with a stream here: a topic's 10,000 agents, few of them followed.
        for agent_id in (agent_ids & self._topics.keys()) - handed:
            topic = self._topics.get(agent_id)
            if topic is not None:
                topic.wake.set()

    async def _pump(self, agent_id: str, topic: _Topic) -> None:
        while True:
            try:
                found = False
                # Read again after each page until one comes back empty: under a stream of
                # commits the next read already holds the events committed during this one.
                # Stopping at a page short of full (one read per wake-up, half the reads) made
                # figure 8c's p99 worse, 9 -> 14 ms, in alternating runs.
                while events := await self.hub.open_events(agent_id, topic.high_water, PUMP_PAGE):
                    self._keep(topic, events, self.buffer_bytes)
                    found = True
                # Nothing new, on a wake-up or at a tick: the agent may be gone (deleted here,
                # or by another process). Its streams end instead of waiting for ever.
                if not found and not await self.hub.agent_exists(agent_id):
                    self.close_agent(agent_id, AGENT_DELETED)
            except asyncio.CancelledError:
                raise
            except Exception:  # the store failed: log, and look again at the next tick
                log.exception("reading new events of %s failed", agent_id)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_interval_s):
                    await topic.wake.wait()
            topic.wake.clear()

    @staticmethod
    def _keep(topic: _Topic, events: list[Event], max_bytes: int) -> None:
        # A read of the store that began before a handover brings some of its events again.
        events = [event for event in events if event.seq > topic.high_water]
        if not events:
            return
        for event in events:
            topic.recent_bytes += event_bytes(event)
            if len(topic.recent) == topic.recent.maxlen:
                topic.recent_bytes -= event_bytes(topic.recent[0])
                topic.dropped_through = topic.recent[0].seq
            topic.recent.append(event)
            while topic.recent_bytes > max_bytes and len(topic.recent) > 1:
                gone = topic.recent.popleft()
                topic.recent_bytes -= event_bytes(gone)
                topic.dropped_through = gone.seq
        topic.high_water = events[-1].seq
        topic.wake_subscribers()


def _consecutive(events: list[Event]) -> bool:
    return all(later.seq == earlier.seq + 1 for earlier, later in itertools.pairwise(events))
