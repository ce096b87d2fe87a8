"""``events/stream``: an agent's matching events pushed as they commit, for as long as the client
holds the request open.

First ``notifications/events/active`` with the cursor the stream starts from (a null cursor
starts as a poll does; a given one acknowledges as a poll's does), then the backlog after it,
then live events from the agent's shared buffer (``Fanout``), and a heartbeat with the cursor
whenever nothing came for ``heartbeat_s``. A pushed event is ``sent`` (recorded by
``Hub.pushes``): the cursor the client polls or streams with later acknowledges it. The
stream ends when the client goes away (the request is cancelled), or, with
``notifications/events/terminated``, when herald cannot go on (the agent was deleted, herald
shuts down, the client fell out of the buffer: the client resumes from its cursor), or when the
key the stream was opened with stops working (Forbidden: a new key is needed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from herald import cursors
from herald.config import DEFAULTS
from herald.delivery.fanout import AGENT_DELETED, Fanout, TooSlow
from herald.hub import Hub
from herald.hub.key_watch import KEY_ROTATED_OUT
from herald.inputs.subscriptions import StreamInput
from herald.models import Agent, Attempt, Event
from herald.subscriptions import catalogue
from herald.subscriptions.catalogue import Subscription
from herald.subscriptions.poll import start

Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
Closer = Callable[[str], None]
BACKLOG_PAGE = 200
MECHANISM = "events.stream"
UNAVAILABLE = -32603
NOT_FOUND = -32023
FORBIDDEN = -32024
SEND_TIMEOUT_S = 30.0
"""A client that takes no notification for this long is not reading: its stream ends."""


class KeyRevocation:
    """Ends the streams of one request once its key stops working, each with its
    ``terminated`` notice: the transport is not cut under them, so the client is told why."""

    def __init__(self) -> None:
        self._closers: set[Closer] = set()
        self.reason: str | None = None

    def on_revoked(self, close: Closer) -> Callable[[], None]:
        """Call ``close(reason)`` once the key stops working (at once if it already has);
        returns what forgets it."""
        if self.reason is not None:
            close(self.reason)
        self._closers.add(close)
        return lambda: self._closers.discard(close)

    def revoke(self, reason: str) -> bool:
        """End every stream registered; whether there was one (that then ends itself)."""
        self.reason = reason
        for close in list(self._closers):
            close(reason)
        return bool(self._closers)


async def stream(
    hub: Hub,
    fanout: Fanout,
    agent: Agent,
    params: StreamInput,
    notify: Notify,
    *,
    session: str | None = None,
    heartbeat_s: float = DEFAULTS.events.heartbeat_s,
    send_timeout_s: float = SEND_TIMEOUT_S,
    revocation: KeyRevocation | None = None,
) -> None:
    """Push the subscription's events through ``notify`` until cancelled or ended by herald
    (``revocation`` ends it once the request's key stops working).

    Raises:
        ClientNotReading: a notification waited ``send_timeout_s`` to be taken.

    And before anything is pushed, so that the request fails plainly:
        NotFound: no entry of that name.
        InvalidInput: bad arguments, or a cursor herald did not give this agent, or one past
            its newest event (CursorAhead); nothing changes.
    """
    notify = _bounded(notify, send_timeout_s)
    subscription = await catalogue.resolve(hub, params.name, params.arguments)
    history = await hub.history()
    given = cursors.decode(params.cursor, agent, history) if params.cursor is not None else None
    if params.cursor is None:
        position = await start(hub, agent, subscription, params.max_age_ms)
        cursor, truncated = position.cursor, position.skipped > 0
    elif given is None:
        # A cursor of another history (before a restore) acknowledges nothing and is no place
        # in this one: every pending event is pushed again, and ``active`` says history was lost.
        cursor, truncated = 0, True
    else:
        cursor = given
        await hub.acknowledge_through(agent, subscription.key, subscription.match, cursor)
        truncated = await hub.missing_after(agent, cursor) > 0
    newest = (await hub.get_agent(agent.id)).last_seq
    live = fanout.subscribe(agent.id, newest)
    pusher = _Pusher(hub, agent, history, subscription, notify, session or subscription.key)

    removed = False

    def end_if_removed() -> None:
        nonlocal removed
        if subscription.name != catalogue.HERALD_EVENT and not hub.event_types.declared(
            subscription.name
        ):
            removed = True
            live.close(f"the event type {subscription.name!r} was removed from the catalogue")

    hub.event_types.add_listener(end_if_removed)
    forget_revocation = revocation.on_revoked(live.close) if revocation is not None else None
    try:
        await notify(
            "notifications/events/active",
            {"cursor": cursors.encode(agent, history, cursor), "truncated": truncated},
        )
        last = cursor
        while page := await hub.open_events(agent.id, last, BACKLOG_PAGE):
            if last == cursor:  # as ``GET /channel/stream`` counts its replays
                await hub.count_handed_out(agent.id, [page[0].id])
            await pusher.push(page)
            last = page[-1].seq
        # Everything open up to where the live buffer began was in that backlog.
        last = max(last, live.covered_through)
        while True:
            try:
                events = await live.next_after(last, heartbeat_s)
            except (TooSlow, ConnectionAbortedError) as exc:
                await notify("notifications/events/terminated", {"error": _ending(exc, removed)})
                return
            if events:
                await pusher.push(events)
                last = events[-1].seq
            else:
                await notify("notifications/events/heartbeat", {"cursor": pusher.cursor(last)})
    finally:
        if forget_revocation is not None:
            forget_revocation()
        hub.event_types.remove_listener(end_if_removed)
        fanout.unsubscribe(live)


class ClientNotReading(Exception):
    """The client took nothing for ``SEND_TIMEOUT_S``: the stream ends; it resumes from its
    cursor."""


def _bounded(notify: Notify, timeout_s: float) -> Notify:
    async def send(method: str, params: dict[str, Any]) -> None:
        try:
            async with asyncio.timeout(timeout_s):
                await notify(method, params)
        except TimeoutError:
            raise ClientNotReading(f"the client took no {method} for {timeout_s:g} s") from None

    return send


def _ending(exc: Exception, removed: bool) -> dict[str, Any]:
    """The error a stream ends with: its entry was removed (rediscover), its agent was deleted
    or its key stopped working (stop), or herald cannot go on now (resume with the cursor)."""
    said = str(exc).split("; resume with", 1)[0]
    if removed:
        return {"code": NOT_FOUND, "message": said, "data": {"kind": "event"}}
    if said == AGENT_DELETED:
        return {"code": FORBIDDEN, "message": said}
    if said == KEY_ROTATED_OUT:
        return {"code": FORBIDDEN, "message": f"{said}: open it again with the agent's new key"}
    return {"code": UNAVAILABLE, "message": f"{said}; resume with your last cursor"}


class _Pusher:
    """Sends one subscription's matching events and records them sent."""

    def __init__(
        self,
        hub: Hub,
        agent: Agent,
        history: str,
        subscription: Subscription,
        notify: Notify,
        session: str,
    ) -> None:
        self.hub = hub
        self.agent = agent
        self.history = history
        self.subscription = subscription
        self.notify = notify
        self.session = session

    def cursor(self, seq: int) -> str:
        return cursors.encode(self.agent, self.history, seq)

    async def push(self, events: Sequence[Event]) -> None:
        matching = [e for e in events if self.subscription.match.matches(e)]
        for event in matching:
            occurrence = catalogue.occurrence(event, self.subscription.name)
            occurrence["cursor"] = self.cursor(event.seq)
            await self.notify("notifications/events/event", occurrence)
        if matching:
            # Recorded in the background, for this stream and every other at once: the next
            # push does not wait for it, and the record outlives a client that leaves now.
            now = self.hub.now()
            self.hub.pushes.add(
                self.agent.id,
                [Attempt(e.id, now, MECHANISM, "sent", self.session) for e in matching],
            )
            self.hub.metrics.sent(MECHANISM, [e.created_at for e in matching], now)
