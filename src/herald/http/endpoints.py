"""The admin's routes for an agent's webhook and OpenClaw target. Targets are checked where they
point as they are set (and again as they are called). An endpoint is shown with
``next_attempt_at``: when its earliest waiting delivery is due (null: none waits)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald import answers
from herald.http.auth import require_admin
from herald.http.described import ADMIN_ONLY, described
from herald.http.io import json_response, read_json
from herald.http.services import services
from herald.hub import Hub
from herald.inputs.agents import OpenClawInput, RotationInput, WebhookInput
from herald.inputs.listing import EndpointListingInput
from herald.inputs.refusals import parse
from herald.models import Endpoint, Kind
from herald.times import iso_ms
from herald.webhooks import manage


@described(
    "Set an agent's webhook",
    keys=ADMIN_ONLY,
    body=WebhookInput,
    answers={200: answers.SetWebhook},
    errors=(404,),
    description=(
        "Its signing secret is generated unless given, and shown only in this answer. The URL"
        " is checked where it points (refused if herald may not call it)."
    ),
)
async def put_webhook(request: Request) -> Response:
    hub, guard = services(request).hub, services(request).guard
    await require_admin(hub, request)
    body = parse(WebhookInput, await read_json(request))
    agent_id = (await hub.agent_by_id_or_handle(request.path_params["agent_id"])).id
    warning = await manage.admit(guard, body.url)
    endpoint, secret = await manage.set_webhook(hub, agent_id, body.url, body.secret)
    answer: answers.SetWebhook = {**endpoint.to_json(), "secret": secret, "warning": warning}
    return json_response(answer)


@described(
    "Give an agent's webhook a new signing secret",
    keys=ADMIN_ONLY,
    body=RotationInput,
    body_required=False,
    answers={200: answers.SignedEndpoint},
    errors=(404,),
    description="The old secret keeps signing beside the new one for grace_s (by default a day).",
)
async def rotate_secret(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    body = parse(RotationInput, await read_json(request, if_empty={}))
    agent = await hub.agent_by_id_or_handle(request.path_params["agent_id"])
    endpoint, secret = await manage.rotate_webhook_secret(hub, agent.id, body.grace_s, body.secret)
    answer: answers.SignedEndpoint = {**endpoint.to_json(), "secret": secret}
    return json_response(answer)


@described(
    "Set an agent's OpenClaw gateway",
    keys=ADMIN_ONLY,
    body=OpenClawInput,
    answers={200: answers.SetOpenClaw},
    errors=(404,),
)
async def put_openclaw(request: Request) -> Response:
    hub, guard = services(request).hub, services(request).guard
    await require_admin(hub, request)
    body = parse(OpenClawInput, await read_json(request))
    agent_id = (await hub.agent_by_id_or_handle(request.path_params["agent_id"])).id
    warning = await manage.admit(guard, body.url)
    endpoint = await manage.set_openclaw(hub, agent_id, body.url, body.token, body.mode)
    answer: answers.SetOpenClaw = {**endpoint.to_json(), "warning": warning}
    return json_response(answer)


@described("Remove an agent's webhook", keys=ADMIN_ONLY, answers={204: None}, errors=(404,))
async def remove_webhook(request: Request) -> Response:
    return await _remove(request, Kind.WEBHOOK)


@described(
    "Remove an agent's OpenClaw gateway", keys=ADMIN_ONLY, answers={204: None}, errors=(404,)
)
async def remove_openclaw(request: Request) -> Response:
    return await _remove(request, Kind.OPENCLAW)


async def _remove(request: Request, kind: Kind) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    agent = await hub.agent_by_id_or_handle(request.path_params["agent_id"])
    await manage.remove(hub, agent.id, kind)
    return Response(status_code=204)


@described(
    "List an agent's endpoints",
    keys=ADMIN_ONLY,
    answers={200: answers.Endpoints},
    errors=(404,),
    description="Its webhook and OpenClaw endpoints, with their state and last error.",
)
async def list_endpoints(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    agent = await hub.agent_by_id_or_handle(request.path_params["agent_id"])
    listed: answers.Endpoints = {
        "endpoints": await shown(hub, await hub.endpoints.of_agent(agent.id))
    }
    return json_response(listed)


@described(
    "List every agent's endpoints",
    keys=ADMIN_ONLY,
    query=EndpointListingInput,
    answers={200: answers.EndpointPage},
    description=(
        "Every agent's webhook and OpenClaw endpoints by id, a page at a time, each with its"
        " agent's handle: next is the cursor of the page after (null: this is the last)."
    ),
)
async def list_all_endpoints(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    asked = parse(EndpointListingInput, dict(request.query_params))
    found = await hub.endpoints.page(
        asked.cursor, asked.limit + 1, failing=asked.failing == "true"
    )  # one more tells whether a page follows
    page = found[: asked.limit]
    endpoints = await shown(hub, [endpoint for endpoint, _ in page])
    listed: answers.EndpointPage = {
        "endpoints": [
            {**answer, "agent_handle": handle}
            for answer, (_, handle) in zip(endpoints, page, strict=True)
        ],
        "next": page[-1][0].id if len(found) > asked.limit else None,
    }
    return json_response(listed)


@described(
    "Enable an endpoint",
    keys=ADMIN_ONLY,
    answers={200: answers.ShownEndpoint},
    errors=(404,),
    description="Bring a disabled webhook or OpenClaw endpoint back, its secret unchanged.",
)
async def enable(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    endpoint = await hub.endpoints.enable_by_admin(request.path_params["endpoint_id"])
    (answer,) = await shown(hub, [endpoint])
    return json_response(answer)


async def shown(hub: Hub, endpoints: list[Endpoint]) -> list[answers.ShownEndpoint]:
    """The endpoints' JSON, each with when its earliest waiting delivery is due."""
    due = await hub.endpoints.next_attempts([e.id for e in endpoints])
    return [
        {**e.to_json(), "next_attempt_at": iso_ms(due[e.id]) if e.id in due else None}
        for e in endpoints
    ]


ROUTES = [
    Route("/v1/agents/{agent_id}/webhook", put_webhook, methods=["PUT"]),
    Route("/v1/agents/{agent_id}/webhook/rotate", rotate_secret, methods=["POST"]),
    Route("/v1/agents/{agent_id}/openclaw", put_openclaw, methods=["PUT"]),
    Route("/v1/agents/{agent_id}/webhook", remove_webhook, methods=["DELETE"]),
    Route("/v1/agents/{agent_id}/openclaw", remove_openclaw, methods=["DELETE"]),
    Route("/v1/agents/{agent_id}/endpoints", list_endpoints, methods=["GET"]),
    Route("/v1/endpoints", list_all_endpoints, methods=["GET"]),
    Route("/v1/endpoints/{endpoint_id}/enable", enable, methods=["POST"]),
]
