"""``events/subscribe`` and ``events/unsubscribe`` (MCP Events webhook subscriptions) on an MCP
server, for the authenticated agent. Served where herald can send webhooks: beside the webhook
worker, whose sender verifies endpoints and which is woken when a subscription is made."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from herald.config import DEFAULTS, SubscriptionConfig
from herald.errors import HeraldError
from herald.hub import Hub
from herald.inputs.refusals import parse
from herald.inputs.subscriptions import SubscribeInput, UnsubscribeInput
from herald.mcp.events import (
    Identify,
    agent_or_refusal,
    checked_params,
    events_profile,
    refusal,
)
from herald.models import Agent
from herald.webhooks import subscriptions
from herald.webhooks.sender import Sender


def attach(
    server: Server[Any],
    hub: Hub,
    identify: Identify,
    sender: Sender,
    config: SubscriptionConfig = DEFAULTS.subscriptions,
    wake: Callable[[], None] = lambda: None,
) -> None:
    """Serve ``events/subscribe`` and ``events/unsubscribe`` on ``server`` for the agent
    ``identify`` finds; ``sender`` verifies endpoints, ``wake`` tells the webhook worker that a
    subscription was made (its waiting events are due at once)."""

    async def agent_of(ctx: ServerRequestContext[Any]) -> Agent:
        # SEP-3415: webhook subscriptions need an authenticated principal.
        return await agent_or_refusal(identify, ctx, "webhook subscriptions")

    async def subscribe(ctx: ServerRequestContext[Any], _: types.RequestParams) -> dict[str, Any]:
        agent = await agent_of(ctx)
        try:
            body = parse(SubscribeInput, checked_params(ctx))
            webhook_id = events_profile(ctx).webhook_id
            result = await subscriptions.subscribe(hub, sender, agent, body, config, webhook_id)
        except HeraldError as exc:
            raise refusal(exc) from exc
        wake()
        return result

    async def unsubscribe(ctx: ServerRequestContext[Any], _: types.RequestParams) -> dict[str, Any]:
        agent = await agent_of(ctx)
        try:
            body = parse(UnsubscribeInput, checked_params(ctx))
            return await subscriptions.unsubscribe(hub, agent, body)
        except HeraldError as exc:
            raise refusal(exc) from exc

    server.add_request_handler("events/subscribe", types.RequestParams, subscribe)
    server.add_request_handler("events/unsubscribe", types.RequestParams, unsubscribe)
