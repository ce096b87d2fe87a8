"""The admin's routes for the event-type catalogue: declare a type (with the JSON Schema its
events' data must be valid against), list them, read one, forget one."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald import answers
from herald.http.auth import require_admin
from herald.http.described import ADMIN_ONLY, JSON, Answer, described
from herald.http.io import json_response, read_json
from herald.http.services import services
from herald.inputs.event_types import EventTypeInput
from herald.inputs.refusals import parse


@described(
    "Declare an event type",
    keys=ADMIN_ONLY,
    body=EventTypeInput,
    answers={
        201: answers.EventType,
        200: Answer("The type was declared before: this replaced it.", {JSON: answers.EventType}),
    },
    description=(
        "What its events mean, and optionally the JSON Schema their data must be valid"
        " against, checked as they are published."
    ),
)
async def put_event_type(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    body = parse(EventTypeInput, await read_json(request))
    declared, created = await hub.event_types.put(
        request.path_params["name"], body.description, body.payload_schema
    )
    return json_response(declared.to_json(), 201 if created else 200)


@described("List the event types", keys=ADMIN_ONLY, answers={200: answers.EventTypes})
async def list_event_types(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    declared = await hub.event_types.list()
    listed: answers.EventTypes = {"event_types": [each.to_json() for each in declared]}
    return json_response(listed)


@described("Read an event type", keys=ADMIN_ONLY, answers={200: answers.EventType}, errors=(404,))
async def get_event_type(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    return json_response((await hub.event_types.get(request.path_params["name"])).to_json())


@described("Forget an event type", keys=ADMIN_ONLY, answers={204: None}, errors=(404,))
async def delete_event_type(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    await hub.event_types.delete(request.path_params["name"])
    return Response(status_code=204)


ROUTES = [
    Route("/v1/event-types", list_event_types, methods=["GET"]),
    Route("/v1/event-types/{name}", put_event_type, methods=["PUT"]),
    Route("/v1/event-types/{name}", get_event_type, methods=["GET"]),
    Route("/v1/event-types/{name}", delete_event_type, methods=["DELETE"]),
]
