"""The ``herald://inbox`` resource: a look at the agent's pending events, on both protocol eras.

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


async def inbox_json(hub: Hub, agent_id: str) -> str:
    """The agent's open events, oldest first, as the resource shows them."""
    events = await hub.open_events(agent_id, 0, INBOX_LIMIT + 1)
    shown = [event.to_json() for event in events[:INBOX_LIMIT]]
    # ASCII escapes keep any text the store holds (a lone surrogate) encodable.
    return json.dumps({"events": shown, "more": len(events) > INBOX_LIMIT})


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
        return types.ListResourcesResult(resources=[*own, INBOX_RESOURCE])

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> Any:
        if params.uri != INBOX_URI:
            if previous_read is not None:
                return await previous_read.handler(ctx, params)
            raise MCPError(
                types.INVALID_PARAMS,
                f"params.uri: no resource {params.uri!r}; herald serves {INBOX_URI}",
            )
        agent = await identify(ctx)
        if agent is None:
            raise MCPError(
                types.INVALID_REQUEST, "herald's inbox needs an agent: connect with its key"
            )
        text = await inbox_json(hub, agent.id)
        contents = types.TextResourceContents(
            uri=INBOX_URI, mime_type="application/json", text=text
        )
        return types.ReadResourceResult(contents=[contents])

    server.add_request_handler("resources/list", types.PaginatedRequestParams, list_resources)
    server.add_request_handler("resources/read", types.ReadResourceRequestParams, read_resource)
