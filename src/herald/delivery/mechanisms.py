"""The ways of delivering, richest first: channel, elicitation, stream, log. (The store is not a
mechanism: it is where every event waits until one of these, or a drain, gets it through.)"""

from __future__ import annotations

import time
from typing import ClassVar

from herald.capabilities import LOG_NOTICE, DeliveryCapabilities
from herald.delivery import render
from herald.delivery.base import Mechanism, Outcome, Peer, Result
from herald.models import Event

CHANNEL_METHOD = "notifications/claude/channel"
STREAM_METHOD = "notifications/herald/event"
LOG_METHOD = "notifications/message"


class Channel(Mechanism):
    """A ``<channel>`` tag in a Claude Code session. Fire and forget: sent, not delivered."""

    name: ClassVar[str] = "channel"

    def can_serve(self, caps: DeliveryCapabilities, event: Event) -> bool:
        return caps.can_push and caps.channel

    async def send(self, peer: Peer, event: Event) -> Result:
        params = {"content": render.channel_content(event), "meta": render.channel_meta(event)}
        await peer.notify(CHANNEL_METHOD, params)
        return Result(Outcome.SENT)


class Elicitation(Mechanism):
    """A form for an interactive event. Accept or decline is delivered (an accepted answer is
    routed back as a reply); an instant cancel means no one is there, and falls through."""

    name: ClassVar[str] = "elicitation"

    def __init__(self, timeout_s: float = 600.0, instant_cancel_s: float = 1.0) -> None:
        self.timeout_s = timeout_s
        self.instant_cancel_s = instant_cancel_s

    def can_serve(self, caps: DeliveryCapabilities, event: Event) -> bool:
        return caps.can_push and caps.elicitation_form and event.interactive

    async def send(self, peer: Peer, event: Event) -> Result:
        assert event.reply_schema is not None
        started = time.monotonic()
        try:
            answer = await peer.elicit(render.headline(event), event.reply_schema, self.timeout_s)
        except Exception as exc:  # any failure of the client falls through to text
            return Result(Outcome.FAILED, f"elicitation failed: {exc or type(exc).__name__}")
        if answer.action in ("accept", "decline"):
            return Result(Outcome.DELIVERED, answer=answer)
        if time.monotonic() - started < self.instant_cancel_s:
            return Result(Outcome.FAILED, "cancelled at once: no one is there to answer")
        return Result(Outcome.DELIVERED, answer=answer)


class Stream(Mechanism):
    """A structured ``notifications/herald/event`` for clients that declared they show it."""

    name: ClassVar[str] = "stream"

    def can_serve(self, caps: DeliveryCapabilities, event: Event) -> bool:
        return caps.can_push and caps.stream

    async def send(self, peer: Peer, event: Event) -> Result:
        await peer.notify(STREAM_METHOD, {"event": event.to_json(), "text": render.as_text(event)})
        return Result(Outcome.SENT)


class Log(Mechanism):
    """A log message: the last push there is. Many clients never show it, so: sent."""

    name: ClassVar[str] = "log"

    def can_serve(self, caps: DeliveryCapabilities, event: Event) -> bool:
        return caps.can_push and caps.logs(LOG_NOTICE)

    async def send(self, peer: Peer, event: Event) -> Result:
        data = {"text": render.as_text(event), "event_id": event.id, "seq": event.seq}
        await peer.notify(LOG_METHOD, {"level": LOG_NOTICE, "logger": "herald", "data": data})
        return Result(Outcome.SENT)


def default_mechanisms() -> list[Mechanism]:
    return [Channel(), Elicitation(), Stream(), Log()]
