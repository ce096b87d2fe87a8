"""Admin routes for an agent's webhook and OpenClaw target."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald.http.auth import require_admin
from herald.http.io import json_response, read_json, strict_object
from herald.hub import Hub
from herald.models import Kind
from herald.webhooks import manage
from herald.webhooks.addresses import AddressGuard


def endpoint_routes(hub: Hub, guard: AddressGuard) -> list[Route]:
    """Args: guard: where targets may point, checked as they are set (and again as they are
    called)."""

    async def put_webhook(request: Request) -> Response:
        await require_admin(hub, request)
        body = strict_object(await read_json(request), {"url", "secret"}, "webhook")
        agent_id = request.path_params["agent_id"]
        await hub.get_agent(agent_id)
        warning = await manage.admit(guard, body.get("url"))
        endpoint, secret = await manage.set_webhook(
            hub, agent_id, body.get("url"), body.get("secret")
        )
        return json_response(with_warning({**endpoint.to_json(), "secret": secret}, warning))

    async def rotate(request: Request) -> Response:
        await require_admin(hub, request)
        body = strict_object(
            await read_json(request, optional=True) or {}, {"grace_s", "secret"}, "rotation"
        )
        endpoint, secret = await manage.rotate_webhook_secret(
            hub,
            request.path_params["agent_id"],
            body.get("grace_s", manage.DEFAULT_ROTATION_GRACE_S),
            body.get("secret"),
        )
        return json_response({**endpoint.to_json(), "secret": secret})

    async def put_openclaw(request: Request) -> Response:
        await require_admin(hub, request)
        body = strict_object(await read_json(request), {"url", "token", "mode"}, "openclaw")
        agent_id = request.path_params["agent_id"]
        await hub.get_agent(agent_id)
        warning = await manage.admit(guard, body.get("url"))
        endpoint = await manage.set_openclaw(
            hub, agent_id, body.get("url"), body.get("token"), body.get("mode", "wake")
        )
        return json_response(with_warning(endpoint.to_json(), warning))

    def remover(kind: Kind) -> Route:
        async def remove(request: Request) -> Response:
            await require_admin(hub, request)
            await manage.remove(hub, request.path_params["agent_id"], kind)
            return Response(status_code=204)

        return Route(f"/v1/agents/{{agent_id}}/{kind.value}", remove, methods=["DELETE"])

    async def list_endpoints(request: Request) -> Response:
        await require_admin(hub, request)
        agent = await hub.get_agent(request.path_params["agent_id"])
        return json_response(
            {"endpoints": [e.to_json() for e in await hub.endpoints.of_agent(agent.id)]}
        )

    return [
        Route("/v1/agents/{agent_id}/webhook", put_webhook, methods=["PUT"]),
        Route("/v1/agents/{agent_id}/webhook/rotate", rotate, methods=["POST"]),
        Route("/v1/agents/{agent_id}/openclaw", put_openclaw, methods=["PUT"]),
        remover(Kind.WEBHOOK),
        remover(Kind.OPENCLAW),
        Route("/v1/agents/{agent_id}/endpoints", list_endpoints, methods=["GET"]),
    ]


def with_warning(answer: dict[str, Any], warning: str | None) -> dict[str, Any]:
    """The answer, with a ``warning`` when there is one to give."""
    return {**answer, "warning": warning} if warning else answer
