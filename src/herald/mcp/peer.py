"""The push side of an MCP session, for the delivery engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.session import ServerSession

from herald.delivery.base import FormAnswer


def connection_of(session: ServerSession) -> Connection:
    # The SDK exposes the connection (its session id, its exit stack, its best-effort notify)
    # only through this attribute; a session captured at `initialized` keeps it valid.
    return session._connection


def session_id_of(session: ServerSession) -> str:
    """The id the notifier knows the session by: its MCP session id, or one for its connection
    (stdio has none)."""
    connection = connection_of(session)
    return connection.session_id or f"conn-{id(connection):x}"


class SessionPeer:
    """Pushes through one MCP connection. ``ready`` says whether a push can reach the client
    now (over streamable HTTP: whether its GET stream is open)."""

    def __init__(self, session: ServerSession, ready: Callable[[], bool] = lambda: True) -> None:
        self._session = session
        self._connection = connection_of(session)
        self._ready = ready

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
