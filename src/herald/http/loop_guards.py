"""The admin's view of the loop guards that tripped: the messages between agents they refused,
newest first, and how many in the last day (what the console's overview and its loop guard
page show; the feed shows each trip as it happens)."""

from __future__ import annotations

from typing import cast

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald import answers
from herald.http.auth import require_admin
from herald.http.described import ADMIN_ONLY, described
from herald.http.io import json_response
from herald.http.services import services
from herald.inputs.listing import TripListingInput
from herald.inputs.refusals import parse


@described(
    "List the loop guards that tripped",
    keys=ADMIN_ONLY,
    query=TripListingInput,
    answers={200: answers.LoopGuardTrips},
    description=(
        "The messages between agents that loop guards refused, newest first, as the feed's"
        " loop_guard items show them (kept as long as events are), and how many in the last"
        " 24 hours."
    ),
)
async def loop_guard_trips(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    asked = parse(TripListingInput, dict(request.query_params))
    last_day, trips = await hub.overview.loop_guard_trips(asked.limit)
    listed: answers.LoopGuardTrips = {
        "trips": cast("list[answers.LoopGuardTrip]", trips),
        "last_day": last_day,
    }
    return json_response(listed)


ROUTES = [Route("/v1/loop-guards", loop_guard_trips, methods=["GET"])]
