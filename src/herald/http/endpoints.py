"""The admin's routes for an agent's webhook and OpenClaw target. Targets are checked where they
point as they are set (and again as they are called). An endpoint is shown with
``next_attempt_at``: when its earliest waiting delivery is due (null: none waits)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald.http.auth import require_admin
from herald.http.io import json_response, read_json
from herald.http.services import services
from herald.hub import Hub
from herald.inputs.agents import OpenClawInput, RotationInput, WebhookInput
from herald.inputs.listing import EndpointListingInput
from herald.inputs.refusals import parse
from herald.models import Endpoint, Kind
from herald.times import iso_ms
from herald.webhooks import manage


async def put_webhook(request: Request) -> Response:
    hub, guard = services(request).hub, services(request).guard
    await require_admin(hub, request)
    body = parse(WebhookInput, await read_json(request))
    agent_id = (await hub.agent_by_id_or_handle(request.path_params["agent_id"])).id
    warning = await manage.admit(guard, body.url)
    endpoint, secret = await manage.set_webhook(hub, agent_id, body.url, body.secret)
    return json_response(with_warning({**endpoint.to_json(), "secret": secret}, warning))


async def rotate_secret(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    body = parse(RotationInput, await read_json(request, if_empty={}))
    agent = await hub.agent_by_id_or_handle(request.path_params["agent_id"])
    endpoint, secret = await manage.rotate_webhook_secret(hub, agent.id, body.grace_s, body.secret)
    return json_response({**endpoint.to_json(), "secret": secret})


async def put_openclaw(request: Request) -> Response:
    hub, guard = services(request).hub, services(request).guard
    await require_admin(hub, request)
    body = parse(OpenClawInput, await read_json(request))
    agent_id = (await hub.agent_by_id_or_handle(request.path_params["agent_id"])).id
    warning = await manage.admit(guard, body.url)
    endpoint = await manage.set_openclaw(hub, agent_id, body.url, body.token, body.mode)
    return json_response(with_warning(endpoint.to_json(), warning))


async def remove_webhook(request: Request) -> Response:
    return await _remove(request, Kind.WEBHOOK)


async def remove_openclaw(request: Request) -> Response:
    return await _remove(request, Kind.OPENCLAW)


async def _remove(request: Request, kind: Kind) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    agent = await hub.agent_by_id_or_handle(request.path_params["agent_id"])
    await manage.remove(hub, agent.id, kind)
    return Response(status_code=204)


async def list_endpoints(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    agent = await hub.agent_by_id_or_handle(request.path_params["agent_id"])
    return json_response({"endpoints": await shown(hub, await hub.endpoints.of_agent(agent.id))})


async def list_all_endpoints(request: Request) -> Response:
    """Every agent's webhook and OpenClaw endpoints by id, a page at a time, each with its
    agent's handle: ``next`` is the cursor of the page after (null: this is the last)."""
    hub = services(request).hub
    await require_admin(hub, request)
    asked = parse(EndpointListingInput, dict(request.query_params))
    found = await hub.endpoints.page(
        asked.cursor, asked.limit + 1, failing=asked.failing == "true"
    )  # one more tells whether a page follows
    page = found[: asked.limit]
    answers = await shown(hub, [endpoint for endpoint, _ in page])
    return json_response(
        {
            "endpoints": [
                {**answer, "agent_handle": handle}
                for answer, (_, handle) in zip(answers, page, strict=True)
            ],
            "next": page[-1][0].id if len(found) > asked.limit else None,
        }
    )


async def enable(request: Request) -> Response:
    """Bring a disabled webhook or OpenClaw endpoint back, its secret unchanged."""
    hub = services(request).hub
    await require_admin(hub, request)
    endpoint = await hub.endpoints.enable_by_admin(request.path_params["endpoint_id"])
    (answer,) = await shown(hub, [endpoint])
    return json_response(answer)


async def shown(hub: Hub, endpoints: list[Endpoint]) -> list[dict[str, Any]]:
    """The endpoints' JSON, each with when its earliest waiting delivery is due."""
    due = await hub.endpoints.next_attempts([e.id for e in endpoints])
    return [
        {**e.to_json(), "next_attempt_at": iso_ms(due[e.id]) if e.id in due else None}
        for e in endpoints
    ]


def with_warning(answer: dict[str, Any], warning: str | None) -> dict[str, Any]:
    """The answer, with a ``warning`` when there is one to give."""
    return {**answer, "warning": warning} if warning else answer


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
