"""The ``herald://inbox`` resource: a look at the agent's pending events, on both protocol eras;
and ``herald://history``: its newest acknowledged events (the ``history`` tool reads on).

Reading it changes nothing. The ``inbox`` tool is the drain (what it shows is delivered); the
resource is what a client reads again when its ``subscriptions/listen`` stream says the inbox
changed, so reading it must not take the events away from the tool, the cascade or a webhook.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from herald.hub import Hub
from herald.mcp.events import Identify
from herald.models import Agent

INBOX_URI = "herald://inbox"
INBOX_LIMIT = 100
"""The most events the resource shows: the oldest; ``more`` says whether others wait."""
INBOX_RESOURCE = types.Resource(
    uri=INBOX_URI,
    name="inbox",
    title="herald inbox",
    description=(
        "Your pending herald events as JSON, oldest first (at most 100; `more` says whether"
        " others wait). Reading it is a look, not a delivery: nothing is marked delivered."
        " Call the `inbox` tool to take the events, or `ack` the ones you have handled."
    ),
    mime_type="application/json",
)

HISTORY_URI = "herald://history"
HISTORY_RESOURCE = types.Resource(
    uri=HISTORY_URI,
    name="history",
    title="herald history",
    description=(
        "Your newest acknowledged herald events as JSON, newest first (a page as the"
        " `history` tool gives it: `next`, when not null, is the `before` to read older ones"
        " with the tool). Reading it changes nothing."
    ),
    mime_type="application/json",
)
RESOURCES = {INBOX_URI: INBOX_RESOURCE, HISTORY_URI: HISTORY_RESOURCE}


async def inbox_json(hub: Hub, agent_id: str) -> str:
    """The agent's open events, oldest first, as the resource shows them."""
    events = await hub.open_events(agent_id, 0, INBOX_LIMIT + 1)
    shown = [event.to_json() for event in events[:INBOX_LIMIT]]
    # ASCII escapes keep any text the store holds (a lone surrogate) encodable.
    return json.dumps({"events": shown, "more": len(events) > INBOX_LIMIT})


async def history_json(hub: Hub, agent: Agent) -> str:
    """The agent's newest acknowledged events, as the resource shows them."""
    page = await hub.acknowledged_events(agent)
    return json.dumps(page.to_json())


def attach(server: Server[Any], hub: Hub, identify: Identify) -> None:
    """Serve ``herald://inbox`` in ``resources/list`` and ``resources/read`` of ``server``,
    beside the resources its own handlers serve."""
    previous_list = server.get_request_handler("resources/list")
    previous_read = server.get_request_handler("resources/read")

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        own: list[types.Resource] = []
        if previous_list is not None:
            listed = await previous_list.handler(ctx, params)
            own = list(types.ListResourcesResult.model_validate(listed).resources)
        return types.ListResourcesResult(resources=[*own, *RESOURCES.values()])

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> Any:
        if params.uri not in RESOURCES:
            if previous_read is not None:
                return await previous_read.handler(ctx, params)
            raise MCPError(
                types.INVALID_PARAMS,
                f"params.uri: no resource {params.uri!r}; herald serves {' and '.join(RESOURCES)}",
            )
        agent = await identify(ctx)
        if agent is None:
            name = RESOURCES[params.uri].name
            raise MCPError(
                types.INVALID_REQUEST, f"herald's {name} needs an agent: connect with its key"
            )
        if params.uri == INBOX_URI:
            text = await inbox_json(hub, agent.id)
        else:
            text = await history_json(hub, agent)
        contents = types.TextResourceContents(
            uri=params.uri, mime_type="application/json", text=text
        )
        return types.ReadResourceResult(contents=[contents])

    server.add_request_handler("resources/list", types.PaginatedRequestParams, list_resources)
    server.add_request_handler("resources/read", types.ReadResourceRequestParams, read_resource)
