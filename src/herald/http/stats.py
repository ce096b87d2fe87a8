"""The admin's counts of the whole herald: events by status, attempts by way and outcome, the
agents with the most open events, live sessions, endpoints by state."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald import answers
from herald.http.auth import require_admin
from herald.http.described import ADMIN_ONLY, described
from herald.http.io import json_response
from herald.http.services import services


@described(
    "Counts of the whole herald",
    keys=ADMIN_ONLY,
    answers={200: answers.Stats},
    description=(
        "Events by status, attempts by way and outcome, the agents with the most open events,"
        " live sessions, endpoints by state."
    ),
)
async def stats(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    return json_response((await hub.overview.stats()).to_json())


ROUTES = [Route("/v1/stats", stats, methods=["GET"])]
