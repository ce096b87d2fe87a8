"""herald's one ASGI middleware: everything done around each HTTP request, in one layer rather
than one layer each (every layer is a call and a wrapped ``send`` more per request).

Around each request, from the outside in:

- its connection (``herald.http.connections``), found by the scope's ``server`` and ``client``
  (``ConnectionGuard.serving``), is told when the request begins, whether its body was read to
  the end, and when its answer is sent; on a connection in the probes' reserve, a request other
  than a probe is answered 503 and the connection closed;
- behind a trusted proxy, its ``X-Forwarded-For`` and ``-Proto`` name the client and scheme
  (uvicorn's documented ``ProxyHeadersMiddleware``, applied here rather than by uvicorn: once
  the scope's ``client`` is rewritten, the connection could no longer be found by it);
- it is counted by method, route template and status class, timed to its answer's status line
  (``Metrics.http_request``);
- a refusal (a ``HeraldError``) is answered in herald's error shape;
- an error no handler expected is logged and answered with a 500 in herald's shape, and the
  connection stays open for the requests behind it (Starlette's last-resort handler raises again
  after its answer, and uvicorn then drops the connection); an error after the answer has begun
  cannot be answered: it is raised, and the connection, whose answer is cut short, closes;
- no key holds more than ``requests_per_key`` requests in flight (``herald.http.limits``);
- its body has deadlines (``herald.http.bodies``): past one, the answer is herald's 408;
- with origins to answer (``herald.http.cors``), a preflight from one is answered before the
  app, and every answer is marked for the origin that asked.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, cast

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from herald.errors import HeraldError
from herald.http.bodies import BodyDeadlines, body_refusal
from herald.http.connections import (
    ConnectionGuard,
    GuardedConnection,
    body_length,
    busy_refusal,
)
from herald.http.cors import Cors
from herald.http.io import error_response, herald_error
from herald.http.limits import KeyShares
from herald.http.metrics import ROUTE_TEMPLATE, UNMATCHED
from herald.metrics import Metrics

log = logging.getLogger("herald.http")

CONNECTION = "herald.connection"
"""The scope key of the request's connection, found before a proxy's headers rewrite the scope's
``client`` (None: not a guarded one)."""


class HeraldMiddleware:
    """The ASGI middleware of herald's app (see the module)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: Metrics,
        requests_per_key: int,
        body_idle_s: float,
        body_total_s: float,
        clock: Callable[[], float],
        cors: Cors | None = None,
        connections: ConnectionGuard | None = None,
        trusted_proxies: str | None = None,
    ) -> None:
        """``connections``: the guard of the server the app is served by, whose connections
        are told of their requests (None: the app is served otherwise, by a test's transport, say).
        ``trusted_proxies``: the addresses (comma-separated; networks and ``*`` too) whose
        ``X-Forwarded-For`` and ``-Proto`` name a request's client and scheme, as uvicorn's
        ``--forwarded-allow-ips`` (None: no proxy headers are read)."""
        self.app = app if cors is None else cors.around(app)
        self.cors = cors
        self.connections = connections
        # uvicorn types the ASGI messages of its middleware with its own TypedDicts, Starlette
        # with plain mappings: the same calls, told apart by the type checker alone.
        self.proxied: ASGIApp | None = (
            None
            if trusted_proxies is None
            else cast(
                ASGIApp,
                ProxyHeadersMiddleware(cast(Any, self._forwarded), trusted_hosts=trusted_proxies),
            )
        )
        self.metrics = metrics
        self.shares = KeyShares(requests_per_key)
        self.deadlines = BodyDeadlines(idle_s=body_idle_s, total_s=body_total_s, clock=clock)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Found by the scope's two ends, before the proxy's headers rewrite its client.
        connections = self.connections
        connection = None if connections is None else connections.serving(scope)
        if self.proxied is None:
            await self._serve(scope, receive, send, connection)
            return
        scope[CONNECTION] = connection
        await self.proxied(scope, receive, send)

    async def _forwarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A request whose client and scheme its proxy's headers named."""
        await self._serve(scope, receive, send, scope[CONNECTION])

    async def _serve(
        self, scope: Scope, receive: Receive, send: Send, connection: GuardedConnection | None
    ) -> None:
        exchange = _Exchange(self, scope, receive, send, connection)
        try:
            if connection is not None and connection.probes_only_refuses(scope["path"]):
                exchange.counted = True  # it never reaches the app: not counted
                await busy_refusal(scope, exchange.receive, exchange.to_connection)
            else:
                await exchange.run()
        finally:
            exchange.finished()


class _Exchange:
    """One request and its answer, as the middleware watches them."""

    __slots__ = (
        "_body", "_connection", "_length", "_middleware", "_receive", "_replaced",
        "_scope", "_send", "_started_at", "body_read", "counted", "started", "told",
    )  # fmt: skip

    def __init__(
        self,
        middleware: HeraldMiddleware,
        scope: Scope,
        receive: Receive,
        send: Send,
        connection: GuardedConnection | None,
    ) -> None:
        self._middleware = middleware
        self._scope = scope
        self._receive = receive
        self._send = send
        self._connection = connection
        self._started_at = time.perf_counter()
        if connection is not None:
            connection.request_began()
        length = self._length = body_length(scope)
        # A body that has come whole already cannot run out of time: it has no deadline.
        whole = connection is not None and connection.has_body_bytes(length)
        self._body = (
            None if length == 0 or whole else middleware.deadlines.of(self._watched_receive)
        )
        self._replaced = False
        self.body_read = length == 0
        self.counted = False
        self.started = False
        self.told = False

    async def run(self) -> None:
        """The app's answer, within the key's share of requests; an error no handler expected
        answered 500 while no answer has begun."""
        scope = self._scope
        release = self._middleware.shares.take(scope)
        if release is None:  # over the key's share: refused, its body unread
            refusal = self._middleware.shares.refusal(scope)
            await refusal(scope, self.receive, self.send)
            return
        try:
            await self._answer()
        except Exception:  # the last boundary of a request: log it, answer it, carry on
            if self.started:
                raise
            log.exception("unexpected error on %s %s", scope.get("method"), scope.get("path"))
            answer = error_response(
                "internal", "herald failed on this request; the error is logged", 500
            )
            await answer(scope, self.receive, self.to_connection)
        finally:
            release()

    async def _answer(self) -> None:
        """The app's answer; a refusal (``HeraldError``) it raised answered in herald's shape
        while no answer has begun."""
        scope = self._scope
        try:
            await self._middleware.app(scope, self.receive, self.send)
        except HeraldError as exc:
            if self.started:
                raise
            answer = await herald_error(Request(scope), exc)
            await answer(scope, self.receive, self.send)
        body = self._body
        if body is not None and body.late is not None and not self.started:
            await self.send({"type": "http.response.start", "status": 408})

    async def receive(self) -> Message:
        body = self._body
        if body is None:
            return await self._watched_receive()
        return await body.receive()

    async def _watched_receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.disconnect" or not message.get("more_body", False):
            self.body_read = True
        return message

    async def send(self, message: Message) -> None:
        """What the app sends: herald's 408 instead once the body ran out of time."""
        if self._replaced:
            return  # the rest of an answer the 408 replaced
        if message["type"] == "http.response.start":
            self.started = True
            body = self._body
            if body is not None:
                body.answered = True
                if body.late is not None:
                    self._replaced = True
                    for refusal in body_refusal(body.late):
                        await self.to_connection(refusal)
                    return
        await self.to_connection(message)

    async def to_connection(self, message: Message) -> None:
        """A message of the answer, counted and told to the connection, to the server."""
        cors = self._middleware.cors
        if cors is not None and message["type"] == "http.response.start":
            message = cors.mark(self._scope, message)
        if message["type"] == "http.response.start" and not self.counted:
            self.counted = True
            scope = self._scope
            template = scope.get(ROUTE_TEMPLATE, UNMATCHED)
            self._middleware.metrics.http_request(
                scope["method"], template, message["status"], time.perf_counter() - self._started_at
            )
        connection = self._connection
        if connection is None:
            await self._send(message)
            return
        message = connection.sending_answer(message, self.body_read, self._length)
        try:
            await self._send(message)
        finally:
            connection.sending = False
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            connection.write_held()  # a head whose body was never written (an answer to HEAD)
            connection.answering, self.told = False, True
            connection.answered(self.body_read, self._length)

    def finished(self) -> None:
        connection = self._connection
        if connection is not None and not self.told:  # no answer, or not whole: uvicorn ends it
            connection.write_held()
            connection.answering = False
            connection.answered(self.body_read, self._length)
