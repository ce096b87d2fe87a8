"""``GET /metrics``: the hub's metrics in Prometheus text format (``herald.metrics``), for the
admin key, the metrics token, or anyone when left open; and the route templates every HTTP
request is counted by (``herald.http.middleware`` counts them)."""

from __future__ import annotations

import asyncio
import logging

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald.errors import StoreUnavailable
from herald.http.auth import require_metrics_reader
from herald.http.described import Answer, described
from herald.http.services import services
from herald.hub import Hub
from herald.overview import Gauges

log = logging.getLogger("herald.http")

ROUTE_TEMPLATE = "herald.route"
"""The scope key of the template of the route that took a request (set by its endpoint,
``http.app.Handler``): Starlette puts no documented name of the route it matched there."""
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
