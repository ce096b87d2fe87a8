"""The admin's routes for publisher keys: make one (the key is shown once), list them (never
the key), revoke one."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald.http.auth import require_admin
from herald.http.io import json_response, read_json
from herald.http.services import services
from herald.inputs.keys import NewPublisherKeyInput
from herald.inputs.refusals import parse


async def create_key(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    spec = parse(NewPublisherKeyInput, await read_json(request))
    created, key = await hub.publisher_keys.create(spec)
    return json_response({**created.to_json(), "key": key}, 201)


async def list_keys(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    return json_response({"keys": [key.to_json() for key in await hub.publisher_keys.list()]})


async def revoke_key(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    await hub.publisher_keys.revoke(request.path_params["key_id"])
    return Response(status_code=204)


ROUTES = [
    Route("/v1/keys", create_key, methods=["POST"]),
    Route("/v1/keys", list_keys, methods=["GET"]),
    Route("/v1/keys/{key_id}", revoke_key, methods=["DELETE"]),
]
