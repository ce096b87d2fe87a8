"""The cascade: for one event and one session, the ways richest first, until one gets through.

It asks each way what it declares (the push paths it needs, what the session must have declared,
whether it waits for an answer, how it tells of a backlog) and never names one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from herald import cursors
from herald.delivery.answers import reply_with
from herald.delivery.base import Backlog, FormAnswer, Mechanism, PushOutcome, PushResult
from herald.delivery.sessions import LiveSession, Unconfirmed
from herald.hub import Hub
from herald.logs import log_attempt
from herald.models import Attempt, Event

log = logging.getLogger("herald.delivery")

NO_WAY = PushResult(PushOutcome.FAILED, "no way to push: waits for inbox")
"""Recorded as the ``store`` attempt when every way failed or none fits."""


@dataclass(frozen=True)
class PushReport:
    """One recorded attempt: which session, which event, which way, what came of it."""

    session_id: str
    event: Event
    mechanism: str
    result: PushResult


@dataclass
class PendingWrites:
    """What a round of pushes leaves for the store: written together, in one or two trips."""

    attempts: list[Attempt] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    reports: list[PushReport] = field(default_factory=list)

    def add(self, attempt: Attempt, sent: str | None, report: PushReport) -> None:
        self.attempts.append(attempt)
        if sent is not None:
            self.sent.append(sent)
        self.reports.append(report)

    def join(self, other: PendingWrites) -> None:
        """Take ``other``'s writes after these, to be written in the same trip."""
        self.attempts.extend(other.attempts)
        self.sent.extend(other.sent)
        self.reports.extend(other.reports)


class Cascade:
    """Walks the ways, richest first, for one event to one session, and records each attempt.

    Args:
        hub: where attempts and their outcomes are written.
        mechanisms: the ways, richest first.
    """

    def __init__(self, hub: Hub, mechanisms: list[Mechanism]) -> None:
        self.hub = hub
        self.mechanisms = mechanisms
        self._observers: list[Callable[[PushReport], None]] = []
        self._unwritten: dict[LiveSession, PendingWrites] = {}
        """Each session's rounds of pushes whose records wait for its write in flight."""
        self._writing: dict[LiveSession, asyncio.Task[None]] = {}
        """The task writing each session's records, while there are some."""

    def observe(self, observer: Callable[[PushReport], None]) -> None:
        self._observers.append(observer)

    def _ways(self, session: LiveSession, start: int = 0) -> list[tuple[int, Mechanism]]:
        """The ways, from ``start``, that this session's peer and declarations allow."""
        return [
            (index, mechanism)
            for index, mechanism in enumerate(self.mechanisms)
            if index >= start and mechanism.fits(session.peer) and mechanism.reaches(session.caps)
        ]

    def pushes_now(self, session: LiveSession) -> bool:
        """Whether any event can be pushed to the session now, one way or another (a way that
        waits for an answer only asks, and only some events)."""
        ways = self._ways(session)
        return session.peer.ready() and any(not m.waits_for_answer for _, m in ways)

    async def offer(
        self, session: LiveSession, event: Event, writes: PendingWrites, start: int = 0
    ) -> None:
        """Push ``event`` the richest way that takes it, from the ``start``-th way on."""
        for index, mechanism in self._ways(session, start):
            if not mechanism.can_serve(session.caps, event):
                continue
            if mechanism.waits_for_answer:
                # It waits for a person: it must not hold up the events behind it.
                session.run_beside(self._ask(session, event, index))
                return
            if await self._try(session, event, index, writes) is not PushOutcome.FAILED:
                return
        writes.add(*self._written(session, event, "store", NO_WAY, sent=False))

    async def summarise(self, session: LiveSession, backlog: Backlog) -> None:
        """Tell the session of a backlog in one notification, the richest way that can,
        instead of one push each."""
        for _, mechanism in self._ways(session):
            summary = mechanism.backlog_summary(backlog)
            if summary is not None:
                await session.peer.notify(summary.method, summary.params)
                break
        said = f"{backlog.unread} unread, {backlog.not_pushed} not pushed"
        attempt = Attempt(backlog.oldest.id, self.hub.now(), "summary", "sent", session.id, said)
        await self.hub.record_attempts([attempt])

    async def _ask(self, session: LiveSession, event: Event, index: int) -> None:
        writes = PendingWrites()
        try:
            if await self._try(session, event, index, writes) is PushOutcome.FAILED:
                await self.offer(session, event, writes, index + 1)
            await self.flush(session, writes)
        except Exception:  # a task of its own: log, and leave the event in the store
            log.exception("form delivery of %s to session %s failed", event.id, session.id)

    async def _try(
        self, session: LiveSession, event: Event, index: int, writes: PendingWrites
    ) -> PushOutcome:
        mechanism = self.mechanisms[index]
        try:
            cursor = cursors.position(event.agent_id, await self.hub.history(), event.seq)
            result = await mechanism.send(session.peer, event, cursor)
        except Exception as exc:  # a mechanism's failure is recorded and the next way tried
            result = PushResult(PushOutcome.FAILED, f"{type(exc).__name__}: {exc}")
        if result.outcome is PushOutcome.DELIVERED:
            await self._confirmed(session, event, mechanism.name, result, writes)
            return result.outcome
        sent = result.outcome is PushOutcome.SENT
        writes.add(*self._written(session, event, mechanism.name, result, sent=sent))
        if sent:
            session.unconfirmed[event.id] = Unconfirmed(event, index, self.hub.clock())
        return result.outcome

    async def _confirmed(
        self,
        session: LiveSession,
        event: Event,
        mechanism: str,
        result: PushResult,
        writes: PendingWrites,
    ) -> None:
        """Written at once: what came before, the attempt, then what it confirms."""
        await self.flush(session, writes)
        attempt, _, report = self._written(session, event, mechanism, result, sent=False)
        await self.hub.record_attempts([attempt])
        answer = result.answer
        if answer is not None and answer.action == "accept":
            await self._reply_with(session, event, answer)
        else:
            await self.hub.confirm(session.agent.id, event.id, session.id)
        self._report(report)

    async def _reply_with(self, session: LiveSession, event: Event, answer: FormAnswer) -> None:
        await reply_with(self.hub, session.agent, event.id, answer, f"session {session.id}")

    def _written(
        self, session: LiveSession, event: Event, mechanism: str, result: PushResult, *, sent: bool
    ) -> tuple[Attempt, str | None, PushReport]:
        """The attempt to record, the event to mark sent (pushed, not confirmed: a pending one
        becomes sent, and each counts as handed out once more), the report."""
        attempt = Attempt(
            event.id, self.hub.now(), mechanism, result.outcome.value, session.id, result.error
        )
        if result.outcome is not PushOutcome.FAILED:
            self.hub.metrics.sent(mechanism, [event.created_at], attempt.at)
        marks = event.id if sent else None
        return attempt, marks, PushReport(session.id, event, mechanism, result)

    def record(self, session: LiveSession, writes: PendingWrites) -> None:
        """Write a round's attempts and sent marks soon, then tell the observers; returns at
        once. The session's next push does not wait for the store: under a steady stream of
        events it waited a whole commit of the writer for the record of the push before it.
        One write per session is in flight at a time; the rounds pushed meanwhile are written
        together in the next. A record not yet written when the process dies is lost, and
        its event stays ``pending``: offered again, never lost. So the write need not wait
        for the disk either (``durable=False``): a power cut may lose it, with the same
        outcome, and the publishes queued behind it on SQLite's one writer wait for no flush
        of it (it doubled the flushes under a steady stream of pushes)."""
        if not (writes.attempts or writes.reports):
            return
        self._unwritten.setdefault(session, PendingWrites()).join(writes)
        if session not in self._writing:
            task = asyncio.create_task(self._write(session), name=f"herald-records-{session.id}")
            self._writing[session] = task

    async def written(self, session: LiveSession | None = None) -> None:
        """Wait until what ``record`` was given (for ``session``, if given) is written, or its
        write failed and was logged."""
        if session is None:
            tasks = list(self._writing.values())
        else:
            tasks = [self._writing[session]] if session in self._writing else []
        if tasks:
            # Shielded: a caller cancelled (its session ended) leaves the records to be written.
            await asyncio.shield(asyncio.gather(*tasks, return_exceptions=True))

    async def _write(self, session: LiveSession) -> None:
        # The records outlive the session (a client that leaves right after a push): this task
        # is not the session's, and is not cancelled with it.
        try:
            while (writes := self._unwritten.pop(session, None)) is not None:
                try:
                    await self.flush(session, writes, durable=False)
                except Exception:  # a task of its own: log; the events stay pending, re-offered
                    log.exception(
                        "recording %d pushes to session %s failed", len(writes.attempts), session.id
                    )
        finally:
            self._writing.pop(session, None)

    async def flush(
        self, session: LiveSession, writes: PendingWrites, *, durable: bool = True
    ) -> None:
        """Write a round's attempts and sent marks at once, then tell the observers."""
        if writes.sent:
            # Asked for together, the two go to the store in one trip (one group, one commit).
            await asyncio.gather(
                self.hub.mark_sent(session.agent.id, writes.sent, durable=durable),
                self.hub.record_attempts(writes.attempts, durable=durable),
            )
        elif writes.attempts:
            await self.hub.record_attempts(writes.attempts, durable=durable)
        reports, writes.reports = writes.reports, []
        writes.attempts, writes.sent = [], []
        for report in reports:
            self._report(report)

    def _report(self, report: PushReport) -> None:
        log_attempt(log, report.event.id, report.mechanism, report.session_id,
                    report.result.outcome.value, error=report.result.error)  # fmt: skip
        for observer in self._observers:
            observer(report)
