"""The live MCP sessions on ``/mcp``, each with the key that opened it, as herald sees them open
and end around the SDK's session manager (``StreamableHTTPSessionManager.handle_request``).

The SDK has no hook for a session's opening or end, nor a limit per credential. So herald
counts them itself, from what passes through the ASGI call: a session opens when a request
without ``Mcp-Session-Id`` is answered below 400 with one; it ends when its DELETE is answered
below 300, when the SDK answers its key 404 for it (it forgot it, however it ended), or when it
has had no request in flight for the idle time the SDK was given (the SDK ends it then, as its
``session_idle_timeout`` says; herald's clock starts no sooner, so never ends one the SDK keeps).
"""

from __future__ import annotations

import asyncio
from collections import Counter

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herald.errors import RateLimited

SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"
SESSION_RETRY_AFTER_S = 60.0
"""A session slot frees up when one of the key's sessions ends (DELETE, or idle): no time can
be promised."""


class McpSessions:
    """The live sessions of each key (an agent id), at most ``per_key`` of them (0: no limit)."""

    def __init__(self, per_key: int, idle_timeout_s: float) -> None:
        self.per_key = per_key
        self.idle_timeout_s = idle_timeout_s
        self._owners: dict[str, str] = {}
        self._opening: Counter[str] = Counter()
        self._in_flight: Counter[str] = Counter()
        self._idle: dict[str, asyncio.TimerHandle] = {}

    def live(self, key: str) -> int:
        """The key's sessions, those being opened among them."""
        return self._opening[key] + sum(1 for owner in self._owners.values() if owner == key)

    async def serve(
        self, key: str, app: ASGIApp, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Pass a request of ``key`` to the SDK (``app``), counting the sessions it opens and ends.

        Raises:
            RateLimited: the request would open a session, and the key has as many as it may
                (raised before ``app`` is called).
        """
        headers = dict(scope["headers"])
        version = headers.get(VERSION_HEADER)
        if version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS:
            await app(scope, receive, send)  # 2026-07-28: no session, whatever the headers say
            return
        session_id = headers.get(SESSION_HEADER, b"").decode("latin-1")
        if session_id:
            await self._in_session(key, session_id, app, scope, receive, send)
        else:
            await self._opening_session(key, app, scope, receive, send)

    def end(self, session_id: str) -> None:
        """Forget a session (it ended)."""
        if self._owners.pop(session_id, None) is None:
            return
        timer = self._idle.pop(session_id, None)
        if timer is not None:
            timer.cancel()
        self._in_flight.pop(session_id, None)

    def end_all(self) -> None:
        for session_id in list(self._owners):
            self.end(session_id)

    async def _opening_session(
        self, key: str, app: ASGIApp, scope: Scope, receive: Receive, send: Send
    ) -> None:
        live = self.live(key) if self.per_key else 0
        if self.per_key and live >= self.per_key:
            raise RateLimited(
                f"this key has {live} live MCP sessions, the most it may (herald serve "
                "--sessions-per-key); end one with DELETE /mcp, or reuse one",
                SESSION_RETRY_AFTER_S,
            )
        self._opening[key] += 1  # counted at once: openings at the same time cannot pass together
        opened: str | None = None

        async def watch(message: Message) -> None:
            nonlocal opened
            if message["type"] == "http.response.start" and message["status"] < 400:
                given = dict(message.get("headers", [])).get(SESSION_HEADER)
                if given:
                    opened = given.decode("latin-1")
                    self._settle(key)
                    self._owners[opened] = key
                    self._in_flight[opened] += 1
            await send(message)

        try:
            await app(scope, receive, watch)
        finally:
            if opened is None:
                self._settle(key)
            else:
                self._done(opened)

    async def _in_session(
        self, key: str, session_id: str, app: ASGIApp, scope: Scope, receive: Receive, send: Send
    ) -> None:
        if self._owners.get(session_id) != key:  # another key's, or unknown: the SDK says 404
            await app(scope, receive, send)
            return
        self._busy(session_id)
        status: int | None = None

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await app(scope, receive, watch)
        finally:
            deleted = scope.get("method") == "DELETE" and status is not None and status < 300
            if status == 404 or deleted:
                self.end(session_id)
            else:
                self._done(session_id)

    def _settle(self, key: str) -> None:
        self._opening[key] -= 1
        if self._opening[key] <= 0:
            del self._opening[key]

    def _busy(self, session_id: str) -> None:
        timer = self._idle.pop(session_id, None)
        if timer is not None:
            timer.cancel()
        self._in_flight[session_id] += 1

    def _done(self, session_id: str) -> None:
        if session_id not in self._owners:
            return
        self._in_flight[session_id] -= 1
        if self._in_flight[session_id] <= 0:
            del self._in_flight[session_id]
            loop = asyncio.get_running_loop()
            self._idle[session_id] = loop.call_later(self.idle_timeout_s, self.end, session_id)
