"""The admin's routes for agents: create, list, read, delete, their delivery overrides, their
live sessions and their keys. An agent is named in the path by its id or its handle."""

from __future__ import annotations

from typing import cast

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald import answers
from herald.errors import InvalidInput, NotFound
from herald.http.auth import require_admin
from herald.http.described import ADMIN_ONLY, described
from herald.http.io import json_response, read_json
from herald.http.services import services
from herald.inputs.agents import DeliveryInput, KeyRotationInput, NewAgentInput
from herald.inputs.listing import AgentListingInput
from herald.inputs.refusals import parse
from herald.times import iso_ms
from herald.webhooks import manage


@described(
    "Create an agent",
    keys=ADMIN_ONLY,
    body=NewAgentInput,
    answers={201: answers.CreatedAgent},
    errors=(409,),
    description="Its key is in the answer, and shown only there; so is its webhook's secret.",
)
async def create_agent(request: Request) -> Response:
    hub, guard = services(request).hub, services(request).guard
    await require_admin(hub, request)
    body = parse(NewAgentInput, await read_json(request))
    url = body.webhook_url
    warning = await manage.admit(guard, url, "webhook_url") if url is not None else None
    delivery = body.delivery.model_dump(exclude_unset=True) if body.delivery else None
    agent, key = await hub.create_agent(body.handle, delivery=delivery)
    webhook: answers.SetWebhook | None = None
    if url is not None:
        endpoint, secret = await manage.set_webhook(hub, agent.id, url)
        webhook = {**endpoint.to_json(), "secret": secret, "warning": warning}
        agent = await hub.get_agent(agent.id)
    created: answers.CreatedAgent = {**agent.to_json(), "api_key": key, "webhook": webhook}
    return json_response(created, 201)


@described(
    "List the agents",
    keys=ADMIN_ONLY,
    query=AgentListingInput,
    answers={200: answers.AgentPage},
    description=(
        "Agents by handle with their open events, live sessions and last activity, a page at a"
        " time: next is the cursor of the page after (null: this is the last)."
    ),
)
async def list_agents(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    asked = parse(AgentListingInput, dict(request.query_params))
    found = await hub.overview.agents(
        after=asked.cursor, search=asked.search, limit=asked.limit + 1
    )  # one more tells whether a page follows
    page = found[: asked.limit]
    more = len(found) > asked.limit
    listed: answers.AgentPage = {
        "agents": [each.to_json() for each in page],
        "next": page[-1].agent.handle if more else None,
    }
    return json_response(listed)


@described("Read an agent", keys=ADMIN_ONLY, answers={200: answers.AgentDetail}, errors=(404,))
async def get_agent(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    agent = await hub.agent_by_id_or_handle(request.path_params["agent_id"])
    summaries = await hub.overview.agents(agent.id)
    if not summaries:  # deleted since it was read
        raise NotFound(f"no agent has the id {agent.id!r}")
    limits = await hub.loop_limits_of(agent)
    detail: answers.AgentDetail = {**summaries[0].to_json(), "loop_guard": limits.to_json()}
    return json_response(detail)


@described("Delete an agent and its events", keys=ADMIN_ONLY, answers={204: None}, errors=(404,))
async def delete_agent(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    agent = await hub.agent_by_id_or_handle(request.path_params["agent_id"])
    await hub.delete_agent(agent.id)
    return Response(status_code=204)


@described(
    "Replace an agent's delivery overrides, preferences or loop guard limits",
    keys=ADMIN_ONLY,
    body=DeliveryInput,
    answers={200: answers.AgentUpdated},
    errors=(404,),
)
async def set_delivery(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    body = parse(DeliveryInput, await read_json(request))
    if body.delivery is None and body.preferences is None and body.loop_guard is None:
        raise InvalidInput("agent: send delivery, preferences, loop_guard or several of them")
    named = await hub.agent_by_id_or_handle(request.path_params["agent_id"])
    agent = named
    if body.delivery is not None:
        agent = await hub.set_delivery(named.id, body.delivery.model_dump(exclude_unset=True))
    if body.preferences is not None:
        preferences = body.preferences.model_dump(exclude_unset=True)
        agent = await hub.preferences.put(named.id, preferences)
    answer = cast("answers.AgentUpdated", agent.to_json())
    if body.loop_guard is not None:
        limits = body.loop_guard
        answer["loop_guard"] = (
            await hub.set_loop_limits(agent, limits.exchanges, limits.window_s, limits.per_minute)
        ).to_json()
    return json_response(answer)


@described(
    "List an agent's live sessions",
    keys=ADMIN_ONLY,
    answers={200: answers.Sessions},
    errors=(404,),
    description="Its sessions live in any process sharing the store, with what each can take.",
)
async def agent_sessions(request: Request) -> Response:
    hub, notifier = services(request).hub, services(request).notifier
    await require_admin(hub, request)
    agent = await hub.agent_by_id_or_handle(request.path_params["agent_id"])
    sessions = await notifier.presence.live(agent.id)
    listed: answers.Sessions = {"sessions": [session.to_json() for session in sessions]}
    return json_response(listed)


@described(
    "Give an agent a new key",
    keys=ADMIN_ONLY,
    body=KeyRotationInput,
    body_required=False,
    answers={200: answers.RotatedKey},
    errors=(404,),
    description="The old key keeps working for grace_s (by default it stops at once).",
)
async def rotate_key(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    body = parse(KeyRotationInput, await read_json(request, if_empty={}))
    agent, key, until = await hub.rotate_agent_key(
        request.path_params["id_or_handle"], body.grace_s
    )
    previous_valid_until = iso_ms(until) if until is not None else None
    rotated: answers.RotatedKey = {
        **agent.to_json(),
        "api_key": key,
        "previous_valid_until": previous_valid_until,
    }
    return json_response(rotated)


ROUTES = [
    Route("/v1/agents", create_agent, methods=["POST"]),
    Route("/v1/agents", list_agents, methods=["GET"]),
    Route("/v1/agents/{agent_id}", get_agent, methods=["GET"]),
    Route("/v1/agents/{agent_id}", delete_agent, methods=["DELETE"]),
    Route("/v1/agents/{agent_id}", set_delivery, methods=["PATCH"]),
    Route("/v1/agents/{agent_id}/sessions", agent_sessions, methods=["GET"]),
    Route("/v1/agents/{id_or_handle}/rotate-key", rotate_key, methods=["POST"]),
]
