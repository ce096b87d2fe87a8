"""The live sessions of this process: where each session starts and ends, who waits for them,
and how they are woken. What is pushed to a session is its worker's business."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from herald.capabilities import DeliveryCapabilities
from herald.delivery.base import Peer
from herald.models import Agent, Event
from herald.times import Clock

log = logging.getLogger("herald.delivery")


HANDED_MAX = 100
"""The most new events a session holds handed over: past it (a session that cannot keep up),
its worker reads them from the store."""


@dataclass
class Unconfirmed:
    """An event pushed to a session that cannot confirm, and not acknowledged yet."""

    event: Event
    mechanism_index: int
    """Where in the cascade it went: an escalation goes on from the next way."""
    at: float
    """When, by the hub's clock (seconds)."""


@dataclass(eq=False)
class LiveSession:
    """A live connection of an agent's client: presence, where to push, and what it was offered."""

    id: str
    agent: Agent
    caps: DeliveryCapabilities
    peer: Peer
    connected_at: float
    """When it connected, by the hub's clock (seconds)."""
    offered_through: int = 0
    handed: list[Event] = field(default_factory=list)
    """New events committed in this process, handed over as they were stored, that follow
    ``handed_through``: the worker takes them without reading them back from the store."""
    handed_through: int = 0
    """The newest seq the worker has taken or been handed: an event that does not follow it is
    not handed over, and the store is read instead (``must_read``)."""
    must_read: bool = True
    """Whether the store may hold open events the worker was not handed (its first look, a
    wake-up from elsewhere, a handover that did not follow on, a poll tick)."""
    unconfirmed: dict[str, Unconfirmed] = field(default_factory=dict)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    awaiting_answers: set[asyncio.Task[None]] = field(default_factory=set)
    """Pushes that wait for a person (forms), run beside the session's loop."""

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "agent": self.agent.id, "capabilities": self.caps.to_json()}

    def hand(self, events: list[Event]) -> None:
        """Take the agent's events just committed here (in seq order), if they follow on from
        what the worker has; otherwise have it read the store."""
        if (
            not self.must_read
            and self.peer.ready()
            and events[0].seq == self.handed_through + 1
            and len(self.handed) + len(events) <= HANDED_MAX
            and all(b.seq == a.seq + 1 for a, b in itertools.pairwise(events))
        ):
            self.handed.extend(events)
            self.handed_through = events[-1].seq
        else:
            self.must_read = True

    def take_handed(self) -> list[Event]:
        handed, self.handed = self.handed, []
        return handed

    def run_beside(self, work: Awaitable[None]) -> None:
        """Run ``work`` beside the session's loop; it ends with the session."""
        task = asyncio.ensure_future(work)
        self.awaiting_answers.add(task)
        task.add_done_callback(self.awaiting_answers.discard)


Serve = Callable[[LiveSession], Coroutine[Any, Any, None]]
"""What runs for a session whose peer can be pushed to, for as long as it lives."""


class PresenceHooks(Protocol):
    """Told of each session that starts and ends (to keep it registered in the store)."""

    def joined(self, session: LiveSession) -> None: ...

    def left(self, session_id: str) -> None: ...


class SessionRegistry:
    """The live sessions of this process, by id and by agent.

    ``connect`` and ``disconnect`` are the one place a session starts and ends.

    Args:
        clock: the hub's clock, for when a session connected.
        serve: run for each session whose peer offers a push path, cancelled when it ends.
        presence: told of each session that starts and ends.
    """

    def __init__(self, clock: Clock, serve: Serve, presence: PresenceHooks | None = None) -> None:
        self._clock = clock
        self._serve = serve
        self._presence_hooks = presence
        self._sessions: dict[str, LiveSession] = {}
        self._by_agent: dict[str, set[str]] = {}
        self._presence = asyncio.Condition()
        self._background: set[asyncio.Task[None]] = set()
        self._handed: set[str] = set()
        """Agents whose new events were just handed to their sessions: the wake-up that follows
        has nothing more for them to read."""

    def connect(
        self, session_id: str, agent: Agent, caps: DeliveryCapabilities, peer: Peer
    ) -> LiveSession:
        """Register a live session (one of the same id ends first) and start serving it."""
        self.disconnect(session_id)
        session = LiveSession(session_id, agent, caps, peer, connected_at=self._clock())
        self._sessions[session_id] = session
        self._by_agent.setdefault(agent.id, set()).add(session_id)
        if peer.push_paths:
            session.task = asyncio.create_task(
                self._serve(session), name=f"herald-session-{session_id}"
            )
        if self._presence_hooks is not None:
            self._presence_hooks.joined(session)
        log.info("session %s of %s connected: %s", session_id, agent.handle, caps.to_json())
        self._announce_presence()
        return session

    def disconnect(self, session_id: str) -> None:
        """Forget a session; what it did not confirm stays open in the store."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        ids = self._by_agent.get(session.agent.id, set())
        ids.discard(session_id)
        if not ids:
            self._by_agent.pop(session.agent.id, None)
        # The cancelled task's frame keeps the session: the session keeps neither the task nor
        # the events it pushed, or all of them would wait for the collector's full pass.
        tasks, session.task = [session.task, *session.awaiting_answers], None
        session.unconfirmed.clear()
        for task in tasks:
            if task is not None:
                task.cancel()
        if self._presence_hooks is not None:
            self._presence_hooks.left(session_id)
        log.info("session %s of %s disconnected", session_id, session.agent.handle)
        self._announce_presence()

    def disconnect_all(self) -> None:
        for session_id in list(self._sessions):
            self.disconnect(session_id)

    def _announce_presence(self) -> None:
        async def announce() -> None:
            async with self._presence:
                self._presence.notify_all()

        with contextlib.suppress(RuntimeError):  # no running loop: nobody can be waiting
            task = asyncio.get_running_loop().create_task(announce())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def wait_for_sessions(
        self, agent_id: str, count: int = 1, timeout_s: float = 10.0
    ) -> None:
        """Wait until the agent has ``count`` live sessions (exactly).

        Raises:
            TimeoutError: it did not happen in time.
        """
        async with asyncio.timeout(timeout_s), self._presence:
            await self._presence.wait_for(lambda: len(self.sessions_of(agent_id)) == count)

    def session(self, session_id: str) -> LiveSession | None:
        return self._sessions.get(session_id)

    def pushable_agents(self) -> set[str]:
        """The agents with a live session in this process that can be pushed to (the ones
        whose webhooks wait the ack timeout, as the store's presence counts them too)."""
        return {session.agent.id for session in self._sessions.values() if session.peer.push_paths}

    def sessions_of(self, agent_id: str) -> list[LiveSession]:
        return [self._sessions[i] for i in self._by_agent.get(agent_id, ())]

    def wake_session(self, session_id: str) -> None:
        """Have a session look again now, at the store too (its stream opened, say)."""
        session = self._sessions.get(session_id)
        if session is not None:
            session.must_read = True
            session.wake.set()

    def hand(self, events: list[Event]) -> None:
        """Hand events this process just committed (each agent's in seq order) to their agents'
        sessions that can be pushed to, before the wake-up (``wake_agents``) that follows."""
        # Only the agents with a session here: a publish to a topic of 10,000 agents, few of
        # them connected, no longer sorts every event by agent.
        live = self._by_agent
        if not live:
            return
        by_agent: dict[str, list[Event]] = {}
        for event in events:
            if event.agent_id in live:
                by_agent.setdefault(event.agent_id, []).append(event)
        for agent_id, its in by_agent.items():
            sessions = [s for s in self.sessions_of(agent_id) if s.peer.push_paths]
            for session in sessions:
                session.hand(its)
            if sessions:
                self._handed.add(agent_id)

    def wake_agents(self, agent_ids: set[str]) -> None:
        """Have every session of these agents look again now (they have new events: handed
        over just before, or to be read from the store)."""
        handed = self._handed & agent_ids
        self._handed -= handed
        # Only the agents with a session here: a topic's 10,000 agents, few of them connected.
        for agent_id in agent_ids & self._by_agent.keys():
            for session in self.sessions_of(agent_id):
                if agent_id not in handed:
                    session.must_read = True
                session.wake.set()
