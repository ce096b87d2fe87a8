"""The notification service: one per process, every live session registers with it.

It is three parts: the registry of live sessions (``sessions``), a worker for each session that
can be pushed to (``session_worker``), and the cascade each event goes down (``cascade``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from herald.capabilities import DeliveryCapabilities
from herald.config import DEFAULTS
from herald.delivery import render
from herald.delivery.base import Mechanism, Peer
from herald.delivery.cascade import Cascade, PushReport
from herald.delivery.mechanisms import default_mechanisms
from herald.delivery.presence import PresenceKeeper
from herald.delivery.session_worker import SessionWorker
from herald.delivery.sessions import LiveSession, SessionRegistry
from herald.hub import Hub
from herald.models import Agent


class Notifier:
    """Delivers events to live sessions through the cascade.

    Args:
        hub: the hub whose publishes wake sessions, and whose clock keeps every deadline.
        mechanisms: the ways, richest first (default: channel, elicitation, stream, log).
        backlog_limit: on (re)connect, a backlog longer than this arrives as one summary.
        poll_interval_s: how often a session looks at the store without a wake-up.
        ack_timeout_s: how long a push may go unacknowledged before the next way is tried
            (an agent's ``delivery.ack_timeout_s`` overrides it).
        presence_ttl_s: how long a session stays registered in the store without a refresh:
            the sessions of a process that died drop out within it.
    """

    def __init__(
        self,
        hub: Hub,
        *,
        mechanisms: list[Mechanism] | None = None,
        backlog_limit: int = DEFAULTS.delivery.backlog_limit,
        poll_interval_s: float = DEFAULTS.delivery.poll_interval_s,
        ack_timeout_s: float = DEFAULTS.delivery.ack_timeout_s,
        presence_ttl_s: float = DEFAULTS.delivery.presence_ttl_s,
    ) -> None:
        self.hub = hub
        self.cascade = Cascade(hub, mechanisms if mechanisms is not None else default_mechanisms())
        self.backlog_limit = backlog_limit
        self.poll_interval_s = poll_interval_s
        self.ack_timeout_s = ack_timeout_s
        self.presence = PresenceKeeper(hub, presence_ttl_s)
        self.sessions = SessionRegistry(hub.clock, self._serve, self.presence)
        # New events of this process are handed to the sessions as they commit, before the
        # wake-up: a session worker pushes them without reading them back from the store.
        hub.add_commit_listener(self.sessions.hand)
        hub.add_listener(self.wake_agents)

    @property
    def mechanisms(self) -> list[Mechanism]:
        return self.cascade.mechanisms

    async def _serve(self, session: LiveSession) -> None:
        worker = SessionWorker(
            self.hub,
            self.cascade,
            session,
            backlog_limit=self.backlog_limit,
            poll_interval_s=self.poll_interval_s,
        )
        await worker.run()

    # Presence, kept by the registry

    def connect(
        self, session_id: str, agent: Agent, caps: DeliveryCapabilities, peer: Peer
    ) -> LiveSession:
        """Register a live session and, when its peer offers a push path, start offering it
        the agent's events."""
        return self.sessions.connect(session_id, agent, caps, peer)

    def disconnect(self, session_id: str) -> None:
        """Forget a session; what it did not confirm stays open in the store."""
        self.sessions.disconnect(session_id)

    async def wait_for_sessions(
        self, agent_id: str, count: int = 1, timeout_s: float = 10.0
    ) -> None:
        """Wait until the agent has ``count`` live sessions (exactly).

        Raises:
            TimeoutError: it did not happen in time.
        """
        await self.sessions.wait_for_sessions(agent_id, count, timeout_s)

    def session(self, session_id: str) -> LiveSession | None:
        return self.sessions.session(session_id)

    def pushable_agents(self) -> set[str]:
        """The agents with a live session in this process that can be pushed to."""
        return self.sessions.pushable_agents()

    def sessions_of(self, agent_id: str) -> list[LiveSession]:
        return self.sessions.sessions_of(agent_id)

    def wake_session(self, session_id: str) -> None:
        """Have a session look again now (its stream opened, or the clock moved)."""
        self.sessions.wake_session(session_id)

    def wake_agents(self, agent_ids: set[str]) -> None:
        self.sessions.wake_agents(agent_ids)

    def observe(self, observer: Callable[[PushReport], None]) -> None:
        """Call ``observer`` (it must not block) after each attempt is recorded and its outcome
        applied in the store: for metrics, logs, and tests that wait for a delivery."""
        self.cascade.observe(observer)

    async def close(self) -> None:
        self.sessions.disconnect_all()
        await self.cascade.written()  # what the sessions pushed is recorded before the store closes
        await self.presence.close()
        with contextlib.suppress(ValueError):
            self.hub.remove_listener(self.wake_agents)
        with contextlib.suppress(ValueError):
            self.hub.remove_commit_listener(self.sessions.hand)

    async def unread_notice(self, agent: Agent, session_id: str | None = None) -> str | None:
        """The line flagged on an agent's tool results while events wait unread: those pushed
        and not acknowledged in time and, when the session calling the tool (``session_id``)
        cannot be pushed to now, every open event, since its tool results are all it gets."""
        live = self.sessions.session(session_id) if session_id is not None else None
        if session_id is not None and (live is None or not self.cascade.pushes_now(live)):
            timeout = 0.0
        else:
            timeout = live.caps.ack_timeout_s if live else self._ack_timeout(agent)
        count = await self.hub.unread(agent, timeout)
        return render.unread_notice(count) if count else None

    def _ack_timeout(self, agent: Agent) -> float:
        sessions = self.sessions_of(agent.id)
        if sessions:
            return min(s.caps.ack_timeout_s for s in sessions)
        return float(agent.delivery.get("ack_timeout_s", self.ack_timeout_s))
