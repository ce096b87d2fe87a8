"""The notification service: one per process, every live session registers with it.

For each event, for each live session of its agent, the cascade tries the richest way first and
degrades instead of failing. The store is the truth: a session's worker reads open events after
what it has offered, so a lost wake-up costs latency (until the next poll), never an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from herald.capabilities import LOG_NOTICE, DeliveryCapabilities
from herald.config import DEFAULTS
from herald.delivery import render
from herald.delivery.base import FormAnswer, Mechanism, Outcome, Peer, Result
from herald.delivery.mechanisms import LOG_METHOD, STREAM_METHOD, default_mechanisms
from herald.errors import InvalidInput
from herald.hub import Hub
from herald.models import Agent, Attempt, Event, EventStatus

log = logging.getLogger("herald.delivery")

OFFER_PAGE = 100
"""Open events one read of the store takes for a session: each goes through the cascade (or is
counted for a backlog summary) before the next read."""


@dataclass(frozen=True)
class DeliveryReport:
    """One recorded attempt: which session, which event, which way, what came of it."""

    session_id: str
    event: Event
    mechanism: str
    result: Result


@dataclass
class _Pushed:
    """An event sent to a session and not yet confirmed."""

    event: Event
    mechanism_index: int
    at: float


@dataclass(eq=False)
class LiveSession:
    """A live connection of an agent's client: presence, and where to push."""

    id: str
    agent: Agent
    caps: DeliveryCapabilities
    peer: Peer
    connected_at: float = field(default_factory=time.time)
    offered_through: int = 0
    unconfirmed: dict[str, _Pushed] = field(default_factory=dict)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    forms: set[asyncio.Task[None]] = field(default_factory=set)

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "agent": self.agent.id, "capabilities": self.caps.to_json()}


class Notifier:
    """Delivers events to live sessions through the cascade.

    Args:
        hub: the hub whose publishes wake sessions.
        mechanisms: the ways, richest first (default: channel, elicitation, stream, log).
        backlog_limit: on (re)connect, a backlog longer than this arrives as one summary.
        poll_interval_s: how often a session looks at the store without a wake-up.
        ack_timeout_s: how long a push may go unacknowledged before the next way is tried
            (an agent's ``delivery.ack_timeout_s`` overrides it).
    """

    def __init__(
        self,
        hub: Hub,
        *,
        mechanisms: list[Mechanism] | None = None,
        backlog_limit: int = DEFAULTS.delivery.backlog_limit,
        poll_interval_s: float = DEFAULTS.delivery.poll_interval_s,
        ack_timeout_s: float = DEFAULTS.delivery.ack_timeout_s,
    ) -> None:
        self.hub = hub
        self.mechanisms = mechanisms if mechanisms is not None else default_mechanisms()
        self.backlog_limit = backlog_limit
        self.poll_interval_s = poll_interval_s
        self.ack_timeout_s = ack_timeout_s
        self._sessions: dict[str, LiveSession] = {}
        self._by_agent: dict[str, set[str]] = {}
        self._presence = asyncio.Condition()
        self._observers: list[Callable[[DeliveryReport], None]] = []
        self._background: set[asyncio.Task[None]] = set()
        hub.add_listener(self.wake_agents)

    # Presence

    def connect(
        self, session_id: str, agent: Agent, caps: DeliveryCapabilities, peer: Peer
    ) -> LiveSession:
        """Register a live session and start offering it the agent's events."""
        self.disconnect(session_id)
        session = LiveSession(session_id, agent, caps, peer)
        self._sessions[session_id] = session
        self._by_agent.setdefault(agent.id, set()).add(session_id)
        if caps.can_push:
            session.task = asyncio.create_task(
                self._serve(session), name=f"herald-session-{session_id}"
            )
        log.info("session %s of %s connected: %s", session_id, agent.handle, caps.to_json())
        self._announce_presence()
        return session

    def disconnect(self, session_id: str) -> None:
        """Forget a session; what it was not confirmed stays open in the store."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        ids = self._by_agent.get(session.agent.id, set())
        ids.discard(session_id)
        if not ids:
            self._by_agent.pop(session.agent.id, None)
        for task in [session.task, *session.forms]:
            if task is not None:
                task.cancel()
        log.info("session %s of %s disconnected", session_id, session.agent.handle)
        self._announce_presence()

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

    def present_agents(self) -> set[str]:
        """The agents with a live session in this process."""
        return set(self._by_agent)

    def sessions_of(self, agent_id: str) -> list[LiveSession]:
        return [self._sessions[i] for i in self._by_agent.get(agent_id, ())]

    def observe(self, observer: Callable[[DeliveryReport], None]) -> None:
        """Call ``observer`` (it must not block) after each attempt is recorded and its outcome
        applied in the store: for metrics, logs, and tests that wait for a delivery."""
        self._observers.append(observer)

    def wake_session(self, session_id: str) -> None:
        """Have a session look again now (its stream opened, say)."""
        session = self._sessions.get(session_id)
        if session is not None:
            session.wake.set()

    def wake_agents(self, agent_ids: set[str]) -> None:
        for agent_id in agent_ids:
            for session in self.sessions_of(agent_id):
                session.wake.set()

    async def close(self) -> None:
        for session_id in list(self._sessions):
            self.disconnect(session_id)
        with contextlib.suppress(ValueError):
            self.hub.remove_listener(self.wake_agents)

    async def reminder(self, agent: Agent, session_id: str | None = None) -> str | None:
        """The line flagged on an agent's tool results while events wait unread: those pushed
        and not acknowledged in time and, when the session calling the tool (``session_id``)
        cannot be pushed to now, every open event, since its tool results are all it gets."""
        live = self._sessions.get(session_id) if session_id is not None else None
        if session_id is not None and (live is None or not _pushes_now(live)):
            timeout = 0.0
        else:
            timeout = live.caps.ack_timeout_s if live else self._ack_timeout(agent)
        count = await self.hub.unread(agent, timeout)
        return render.reminder(count) if count else None

    def _ack_timeout(self, agent: Agent) -> float:
        sessions = self.sessions_of(agent.id)
        if sessions:
            return min(s.caps.ack_timeout_s for s in sessions)
        return float(agent.delivery.get("ack_timeout_s", self.ack_timeout_s))

    # A session's worker

    async def _serve(self, session: LiveSession) -> None:
        try:
            backlog_offered = False
            while True:
                if session.peer.ready():
                    if not backlog_offered:
                        await self._offer_backlog(session)
                        backlog_offered = True
                    await self._offer_new(session)
                    await self._escalate(session)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._next_wait(session)):
                        await session.wake.wait()
                session.wake.clear()
        except asyncio.CancelledError:
            raise
        except Exception:  # the worker's top level: log, and leave the events in the store
            log.exception("delivery to session %s stopped", session.id)

    def _next_wait(self, session: LiveSession) -> float:
        wait = self.poll_interval_s
        now = time.monotonic()
        for pushed in session.unconfirmed.values():
            wait = min(wait, pushed.at + session.caps.ack_timeout_s - now)
        return max(wait, 0.0)

    async def _offer_backlog(self, session: LiveSession) -> None:
        agent_id = session.agent.id
        first = await self.hub.open_events(agent_id, 0, self.backlog_limit + 1)
        if len(first) <= self.backlog_limit:
            return  # offered one by one by _offer_new
        count, last = len(first), first[-1]
        while page := await self.hub.open_events(agent_id, last.seq, OFFER_PAGE):
            count, last = count + len(page), page[-1]
        await self._send_summary(session, count, first[0])
        session.offered_through = last.seq

    async def _send_summary(self, session: LiveSession, count: int, oldest: Event) -> None:
        text = render.summary(count, oldest)
        caps, peer = session.caps, session.peer
        if caps.channel:
            meta = {"type": "herald.backlog", "unread": str(count)}
            await peer.notify("notifications/claude/channel", {"content": text, "meta": meta})
        elif caps.stream:
            await peer.notify(STREAM_METHOD, {"summary": {"unread": count}, "text": text})
        elif caps.logs(LOG_NOTICE):
            await peer.notify(LOG_METHOD, {"level": LOG_NOTICE, "logger": "herald", "data": text})
        await self.hub.record_attempts(
            [
                Attempt(
                    oldest.id,
                    self.hub.now(),
                    "summary",
                    "sent",
                    session.id,
                    f"{count} unread",
                )
            ]
        )

    async def _offer_new(self, session: LiveSession) -> None:
        while events := await self.hub.open_events(
            session.agent.id, session.offered_through, OFFER_PAGE
        ):
            writes = _Writes()
            for event in events:
                await self._cascade(session, event, 0, writes)
                session.offered_through = event.seq
            await self._flush(session, writes)

    async def _escalate(self, session: LiveSession) -> None:
        """Events sent but not acknowledged in time go the next way."""
        now = time.monotonic()
        due = [p for p in session.unconfirmed.values() if now - p.at >= session.caps.ack_timeout_s]
        writes = _Writes()
        for pushed in due:
            del session.unconfirmed[pushed.event.id]
            current = await self.hub.find_event(pushed.event.id)
            if current is None or not current.status.is_open:
                continue
            await self._cascade(session, current, pushed.mechanism_index + 1, writes)
        await self._flush(session, writes)

    async def _cascade(
        self, session: LiveSession, event: Event, start: int, writes: _Writes
    ) -> None:
        for index in range(start, len(self.mechanisms)):
            mechanism = self.mechanisms[index]
            if not mechanism.can_serve(session.caps, event):
                continue
            if mechanism.name == "elicitation":
                # A form waits for a person: it must not hold up the events behind it.
                task = asyncio.create_task(self._ask(session, event, index))
                session.forms.add(task)
                task.add_done_callback(session.forms.discard)
                return
            if await self._try(session, event, index, writes) is not Outcome.FAILED:
                return
        failure = Result(Outcome.FAILED, "no way to push: waits for inbox")
        writes.add(self._attempt(session, event, "store", failure), None, event, failure)

    async def _ask(self, session: LiveSession, event: Event, index: int) -> None:
        writes = _Writes()
        try:
            if await self._try(session, event, index, writes) is Outcome.FAILED:
                await self._cascade(session, event, index + 1, writes)
            await self._flush(session, writes)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("form delivery of %s to session %s failed", event.id, session.id)

    async def _try(
        self, session: LiveSession, event: Event, index: int, writes: _Writes
    ) -> Outcome:
        mechanism = self.mechanisms[index]
        try:
            result = await mechanism.send(session.peer, event)
        except Exception as exc:  # a mechanism's failure is recorded and the next way tried
            result = Result(Outcome.FAILED, f"{type(exc).__name__}: {exc}")
        attempt = self._attempt(session, event, mechanism.name, result)
        if result.outcome is Outcome.DELIVERED:
            # Confirmed: written at once, attempt first, then what it confirms.
            await self._flush(session, writes)
            await self.hub.record_attempts([attempt])
            answer = result.answer
            if answer is not None and answer.action == "accept":
                await self._reply_with(session, event, answer)
            else:
                await self.hub.confirm(session.agent.id, event.id, session.id)
            self._report(DeliveryReport(session.id, event, mechanism.name, result))
            return result.outcome
        sent = (
            event.id
            if result.outcome is Outcome.SENT and event.status is EventStatus.PENDING
            else None
        )
        writes.add(attempt, sent, event, result)
        if result.outcome is Outcome.SENT:
            session.unconfirmed[event.id] = _Pushed(event, index, time.monotonic())
        return result.outcome

    async def _reply_with(self, session: LiveSession, event: Event, answer: FormAnswer) -> None:
        """An accepted form is the agent's reply. Content that does not fit the form (a client
        that did not check it) is kept as the reply's text, not passed on as data the sender
        would misread."""
        text = _answer_text(answer)
        try:
            await self.hub.reply(session.agent, event.id, text, answer.content)
        except InvalidInput as exc:
            log.warning("session %s answered %s off its form: %s", session.id, event.id, exc)
            await self.hub.reply(session.agent, event.id, text, None)

    def _attempt(
        self, session: LiveSession, event: Event, mechanism: str, result: Result
    ) -> Attempt:
        now = self.hub.now()
        return Attempt(event.id, now, mechanism, result.outcome.value, session.id, result.error)

    async def _flush(self, session: LiveSession, writes: _Writes) -> None:
        """Write a round's attempts and sent marks at once, then tell the observers."""
        if writes.sent:
            await self.hub.mark_sent(session.agent.id, writes.sent)
        if writes.attempts:
            await self.hub.record_attempts(writes.attempts)
        reports, writes.reports = writes.reports, []
        writes.attempts, writes.sent = [], []
        for session_id, event, mechanism, result in reports:
            self._report(DeliveryReport(session_id, event, mechanism, result))

    def _report(self, report: DeliveryReport) -> None:
        for observer in self._observers:
            observer(report)


@dataclass
class _Writes:
    """What a round of pushes leaves for the store: written together, in one or two trips."""

    attempts: list[Attempt] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    reports: list[tuple[str, Event, str, Result]] = field(default_factory=list)

    def add(self, attempt: Attempt, sent: str | None, event: Event, result: Result) -> None:
        self.attempts.append(attempt)
        if sent is not None:
            self.sent.append(sent)
        self.reports.append((attempt.session or "", event, attempt.mechanism, result))


def _answer_text(answer: FormAnswer) -> str:
    fields = ", ".join(f"{key}={value}" for key, value in (answer.content or {}).items())
    return f"answered the form: {fields}" if fields else "answered the form"


def _pushes_now(session: LiveSession) -> bool:
    """Whether an event can be pushed to the session now, one way or another."""
    caps = session.caps
    pushes = caps.channel or caps.stream or caps.logs(LOG_NOTICE)
    return caps.can_push and pushes and session.peer.ready()
