"""The admin's routes for publisher keys: make one (the key is shown once), list them (never
the key), revoke one."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald import answers
from herald.http.auth import require_admin
from herald.http.described import ADMIN_ONLY, described
from herald.http.io import json_response, read_json
from herald.http.services import services
from herald.inputs.keys import NewPublisherKeyInput
from herald.inputs.refusals import parse


@described(
    "Make a publisher key",
    keys=ADMIN_ONLY,
    body=NewPublisherKeyInput,
    answers={201: answers.CreatedPublisherKey},
    description="The key is in the answer, and shown only there.",
)
async def create_key(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    spec = parse(NewPublisherKeyInput, await read_json(request))
    created, key = await hub.publisher_keys.create(spec)
    answer: answers.CreatedPublisherKey = {**created.to_json(), "key": key}
    return json_response(answer, 201)


@described("List the publisher keys", keys=ADMIN_ONLY, answers={200: answers.PublisherKeys})
async def list_keys(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    listed: answers.PublisherKeys = {
        "keys": [key.to_json() for key in await hub.publisher_keys.list()]
    }
    return json_response(listed)


@described("Revoke a publisher key", keys=ADMIN_ONLY, answers={204: None}, errors=(404,))
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
