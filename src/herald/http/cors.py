"""CORS (``herald serve --cors-origin``): which web pages may call the API.

A preflight (``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``) from a listed
origin is answered 204 with what herald takes; from any other it is refused, in herald's error
shape. Every answer to a request from a listed origin carries ``Access-Control-Allow-Origin``;
an answer to any request that names an origin carries ``Vary: Origin``, for caches. Requests
that name no origin, and every request when no origin is listed, are left as they are.

Done in herald's one middleware (``http/middleware.py``), not by Starlette's
``CORSMiddleware``: inside herald's middleware that layer would not see the answers the
middleware makes itself (every refusal, a 500, a 408, a busy connection's 503), so a page could
not read why it was refused; outside it, a preflight would be answered past the connection guard
and the request counts. Its refusals are plain text, too, not herald's error shape.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herald.errors import Forbidden

METHODS = "GET, POST, PUT, PATCH, DELETE"
"""Every method a route of herald takes."""
HEADERS = "Authorization, Content-Type, Last-Event-ID, Mcp-Session-Id, Mcp-Protocol-Version"
"""What a page may send: a key, a JSON body, a stream's resume point, an MCP session's
headers."""
EXPOSED = b"Retry-After, WWW-Authenticate, Mcp-Session-Id"
"""Which of herald's answer headers a page may read, beyond those every page may: when to try
again, why a key was refused, the MCP session."""
MAX_AGE_S = 600
"""How long a browser may keep a preflight's answer: a change of ``--cors-origin`` reaches the
pages within it."""


class Cors:
    """The origins whose pages may call the API (as browsers write them: ``herald.origins``)."""

    def __init__(self, origins: Iterable[str]) -> None:
        self.origins = frozenset(origin.encode() for origin in origins)
        self._preflight = Response(
            status_code=204,
            headers={
                "Access-Control-Allow-Methods": METHODS,
                "Access-Control-Allow-Headers": HEADERS,
                "Access-Control-Max-Age": str(MAX_AGE_S),
            },
        )

    def around(self, app: ASGIApp) -> ASGIApp:
        """``app``, with preflights answered before it (a refused one raises ``Forbidden``,
        for the middleware to answer in herald's shape)."""

        async def answer(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and self.is_preflight(scope):
                await self._preflight(scope, receive, send)
            else:
                await app(scope, receive, send)

        return answer

    def is_preflight(self, scope: Scope) -> bool:
        """Whether the request is a preflight from a listed origin.

        Raises:
            Forbidden: a preflight from an origin not listed.
        """
        if scope["method"] != "OPTIONS":
            return False
        origin = _header(scope, b"origin")
        if origin is None or _header(scope, b"access-control-request-method") is None:
            return False
        if origin not in self.origins:
            shown = origin.decode("latin-1")
            raise Forbidden(
                f"pages of the origin {shown!r} may not call this herald: its operator lets an"
                f" origin's pages in with herald serve --cors-origin {shown}"
            )
        return True

    def mark(self, scope: Scope, start: Message) -> Message:
        """The ``http.response.start`` message of an answer, with what CORS says of it."""
        origin = _header(scope, b"origin")
        if origin is None:
            return start
        added = [(b"vary", b"Origin")]
        if origin in self.origins:
            added += [
                (b"access-control-allow-origin", origin),
                (b"access-control-expose-headers", EXPOSED),
            ]
        return {**start, "headers": [*start.get("headers", ()), *added]}


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None
