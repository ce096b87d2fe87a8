"""Is herald up, and can it reach its store."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import herald
from herald.http.io import json_response
from herald.http.services import services


async def healthz(request: Request) -> Response:
    return json_response({"status": "ok", "version": herald.__version__})


async def readyz(request: Request) -> Response:
    await services(request).hub.check_ready()
    return json_response({"status": "ready"})


ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
]
