"""``subscriptions/listen`` (2026-07-28): ``notifications/resources/updated`` for
``herald://inbox`` when the agent's inbox changes, and ``notifications/events/list_changed``
when the event-type catalogue does.

The SDK's ``ListenHandler`` fans one bus out to every stream alike: a ``herald://inbox`` update
would reach every agent's stream, since the URI is the same for all. So herald keeps its own
streams, in the SDK's shape: acknowledged first, every frame tagged with the subscription id,
nothing sent that was not asked for, and a bounded backlog. The backlog is a set of flags (what
changed since the last frame), so a burst of changes becomes one update and a slow reader never
holds more than one frame of each kind.

What the hub wakes streams for: events committed for an agent, here or (PostgreSQL) in another
process; acknowledgements here; and on PostgreSQL events closed (acknowledged, delivered,
expired by maintenance) or opened again in any process, heard through the store. Beneath that,
the inboxes of listening agents are read every few seconds, and a change no wake-up told of
(on SQLite an event expiring; on PostgreSQL a notification lost) is told then.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from herald.config import DEFAULTS
from herald.hub import Hub
from herald.mcp import events
from herald.mcp.events import SUBSCRIPTION_ID, Identify
from herald.mcp.peer import Notification
from herald.mcp.resources import INBOX_URI

log = logging.getLogger("herald.mcp")

COALESCE_S = 0.1
"""After a frame, changes are gathered this long into the next one: a burst is one update."""
EVENTS_LIST_CHANGED = "eventsListChanged"
INBOX_UPDATED = "notifications/resources/updated"
EVENTS_CHANGED = "notifications/events/list_changed"


@dataclass(eq=False)
class _Stream:
    agent_id: str
    inbox: bool
    catalogue: bool
    changed: dict[str, None] = field(default_factory=dict)
    """The notifications owed, in the order their first change came: at most one of each
    kind, however many changes."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False

    def owe(self, method: str) -> None:
        self.changed.setdefault(method)
        self.wake.set()

    def close(self) -> None:
        self.closed = True
        self.wake.set()


class ListenStreams:
    """This process's listen streams, woken by the hub: an agent's inbox changed (events
    committed for it, here or in another process on PostgreSQL; events of its acknowledged
    here, or on PostgreSQL closed or opened again anywhere), or the event-type catalogue did
    (in any process); and by a look at their inboxes every ``check_s``, for the changes no
    wake-up tells of.

    Args:
        hub: whose changes are told.
        coalesce_s: how long changes are gathered after a frame, before the next.
        check_s: how often the inboxes of listening agents are read.
    """

    def __init__(
        self,
        hub: Hub,
        coalesce_s: float = COALESCE_S,
        check_s: float = DEFAULTS.events.inbox_check_s,
    ) -> None:
        self.hub = hub
        self.coalesce_s = coalesce_s
        self.check_s = check_s
        self._streams: set[_Stream] = set()
        self._watcher: asyncio.Task[None] | None = None
        self._marks: dict[str, tuple[int, int] | None] = {}
        """The last mark read of each listened inbox (None: empty)."""
        hub.add_inbox_listener(self._inbox_changed)
        hub.event_types.add_listener(self._catalogue_changed)

    def count(self) -> int:
        return len(self._streams)

    def close(self) -> None:
        """End every stream gracefully (its result is the last frame): herald is stopping."""
        for stream in list(self._streams):
            stream.close()
        if self._watcher is not None:
            self._watcher.cancel()

    def _inbox_changed(self, agent_ids: set[str]) -> None:
        for stream in self._streams:
            if stream.inbox and stream.agent_id in agent_ids:
                stream.owe(INBOX_UPDATED)

    async def _mark(self, agent_id: str) -> None:
        """Read the mark of a newly listened inbox, before its stream is acknowledged: what
        changes after that is told."""
        if agent_id not in self._marks:
            marks = await self.hub.inbox_marks([agent_id])
            self._marks.setdefault(agent_id, marks.get(agent_id))
        if self._watcher is None:
            self._watcher = asyncio.create_task(self._watch_inboxes())

    async def _watch_inboxes(self) -> None:
        """Every ``check_s``, read the marks of the listened inboxes, and tell the streams of
        each agent whose mark changed; until no stream listens to an inbox."""
        try:
            while True:
                await asyncio.sleep(self.check_s)
                agents = sorted({s.agent_id for s in self._streams if s.inbox})
                if not agents:
                    self._marks.clear()
                    return
                try:
                    read = await self.hub.inbox_marks(agents)
                except Exception:  # a background task's top level: log, look again later
                    log.exception("reading the inboxes of listening agents failed")
                    continue
                changed = {a for a in agents if a in self._marks and self._marks[a] != read.get(a)}
                self._marks.update((a, read.get(a)) for a in agents)
                listening = {s.agent_id for s in self._streams if s.inbox}
                for gone in self._marks.keys() - listening:
                    del self._marks[gone]
                if changed:
                    self._inbox_changed(changed)
        finally:
            self._watcher = None

    def _catalogue_changed(self) -> None:
        for stream in self._streams:
            if stream.catalogue:
                stream.owe(EVENTS_CHANGED)

    async def serve(
        self, ctx: ServerRequestContext[Any], agent_id: str, asked: types.SubscriptionFilter
    ) -> types.SubscriptionsListenResult:
        """Serve one listen stream until the client leaves (the handler is cancelled) or
        ``close``."""
        if ctx.request_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen needs a request id")
        honoured = honour(asked)
        meta: dict[str, Any] = {SUBSCRIPTION_ID: ctx.request_id}
        stream = _Stream(
            agent_id,
            inbox=bool(honoured.resource_subscriptions),
            catalogue=(honoured.model_extra or {}).get(EVENTS_LIST_CHANGED) is True,
        )
        # Registered before the acknowledgement is written, so that a change meanwhile is owed
        # rather than lost; it is still sent after the acknowledgement, by this task alone.
        self._streams.add(stream)
        try:
            if stream.inbox:
                await self._mark(agent_id)
            acknowledged = types.SubscriptionsAcknowledgedNotification(
                params=types.SubscriptionsAcknowledgedNotificationParams(
                    notifications=honoured, _meta=meta
                )
            )
            await ctx.session.send_notification(acknowledged, related_request_id=ctx.request_id)
            while True:
                await stream.wake.wait()
                stream.wake.clear()
                if stream.closed:
                    break
                owed, stream.changed = stream.changed, {}
                for method in owed:
                    await ctx.session.send_notification(
                        _frame(method, meta),  # type: ignore[arg-type]
                        related_request_id=ctx.request_id,
                    )
                await asyncio.sleep(self.coalesce_s)
        finally:
            self._streams.discard(stream)
        return types.SubscriptionsListenResult(_meta=meta)


def honour(asked: types.SubscriptionFilter) -> types.SubscriptionFilter:
    """The part of the filter herald sends: updates of ``herald://inbox``, and catalogue
    changes when Events declares ``listChanged``. herald's tools and resources are always the
    same, so their list-change kinds would never fire: they are left out, as the standard asks
    of what a server does not support."""
    uris = sorted({uri for uri in asked.resource_subscriptions or () if uri == INBOX_URI})
    extra: dict[str, Any] = {}
    if (asked.model_extra or {}).get(EVENTS_LIST_CHANGED) is True and events.SETTINGS.get(
        "listChanged"
    ):
        extra[EVENTS_LIST_CHANGED] = True
    return types.SubscriptionFilter(resource_subscriptions=uris or None, **extra)


def _frame(method: str, meta: dict[str, Any]) -> types.Notification[Any, Any]:
    if method == INBOX_UPDATED:
        return types.ResourceUpdatedNotification(
            params=types.ResourceUpdatedNotificationParams(uri=INBOX_URI, _meta=meta)
        )
    return Notification(method=method, params={"_meta": meta})


def attach(
    server: Server[Any],
    streams: ListenStreams,
    identify: Identify,
    slot: events.StreamSlot = events.no_limit,
) -> None:
    """Serve ``subscriptions/listen`` on ``server`` (it replaces a handler already there) for
    the agent ``identify`` finds; each stream takes a ``slot`` of its agent's."""

    async def listen(
        ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        agent = await identify(ctx)
        if agent is None:
            raise MCPError(
                types.INVALID_REQUEST, "herald's subscriptions need an agent: connect with its key"
            )
        release = events.take_slot(slot, agent.id)
        try:
            return await streams.serve(ctx, agent.id, params.notifications)
        finally:
            release()

    async def discovered(ctx: ServerRequestContext[Any], call_next: events.CallNext) -> Any:
        result = await call_next(ctx)
        if ctx.method == "server/discover":
            declare_what_is_sent(result)
        return result

    server.add_request_handler(
        "subscriptions/listen", types.SubscriptionsListenRequestParams, listen
    )
    server.middleware.insert(0, discovered)


def declare_what_is_sent(result: Any) -> None:
    """Make a ``server/discover`` wire result say what this era gets. The SDK derives every
    ``listChanged`` from serving ``subscriptions/listen``, but herald's lists never change
    (``honour`` leaves those kinds out); and no ``notifications/message`` is sent on
    2026-07-28, so logging is not offered."""
    capabilities = result.get("capabilities") if isinstance(result, dict) else None
    if not isinstance(capabilities, dict):
        return
    capabilities.pop("logging", None)
    for kind in ("tools", "prompts", "resources"):
        declared = capabilities.get(kind)
        if isinstance(declared, dict) and "listChanged" in declared:
            declared["listChanged"] = False
