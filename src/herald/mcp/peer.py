"""The push side of an MCP session, for the delivery engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.session import ServerSession

from herald.capabilities import LEGACY_VERSIONS
from herald.delivery.base import EVERY_PUSH_PATH, NO_PUSH_PATH, FormAnswer


def connection_of(session: ServerSession) -> Connection:
    # The SDK exposes the connection (its session id, its exit stack, its best-effort notify)
    # only through this attribute; a session captured at `initialized` keeps it valid.
    return session._connection


def session_id_of(session: ServerSession) -> str:
    """The id the notifier knows the session by: its MCP session id, or one for its connection
    (stdio has none)."""
    connection = connection_of(session)
    return connection.session_id or f"conn-{id(connection):x}"


def push_paths_for(protocol_version: str) -> frozenset[str]:
    """What an MCP session of this protocol version lets the server send unasked: anything in
    the 2025 era (notifications, and requests such as a form); nothing on 2026-07-28, whose
    server only answers. A push path of that era (``subscriptions/listen``, MCP Events) would be
    a peer of its own."""
    return EVERY_PUSH_PATH if protocol_version in LEGACY_VERSIONS else NO_PUSH_PATH


class SessionPeer:
    """Pushes through one MCP connection. ``ready`` says whether a push can reach the client
    now (over streamable HTTP: whether its GET stream is open); the push paths follow from the
    session's protocol version."""

    def __init__(self, session: ServerSession, ready: Callable[[], bool] = lambda: True) -> None:
        self._session = session
        self._connection = connection_of(session)
        self._ready = ready
        self.push_paths = push_paths_for(session.protocol_version)

    def ready(self) -> bool:
        return self._ready()

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self._connection.notify(method, params)

    async def elicit(self, message: str, schema: dict[str, Any], timeout_s: float) -> FormAnswer:
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
        )
        result = await self._session.send_request(
            request, types.ElicitResult, request_read_timeout_seconds=timeout_s
        )
        content = dict(result.content) if result.content is not None else None
        return FormAnswer(result.action, content)
