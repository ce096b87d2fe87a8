"""Is herald up, and can it reach its store."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import herald
from herald import answers
from herald.http.described import NO_KEY, described
from herald.http.io import json_response
from herald.http.services import services


@described(
    "Liveness: the process answers", keys=NO_KEY, answers={200: answers.Health}, uses_store=False
)
async def healthz(request: Request) -> Response:
    answer: answers.Health = {"status": "ok", "version": herald.__version__}
    return json_response(answer)


@described(
    "Readiness: a read of the store succeeds",
    keys=NO_KEY,
    answers={200: answers.Ready},
    description="503 store_unavailable when a read of the store does not succeed within 3 s.",
)
async def readyz(request: Request) -> Response:
    await services(request).hub.check_ready()
    answer: answers.Ready = {"status": "ready"}
    return json_response(answer)


ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
]
