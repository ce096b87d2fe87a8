"""Publishing events (one, or a batch of up to 1,000) and reading one back with its attempts
and replies."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald.http.auth import admin_or_agent, require_admin
from herald.http.io import json_response, read_json
from herald.http.limits import ADMIN
from herald.http.services import services
from herald.inputs.events import parse_batch, parse_new_event


async def publish(request: Request) -> Response:
    hub, limits = services(request).hub, services(request).limits
    await require_admin(hub, request)
    body = await read_json(request)
    if isinstance(body, list):
        batch = parse_batch(body)
        limits.publish.take(ADMIN, len(batch))
        results = await hub.publish_many(batch)
        status = 202 if any(r.created for r in results) else 200
        return json_response(
            {"events": [_receipt(r.event.id, r.event.seq, r.created) for r in results]}, status
        )
    event = parse_new_event(body)
    limits.publish.take(ADMIN, 1)
    (published,) = await hub.publish_many([event])
    receipt = _receipt(published.event.id, published.event.seq, published.created)
    return json_response(receipt, 202 if published.created else 200)


async def get_event(request: Request) -> Response:
    hub = services(request).hub
    viewer = await admin_or_agent(hub, request)
    event, attempts = await hub.get_event(request.path_params["event_id"], viewer=viewer)
    replies = await hub.replies(event.id)
    return json_response(
        {
            **event.to_json(),
            "attempts": [a.to_json() for a in attempts],
            "replies": [r.to_json() for r in replies],
        }
    )


def _receipt(event_id: str, seq: int, created: bool) -> dict[str, Any]:
    return {"id": event_id, "seq": seq, "duplicate": not created}


ROUTES = [
    Route("/v1/events", publish, methods=["POST"]),
    Route("/v1/events/{event_id}", get_event, methods=["GET"]),
]
