"""The ASGI application that ``herald serve`` runs: the routes of each resource (agents,
events, the channel, endpoints, event types, publisher keys, health), the streams (an agent's,
the admin's feed) and ``/mcp`` endpoints, the web console, the API's own description
(``/openapi.json``, ``/docs``), and what runs beside them for as long as the app does."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from starlette.datastructures import State
from starlette.requests import Request
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketClose

from herald.addresses import AddressGuard
from herald.config import DEFAULTS, EventsConfig, HttpConfig, MetricsConfig, SubscriptionConfig
from herald.delivery.engine import Notifier
from herald.delivery.fanout import Fanout
from herald.http import (
    agents,
    channel,
    console,
    endpoints,
    event_types,
    events,
    health,
    keys,
    loop_guards,
    metrics,
    openapi,
    reference,
    stats,
    stream_tokens,
    topics,
)
from herald.http.auth import MetricsAccess
from herald.http.connections import ConnectionGuard
from herald.http.cors import Cors
from herald.http.feed import FeedRoute
from herald.http.io import error_response
from herald.http.limits import KeyLimits, Limits
from herald.http.mcp import McpRoute
from herald.http.metrics import ROUTE_TEMPLATE
from herald.http.middleware import HeraldMiddleware
from herald.http.services import APP_SCOPE_KEY, Services
from herald.http.stream import StreamRoute
from herald.hub import Hub
from herald.inputs.events import CheckedBatches
from herald.tasks import running
from herald.webhooks.worker import WebhookWorker


def create_app(
    hub: Hub,
    *,
    notifier: Notifier | None = None,
    fanout: Fanout | None = None,
    webhooks: WebhookWorker | None = None,
    maintenance: bool = True,
    limits: KeyLimits | None = None,
    mcp_era: str = DEFAULTS.mcp.era,
    events_config: EventsConfig = DEFAULTS.events,
    subscriptions_config: SubscriptionConfig = DEFAULTS.subscriptions,
    metrics_config: MetricsConfig = DEFAULTS.metrics,
    http_config: HttpConfig = DEFAULTS.http,
    requests_per_key: int = 0,
    connections: ConnectionGuard | None = None,
    trusted_proxies: str | None = None,
) -> HeraldApp:
    """The HTTP API and the ``/mcp`` endpoint over an opened hub. With ``maintenance``, expiry
    and pruning run in the background for as long as the app does. ``limits`` are what each
    key may hold or do at once (the defaults of ``KeyLimits`` when not given); ``mcp_era`` is
    which era a client probing ``/mcp`` with ``server/discover`` gets (``McpConfig.era``);
    ``events_config`` the pace of MCP Events subscriptions; ``subscriptions_config`` the grants
    of their webhook subscriptions, served with the ``webhooks`` worker; ``metrics_config``
    who besides the admin may read ``GET /metrics``; ``http_config`` the deadlines of request
    bodies (read by ``hub.clock``); ``requests_per_key`` how many requests one key may have in
    flight at once (0: no limit; ``herald serve`` gives a share of its connections);
    ``connections`` the guard of the server that serves the app (``guarded_protocol``), whose
    connections are told of their requests; ``trusted_proxies`` the addresses whose
    ``X-Forwarded-For`` and ``-Proto`` name a request's client and scheme (None: none), for a
    server run without uvicorn's own proxy headers (they would hide a request's connection
    from ``connections``)."""
    notifier = notifier or Notifier(hub)
    per_key = Limits(limits)
    fanout = fanout or Fanout(hub)
    mcp = McpRoute(
        notifier,
        sessions_per_key=per_key.config.sessions,
        publish_check=per_key.publish.take,
        era=mcp_era,
        fanout=fanout,
        events_config=events_config,
        stream_slot=per_key.streams.acquire,
        poll_admit=per_key.polls.admit,
        webhooks=webhooks,
        subscriptions_config=subscriptions_config,
    )
    guard = webhooks.sender.guard if webhooks is not None else AddressGuard()

    @contextlib.asynccontextmanager
    async def lifespan(app: object) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(mcp.running())
            if maintenance:
                await stack.enter_async_context(hub.maintenance())
                await stack.enter_async_context(hub.schedules())
            if webhooks is not None:
                await stack.enter_async_context(running(webhooks.run(), "herald-webhooks"))
            try:
                yield
            finally:
                await fanout.close()
                await notifier.close()

    routes = [
        *health.ROUTES,
        *agents.ROUTES,
        *events.ROUTES,
        *channel.ROUTES,
        *stream_tokens.ROUTES,
        Route("/channel/stream", StreamRoute(hub, fanout, per_key.streams), methods=["GET"]),
        Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]),
        Route("/v1/stream", FeedRoute(hub), methods=["GET"]),
        *endpoints.ROUTES,
        *event_types.ROUTES,
        *topics.ROUTES,
        *stats.ROUTES,
        *loop_guards.ROUTES,
        *keys.ROUTES,
        *metrics.ROUTES,
        *console.ROUTES,
        *openapi.ROUTES,
        *reference.ROUTES,
    ]
    router = Router(routes=by_path(routes), default=no_route, lifespan=lifespan)
    app = HeraldApp(
        router,
        routes,
        HeraldMiddleware(
            router,
            metrics=hub.metrics,
            requests_per_key=requests_per_key,
            body_idle_s=http_config.body_idle_timeout_s,
            body_total_s=http_config.body_timeout_s,
            clock=hub.clock,
            cors=Cors(http_config.cors_origins) if http_config.cors_origins else None,
            connections=connections,
            trusted_proxies=trusted_proxies,
        ),
    )
    app.state.services = Services(
        hub, notifier, per_key, guard, MetricsAccess.of(metrics_config), CheckedBatches()
    )
    return app


class HeraldApp:
    """herald's ASGI app: its routes (a Starlette ``Router``, which runs the lifespan too) in
    herald's one middleware, which answers every error in herald's shape. (Starlette's own app
    class would put two layers of its own around each request, a last-resort 500 and its
    exception handlers, for what that middleware does already.) Like it, it has a ``state``, its
    ``router`` and ``routes``; it puts itself in each request's scope under a key of its own
    (``services.serving_app`` finds it), not Starlette's ``app``. Its ``routes`` are those it
    was made of, each a path and its methods, as ``/openapi.json`` describes them; its router
    serves them one route per path (``by_path``)."""

    def __init__(self, router: Router, routes: Sequence[Route], serve: ASGIApp) -> None:
        self.router = router
        self.routes = routes
        self.state = State()
        self._serve = serve

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[APP_SCOPE_KEY] = self
        await self._serve(scope, receive, send)


def by_path(routes: Sequence[Route]) -> list[Route]:
    """One route per path, in the order the paths first come, whose endpoint (``Handler``)
    takes every method the routes of that path take (a method taken twice: the first route's).
    No two of herald's paths match one request, so this picks what Starlette's router would."""
    methods: dict[str, dict[str, Any]] = {}
    for route in routes:
        if route.methods is None:
            raise ValueError(f"the route {route.path} takes any method: name the ones it takes")
        endpoints = methods.setdefault(route.path, {})
        for method in route.methods:
            endpoints.setdefault(method, route.endpoint)
    return [Route(path, Handler(path, endpoints)) for path, endpoints in methods.items()]


class Handler:
    """A path's ASGI endpoint: it runs the endpoint of the request's method, a handler
    (``request -> response``) or an ASGI app, with the path's template named in the request's
    scope (``ROUTE_TEMPLATE``, for the request count); a method the path does not take is
    herald's 405, whose ``Allow`` names every method the path takes. (Starlette's router
    answers a method no route of a path takes with its own 405, in herald's shape only through
    an exception it raises when ``scope["app"]`` is set, which it does not document: so the
    route of a path takes every method, and this decides. And Starlette wraps a handler given
    as a function in a layer that looks for exception handlers; herald has none there, its
    middleware answers every error.)"""

    def __init__(self, template: str, endpoints: Mapping[str, Any]) -> None:
        self.template = template
        self.handlers = {
            method: endpoint
            for method, endpoint in endpoints.items()
            if inspect.iscoroutinefunction(endpoint)
        }
        self.apps = {
            method: endpoint
            for method, endpoint in endpoints.items()
            if method not in self.handlers
        }
        self.allow = ", ".join(sorted(endpoints))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        handler = self.handlers.get(method)
        if handler is not None:
            scope[ROUTE_TEMPLATE] = self.template
            response = await handler(Request(scope, receive, send))
            await response(scope, receive, send)
            return
        app = self.apps.get(method)
        if app is not None:
            scope[ROUTE_TEMPLATE] = self.template
            await app(scope, receive, send)
            return
        path = Request(scope).url.path
        refusal = error_response(
            "method_not_allowed", f"{method} is not allowed on {path}", 405, {"Allow": self.allow}
        )
        await refusal(scope, receive, send)


async def no_route(scope: Scope, receive: Receive, send: Send) -> None:
    """The router's answer when no route takes the path (its ``default``): herald's 404. (Its
    own answers in herald's shape only through an exception it raises when ``scope["app"]`` is
    set, which it does not document.)"""
    if scope["type"] != "http":  # a WebSocket: herald serves none
        await WebSocketClose()(scope, receive, send)
        return
    path = Request(scope).url.path
    answer = error_response("not_found", f"no route {path}; GET /docs describes every route", 404)
    await answer(scope, receive, send)
