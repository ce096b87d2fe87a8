"""The MCP Events extension (SEP-3415) on an MCP server: ``events/list``, ``events/poll`` and
``events/stream`` for the authenticated agent, advertised on both protocol eras.

The SEP defines the extension for 2026-07-28 under ``capabilities.extensions``; published
clients also read a top-level ``capabilities.events`` and use it after a legacy ``initialize``,
so herald advertises both keys, on both eras. The SDK's per-version result sieve drops keys it
does not know, so the advertisement is added to the wire result by a middleware.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from herald import json_input
from herald.capabilities import DEPLOYED, EventsProfile, profile_for
from herald.config import DEFAULTS, EventsConfig
from herald.delivery.fanout import Fanout
from herald.errors import (
    CallbackEndpointError,
    Forbidden,
    HeraldError,
    InvalidInput,
    LimitReached,
    NotFound,
    RateLimited,
    SubscriptionNotFound,
    TooLarge,
    Unauthorized,
    Unsupported,
)
from herald.hub import Hub
from herald.inputs.refusals import parse
from herald.inputs.subscriptions import ListInput, PollInput, StreamInput
from herald.mcp.peer import Notification
from herald.models import Agent
from herald.subscriptions import catalogue, codes
from herald.subscriptions.codes import CALLBACK_ENDPOINT_ERROR as CALLBACK_ENDPOINT_ERROR
from herald.subscriptions.codes import FORBIDDEN as FORBIDDEN
from herald.subscriptions.codes import NOT_FOUND as NOT_FOUND
from herald.subscriptions.codes import RESOURCE_EXHAUSTED as RESOURCE_EXHAUSTED
from herald.subscriptions.codes import UNSUPPORTED as UNSUPPORTED
from herald.subscriptions.poll import poll
from herald.subscriptions.stream import ClientNotReading, KeyRevocation, stream

log = logging.getLogger("herald.mcp")

EXTENSION = "io.modelcontextprotocol/events"
SETTINGS: dict[str, Any] = {"listChanged": True}
"""What herald's Events support declares (list changes go out on ``subscriptions/listen``)."""

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

Identify = Callable[[ServerRequestContext[Any]], Awaitable[Agent | None]]
StreamSlot = Callable[[str], Callable[[], None]]
"""Takes one of an agent's slots for a long-lived request (``events/stream``,
``subscriptions/listen``) and returns its release, or raises ``RateLimited``."""


PollAdmit = Callable[[str], Callable[[int], None]]
"""Lets one ``events/poll`` of an agent in and returns what to tell the events it looked at,
or raises ``RateLimited`` (the per-key poll limit, ``herald.http.limits.PollCost``)."""


def no_limit(agent_id: str) -> Callable[[], None]:
    return lambda: None


def no_poll_limit(agent_id: str) -> Callable[[int], None]:
    return lambda looked: None


def take_slot(slot: StreamSlot, agent_id: str) -> Callable[[], None]:
    """One of the agent's stream slots, or the SEP's ResourceExhausted saying what to do.

    Raises:
        MCPError: the agent has as many long-lived requests open as it may.
    """
    try:
        return slot(agent_id)
    except RateLimited as exc:
        raise MCPError(RESOURCE_EXHAUSTED, exc.message, {"limit": "streams"}) from exc


CallNext = Callable[[ServerRequestContext[Any]], Awaitable[Any]]
ADVERTISED_IN = frozenset({"initialize", "server/discover"})


def refusal(exc: HeraldError) -> MCPError:
    """herald's error as the SEP's JSON-RPC error: its message still says what to change."""
    if isinstance(exc, NotFound):
        kind = "subscription" if isinstance(exc, SubscriptionNotFound) else "event"
        return MCPError(NOT_FOUND, exc.message, {"kind": kind})
    if isinstance(exc, Unsupported):
        return MCPError(UNSUPPORTED, exc.message, {"feature": exc.feature, "value": exc.value})
    if isinstance(exc, CallbackEndpointError):
        return MCPError(CALLBACK_ENDPOINT_ERROR, exc.message, {"reason": exc.reason})
    if isinstance(exc, InvalidInput) and not isinstance(exc, TooLarge):
        return MCPError(types.INVALID_PARAMS, exc.message)
    if isinstance(exc, (Forbidden, Unauthorized)):
        return MCPError(FORBIDDEN, exc.message)
    if isinstance(exc, LimitReached):
        return MCPError(RESOURCE_EXHAUSTED, exc.message, {"limit": exc.limit, "max": exc.maximum})
    if isinstance(exc, (RateLimited, TooLarge)):
        return MCPError(RESOURCE_EXHAUSTED, exc.message, {"limit": exc.code})
    return MCPError(types.INTERNAL_ERROR, exc.message, {"code": exc.code})


def advertise(result: Any) -> Any:
    """Add Events to an ``initialize`` or ``server/discover`` wire result."""
    capabilities = result.get("capabilities") if isinstance(result, dict) else None
    if isinstance(capabilities, dict):
        capabilities.setdefault("extensions", {})[EXTENSION] = dict(SETTINGS)
        capabilities["events"] = dict(SETTINGS)
    return result


def attach(
    server: Server[Any],
    hub: Hub,
    identify: Identify,
    fanout: Fanout,
    config: EventsConfig = DEFAULTS.events,
    slot: StreamSlot = no_limit,
    admit: PollAdmit = no_poll_limit,
) -> None:
    """Serve ``events/list``, ``events/poll`` and ``events/stream`` on ``server`` for the agent
    ``identify`` finds; streams read the agents' live events from ``fanout``, and each takes a
    ``slot`` of its agent's; each poll is let in by ``admit``."""
    streams = Streams(hub, fanout, config, slot)

    async def agent_of(ctx: ServerRequestContext[Any]) -> Agent:
        return await agent_or_refusal(identify, ctx, "herald's events")

    async def list_events(ctx: ServerRequestContext[Any], _: types.RequestParams) -> dict[str, Any]:
        await agent_of(ctx)
        try:
            body = parse(ListInput, checked_params(ctx))
            offset = _offset(body.cursor)
            entries, following = await catalogue.page(hub, offset)
        except HeraldError as exc:
            raise refusal(exc) from exc
        result: dict[str, Any] = {"events": entries}
        if following is not None:
            result["nextCursor"] = str(following)
        return result

    async def poll_events(ctx: ServerRequestContext[Any], _: types.RequestParams) -> dict[str, Any]:
        return await poll_answer(hub, await agent_of(ctx), ctx.params, config, admit)

    async def stream_events(
        ctx: ServerRequestContext[Any], _: types.RequestParams
    ) -> dict[str, Any]:
        async def send(method: str, params: dict[str, Any]) -> None:
            notification = Notification(method=method, params=params)
            # The SDK sends any Notification subclass; its union type names only the spec's.
            await ctx.session.send_notification(
                notification,  # type: ignore[arg-type]
                related_request_id=ctx.request_id,
            )

        assert ctx.request_id is not None  # a request, not a notification
        agent = await agent_of(ctx)
        revocation = revocation_of(ctx)
        profile = events_profile(ctx)
        return await streams.run(agent, ctx.params, ctx.request_id, send, revocation, profile)

    server.add_request_handler("events/list", types.RequestParams, list_events)
    server.add_request_handler("events/poll", types.RequestParams, poll_events)
    server.add_request_handler("events/stream", types.RequestParams, stream_events)
    server.middleware.insert(0, advertised)
    server.middleware.insert(0, in_the_clients_codes)


REVOCATION_SCOPE_KEY = "herald.key_revocation"
"""Where an authenticating ASGI layer puts the ``KeyRevocation`` of the request's key."""


def revocation_of(ctx: ServerRequestContext[Any]) -> KeyRevocation | None:
    scope = getattr(ctx.request, "scope", None)
    found = scope.get(REVOCATION_SCOPE_KEY) if isinstance(scope, dict) else None
    return found if isinstance(found, KeyRevocation) else None


async def agent_or_refusal(identify: Identify, ctx: ServerRequestContext[Any], what: str) -> Agent:
    """The agent the request comes from.

    Raises:
        MCPError: no agent (the SEP's Forbidden: these methods need an authenticated principal).
    """
    agent = await identify(ctx)
    if agent is None:
        raise MCPError(FORBIDDEN, f"{what} need an agent: connect with its key")
    return agent


def checked_params(ctx: ServerRequestContext[Any]) -> dict[str, Any]:
    """The request's params, checked as any body herald takes is (``herald.json_input``).

    Raises:
        InvalidInput: what the raw JSON checks refuse.
    """
    params = dict(ctx.params or {})
    json_input.check(params, "params")
    return params


async def poll_answer(
    hub: Hub,
    agent: Agent,
    params: Mapping[str, Any] | None,
    config: EventsConfig,
    admit: PollAdmit = no_poll_limit,
) -> dict[str, Any]:
    """What ``events/poll`` with these params answers ``agent``, if ``admit`` lets it in.

    Raises:
        MCPError: the params are refused (the extension's code, the field named), or the
            agent's polls are over their limit (ResourceExhausted, with ``retryAfterMs``).
    """
    try:
        cost = admit(agent.id)
    except RateLimited as exc:
        retry_ms = math.ceil(exc.retry_after_s * 1000)
        raise MCPError(
            RESOURCE_EXHAUSTED, exc.message, {"limit": "polls", "retryAfterMs": retry_ms}
        ) from exc
    try:
        raw = dict(params or {})
        json_input.check(raw, "params")
        return await poll(
            hub,
            agent,
            parse(PollInput, raw),
            idle_ms=config.poll_idle_ms,
            flowing_ms=config.poll_flowing_ms,
            looked=cost,
        )
    except HeraldError as exc:
        raise refusal(exc) from exc


class Streams:
    """What serves each ``events/stream``: its slot, its params, the stream, and how it ends."""

    def __init__(
        self,
        hub: Hub,
        fanout: Fanout,
        config: EventsConfig = DEFAULTS.events,
        slot: StreamSlot = no_limit,
    ) -> None:
        self.hub = hub
        self.fanout = fanout
        self.config = config
        self.slot = slot

    async def run(
        self,
        agent: Agent,
        params: Mapping[str, Any] | None,
        request_id: str | int,
        send: Callable[[str, dict[str, Any]], Awaitable[None]],
        revocation: KeyRevocation | None = None,
        profile: EventsProfile = DEPLOYED,
    ) -> dict[str, Any]:
        """Push the stream through ``send`` until it ends (``revocation``: once the request's
        key stops working); return its last answer. A ``terminated`` error's code is in the
        band of the client's ``profile``.

        Raises:
            MCPError: the request is refused (before anything is sent).
        """
        tag = {SUBSCRIPTION_ID: request_id}
        started = False

        async def notify(method: str, said: dict[str, Any]) -> None:
            nonlocal started
            started = True
            await send(method, {**said, "_meta": tag})

        release = take_slot(self.slot, agent.id)
        try:
            raw = dict(params or {})
            json_input.check(raw, "params")
            body = parse(StreamInput, raw)
            await stream(
                self.hub,
                self.fanout,
                agent,
                body,
                notify,
                heartbeat_s=self.config.heartbeat_s,
                revocation=revocation,
            )
        except ClientNotReading:
            log.info("an events/stream of %s ended: its client was not reading", agent.id)
        except HeraldError as exc:
            if not started:
                raise refusal(exc) from exc
            error = in_codes(refusal(exc), profile).error.model_dump(exclude_none=True)
            await notify("notifications/events/terminated", {"error": error})
        finally:
            release()
        return {"_meta": tag}


def events_profile(ctx: ServerRequestContext[Any]) -> EventsProfile:
    """The Events profile of the client a request comes from: named in the request's ``_meta``
    (2026-07-28), or in its session's ``initialize``."""
    params = ctx.params if isinstance(ctx.params, Mapping) else {}
    meta = params.get("_meta")
    info = meta.get(types.CLIENT_INFO_META_KEY) if isinstance(meta, Mapping) else None
    name = info.get("name") if isinstance(info, Mapping) else None
    if not isinstance(name, str):
        client = ctx.session.client_params
        name = client.client_info.name if client is not None else None
    return profile_for(name).events


def in_codes(error: MCPError, profile: EventsProfile) -> MCPError:
    """``error`` with its code in the band ``profile`` expects (the same error if it is)."""
    subscription = isinstance(error.data, Mapping) and error.data.get("kind") == "subscription"
    code = codes.for_client(error.code, profile, subscription=subscription)
    return error if code == error.code else MCPError(code, error.message, error.data)


async def in_the_clients_codes(ctx: ServerRequestContext[Any], call_next: CallNext) -> Any:
    """The middleware that answers an ``events/*`` error in the client's band of codes
    (``EventsProfile.error_codes``): the extension's, or its earlier design sketch's."""
    try:
        return await call_next(ctx)
    except MCPError as exc:
        if not ctx.method.startswith("events/"):
            raise
        renumbered = in_codes(exc, events_profile(ctx))
        if renumbered is exc:
            raise
        raise renumbered from exc


async def advertised(ctx: ServerRequestContext[Any], call_next: CallNext) -> Any:
    """The middleware that adds Events to what ``initialize`` and ``server/discover`` answer."""
    result = await call_next(ctx)
    return advertise(result) if ctx.method in ADVERTISED_IN else result


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isascii() or not cursor.isdigit() or len(cursor) > 9:
        raise InvalidInput("params.cursor must be the nextCursor of an earlier page, or left out")
    return int(cursor)
