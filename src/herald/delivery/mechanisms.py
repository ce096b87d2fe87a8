"""The ways of delivering, richest first: channel, elicitation, stream, log. (The store is not a
mechanism: it is where every event waits until one of these, or a drain, gets it through.)"""

from __future__ import annotations

import time
from typing import ClassVar

from herald.capabilities import LOG_NOTICE, DeliveryCapabilities
from herald.delivery import render
from herald.delivery.base import (
    REQUESTS,
    Backlog,
    Mechanism,
    Notification,
    Peer,
    PushOutcome,
    PushResult,
)
from herald.models import Event
from herald.times import Clock

CHANNEL_METHOD = "notifications/claude/channel"
STREAM_METHOD = "notifications/herald/event"
LOG_METHOD = "notifications/message"


class Channel(Mechanism):
    """A ``<channel>`` tag in a Claude Code session. Fire and forget: sent, not delivered."""

    name: ClassVar[str] = "channel"

    def reaches(self, caps: DeliveryCapabilities) -> bool:
        return caps.channel

    async def send(self, peer: Peer, event: Event, cursor: str) -> PushResult:
        meta = render.channel_meta(event, cursor)
        params = {"content": render.channel_content(event), "meta": meta}
        await peer.notify(CHANNEL_METHOD, params)
        return PushResult(PushOutcome.SENT)

    def backlog_summary(self, backlog: Backlog) -> Notification:
        meta = {
            "type": "herald.backlog",
            "unread": str(backlog.unread),
            "not_pushed": str(backlog.not_pushed),
        }
        return Notification(CHANNEL_METHOD, {"content": _summary(backlog), "meta": meta})


class Elicitation(Mechanism):
    """A form for an interactive event. Accept or decline is delivered (an accepted answer is
    routed back as a reply); an instant cancel means no one is there, and falls through.

    Args:
        timeout_s: how long a form may wait for its answer.
        instant_cancel_s: a cancel sooner than this is no one's answer but the client's.
        timer: measures how long the person took. A reaction time is a duration on this
            process, not a deadline kept in the store, so it is the monotonic clock: the hub's
            wall clock may jump, and a test's hand-moved clock stands still while a real
            client answers.
    """

    name: ClassVar[str] = "elicitation"
    needs: ClassVar[frozenset[str]] = frozenset({REQUESTS})
    waits_for_answer: ClassVar[bool] = True

    def __init__(
        self, timeout_s: float = 600.0, instant_cancel_s: float = 1.0, timer: Clock = time.monotonic
    ) -> None:
        self.timeout_s = timeout_s
        self.instant_cancel_s = instant_cancel_s
        self.timer = timer

    def reaches(self, caps: DeliveryCapabilities) -> bool:
        return caps.elicitation_form

    def can_serve(self, caps: DeliveryCapabilities, event: Event) -> bool:
        return self.reaches(caps) and event.interactive

    async def send(self, peer: Peer, event: Event, cursor: str) -> PushResult:
        assert event.reply_schema is not None
        started = self.timer()
        try:
            answer = await peer.elicit(render.headline(event), event.reply_schema, self.timeout_s)
        except Exception as exc:  # any failure of the client falls through to text
            return PushResult(
                PushOutcome.FAILED, f"elicitation failed: {exc or type(exc).__name__}"
            )
        if answer.action in ("accept", "decline"):
            return PushResult(PushOutcome.DELIVERED, answer=answer)
        if self.timer() - started < self.instant_cancel_s:
            return PushResult(PushOutcome.FAILED, "cancelled at once: no one is there to answer")
        return PushResult(PushOutcome.DELIVERED, answer=answer)


class Stream(Mechanism):
    """A structured ``notifications/herald/event`` for clients that declared they show it."""

    name: ClassVar[str] = "stream"

    def reaches(self, caps: DeliveryCapabilities) -> bool:
        return caps.stream

    async def send(self, peer: Peer, event: Event, cursor: str) -> PushResult:
        params = {"event": event.to_json(), "text": render.as_text(event), "cursor": cursor}
        await peer.notify(STREAM_METHOD, params)
        return PushResult(PushOutcome.SENT)

    def backlog_summary(self, backlog: Backlog) -> Notification:
        counts = {"unread": backlog.unread, "not_pushed": backlog.not_pushed}
        return Notification(STREAM_METHOD, {"summary": counts, "text": _summary(backlog)})


class Log(Mechanism):
    """A log message: the last push there is. Many clients never show it, so: sent."""

    name: ClassVar[str] = "log"

    def reaches(self, caps: DeliveryCapabilities) -> bool:
        return caps.logs(LOG_NOTICE)

    async def send(self, peer: Peer, event: Event, cursor: str) -> PushResult:
        data = {
            "text": render.as_text(event),
            "event_id": event.id,
            "seq": event.seq,
            "cursor": cursor,
        }
        if event.topic is not None:  # as the other pushes show it: only an event that has one
            data["topic"] = event.topic
        await peer.notify(LOG_METHOD, {"level": LOG_NOTICE, "logger": "herald", "data": data})
        return PushResult(PushOutcome.SENT)

    def backlog_summary(self, backlog: Backlog) -> Notification:
        text = _summary(backlog)
        return Notification(LOG_METHOD, {"level": LOG_NOTICE, "logger": "herald", "data": text})


def _summary(backlog: Backlog) -> str:
    return render.summary(backlog.unread, backlog.oldest, backlog.not_pushed)


def default_mechanisms() -> list[Mechanism]:
    return [Channel(), Elicitation(), Stream(), Log()]
