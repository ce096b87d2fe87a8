"""The push side of an MCP session, for the delivery engine, and which session a request
belongs to.

The ``mcp`` SDK keeps each client connection (its session id, its end, its standalone stream) in
a ``Connection`` that a low-level handler cannot reach: ``ServerRequestContext`` carries no
``connection`` (python-sdk#2928 documents ``ctx.connection.exit_stack`` for it, which does not
exist yet). So herald tells sessions apart by what is public: over streamable HTTP by the
``Mcp-Session-Id`` header of the request, and on a connection ``HeraldServer.run`` serves
(stdio, in memory) by the ``ServedConnection`` that each of its messages carries. On a
connection of a plain ``Server`` on another transport, a request cannot be told to be of its
session: each is a session of its own. A push goes through ``ServerSession.send_notification``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from starlette.requests import Request

from herald.capabilities import LEGACY_VERSIONS
from herald.delivery.base import EVERY_PUSH_PATH, NO_PUSH_PATH, FormAnswer

log = logging.getLogger("herald.mcp")

SESSION_ID_HEADER = "mcp-session-id"


class ServedConnection:
    """One connection ``HeraldServer.run`` serves (stdio, in memory), by an id of its own. Each
    message read from it carries it, as the transport's request context (``ctx.request``),
    which the SDK hands to every handler."""

    def __init__(self) -> None:
        self.id = f"conn-{uuid.uuid4().hex[:16]}"

    def mark(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        """The message read, carrying this connection (one that carries a server context of its
        own, as from an HTTP transport, is left as it is; a client's metadata means nothing to
        the server)."""
        if isinstance(item, SessionMessage) and not isinstance(
            item.metadata, ServerMessageMetadata
        ):
            return SessionMessage(item.message, ServerMessageMetadata(request_context=self))
        return item


def served_connection(ctx: ServerRequestContext[Any]) -> ServedConnection | None:
    """The connection a request came on, if ``HeraldServer.run`` serves it."""
    return ctx.request if isinstance(ctx.request, ServedConnection) else None


def http_session_id(ctx: ServerRequestContext[Any]) -> str | None:
    """The ``Mcp-Session-Id`` of a streamable-HTTP request (None: not HTTP, or no session)."""
    request = ctx.request
    return request.headers.get(SESSION_ID_HEADER) if isinstance(request, Request) else None


def session_id_of(ctx: ServerRequestContext[Any]) -> str:
    """The id the notifier knows the request's session by: its MCP session id over streamable
    HTTP, its connection's on a connection ``HeraldServer.run`` serves, else one of this request
    alone (a 2026-07-28 request has no session)."""
    session_id = http_session_id(ctx)
    if session_id:
        return session_id
    connection = served_connection(ctx)
    return connection.id if connection is not None else f"req-{uuid.uuid4().hex[:16]}"


def push_paths_for(protocol_version: str) -> frozenset[str]:
    """What an MCP session of this protocol version lets the server send unasked: anything in
    the 2025 era (notifications, and requests such as a form); nothing on 2026-07-28, whose
    server only answers. A push path of that era (``subscriptions/listen``, MCP Events) would be
    a peer of its own."""
    return EVERY_PUSH_PATH if protocol_version in LEGACY_VERSIONS else NO_PUSH_PATH


class Notification(types.Notification[dict[str, Any], str]):
    """A notification of any method: herald's own (``notifications/claude/channel``...) and the
    Events extension's have no model in the SDK, which sends any subclass of its base."""


async def send_notification(session: ServerSession, method: str, params: dict[str, Any]) -> None:
    """Send a notification on the session's standalone stream, best effort: one that cannot be
    sent (the stream is closed, the session ended) is dropped, as MCP's notifications may be."""
    notification = Notification(method=method, params=params)
    try:
        await session.send_notification(notification)  # type: ignore[arg-type]  # any is sent
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        log.debug("dropped %s: the session's stream is closed", method)


class SessionPeer:
    """Pushes through one MCP session (``session``: its ``ServerSession`` at ``initialized``,
    whose standalone stream lasts as long as the session). ``ready`` says whether a push can
    reach the client now (over streamable HTTP: whether its GET stream is open); the push paths
    follow from the session's protocol version."""

    def __init__(self, session: ServerSession, ready: Callable[[], bool] = lambda: True) -> None:
        self._session = session
        self._ready = ready
        self.push_paths = push_paths_for(session.protocol_version)

    def ready(self) -> bool:
        return self._ready()

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await send_notification(self._session, method, params)

    async def elicit(self, message: str, schema: dict[str, Any], timeout_s: float) -> FormAnswer:
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
        )
        result = await self._session.send_request(
            request, types.ElicitResult, request_read_timeout_seconds=timeout_s
        )
        content = dict(result.content) if result.content is not None else None
        return FormAnswer(result.action, content)
