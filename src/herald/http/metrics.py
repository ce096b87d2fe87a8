"""``GET /metrics``: the hub's metrics in Prometheus text format (``herald.metrics``), for the
admin key, the metrics token, or anyone when left open; and the middleware that counts every
HTTP request by its route's template."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herald.errors import StoreUnavailable
from herald.http.auth import require_metrics_reader
from herald.http.described import Answer, described
from herald.http.services import services
from herald.hub import Hub
from herald.metrics import Metrics
from herald.overview import Gauges

log = logging.getLogger("herald.http")

UNMATCHED = "unmatched"
"""The route label of a request no route took: a raw path would be a label per path."""
STORE_READ_S = 2.0
"""How long a scrape waits for the store's gauges before it answers without them."""


@described(
    "Prometheus metrics",
    keys=("admin", "metrics"),
    answers={
        200: Answer(
            "The metrics in Prometheus text format (OpenMetrics when the Accept header asks).",
            {"text/plain": str, "application/openmetrics-text": str},
        )
    },
    uses_store=False,  # without the store, it answers the process's own counts
    description=(
        "The admin key or the metrics token (herald serve --metrics-token); no key at all when"
        " herald serve --metrics-open."
    ),
)
async def metrics(request: Request) -> Response:
    found = services(request)
    hub = found.hub
    if not found.metrics_access.open:
        await require_metrics_reader(hub, request, found.metrics_access.token_hash)
    reading = await _store_gauges(hub)
    # No await from here to the rendering: the reading shown is this one.
    hub.metrics.store_gauges.show(reading)
    body, content_type = hub.metrics.render(request.headers.get("accept", ""))
    return Response(body, headers={"content-type": content_type, "cache-control": "no-store"})


async def _store_gauges(hub: Hub) -> Gauges | None:
    """The store's gauges; None when it does not answer in time: the process's own counts are
    answered all the same, since they tell most about an outage (``herald_store_up`` 0)."""
    try:
        async with asyncio.timeout(STORE_READ_S):
            return await hub.overview.gauges()
    except (StoreUnavailable, TimeoutError) as exc:
        log.warning("metrics without the store's gauges: %s", exc)
        return None


ROUTES = [Route("/metrics", metrics, methods=["GET"])]


def route_templates(routes: Iterable[BaseRoute]) -> dict[Any, str]:
    """Each route's path template by its endpoint, which the router puts in the request's scope:
    ``/v1/agents/{agent}/events``, never the path that was asked for."""
    return {route.endpoint: route.path for route in routes if isinstance(route, Route)}


class CountRequests:
    """ASGI middleware: each HTTP request answered is counted by method, route template and
    status class, and timed to its answer's status line (``Metrics.http_request``)."""

    def __init__(self, app: ASGIApp, metrics: Metrics, templates: Mapping[Any, str]) -> None:
        self.app = app
        self.metrics = metrics
        self.templates = templates

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        counted = False

        async def count(message: Message) -> None:
            nonlocal counted
            if not counted and message["type"] == "http.response.start":
                counted = True
                template = self.templates.get(scope.get("endpoint"), UNMATCHED)
                self.metrics.http_request(
                    scope["method"], template, message["status"], time.perf_counter() - started
                )
            await send(message)

        await self.app(scope, receive, count)
