"""The ceiling for the MCP figures: the bare ``mcp`` SDK pushing notifications, without herald.

The same stack as ``herald serve``'s ``/mcp`` endpoint (uvicorn with uvloop and httptools,
Starlette, the SDK's ``StreamableHTTPSessionManager`` in front of a low-level ``Server``), and
nothing else: no store, no agents, no keys, no delivery engine. Each session is captured at
``notifications/initialized``, by its ``Mcp-Session-Id`` and its ``ServerSession`` (as herald
does), and a plain route beside ``/mcp`` pushes on request:

    POST /push  {"session": "<Mcp-Session-Id>", "params": {...}}   (or a JSON array of them)

sends ``notifications/claude/channel`` with those params on that session's GET stream, each
awaited in turn, and answers 202 once all were handed to the SDK (``{"sent": n}``; 404 if a
session is unknown). Run it as a script (the harness does, in a subprocess, like herald):

    python benchmarks/mcp_baseline.py --host 127.0.0.1 --port 0

It prints ``mcp-baseline: listening on http://HOST:PORT`` once it accepts connections, and stops
on SIGINT. It binds where it is told; the harness only ever tells it 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from benchmarks.baseline_server import run

CHANNEL_METHOD = "notifications/claude/channel"


class Channel(types.Notification[dict[str, Any], str]):
    """A notification the SDK has no model for."""


IDLE_TIMEOUT_S = 900.0


def create_app() -> Starlette:
    server: Server[Any] = Server("mcp-baseline", version="0")
    sessions: dict[str, ServerSession] = {}

    async def on_initialized(
        ctx: ServerRequestContext[Any], params: types.NotificationParams
    ) -> None:
        session_id = ctx.request.headers.get("mcp-session-id") if ctx.request else None
        if session_id is None:
            return
        sessions[session_id] = ctx.session
        try:  # until the session ends, which cancels this handler (as herald does)
            await anyio.sleep_forever()
        finally:
            sessions.pop(session_id, None)

    server.add_notification_handler(
        "notifications/initialized", types.NotificationParams, on_initialized
    )
    manager = StreamableHTTPSessionManager(
        app=server,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        session_idle_timeout=IDLE_TIMEOUT_S,
    )

    async def push(request: Request) -> Response:
        body = json.loads(await request.body())
        items = body if isinstance(body, list) else [body]
        sent = 0
        for item in items:
            session = sessions.get(item["session"])
            if session is None:
                return JSONResponse({"error": "unknown session", "sent": sent}, 404)
            channel = Channel(method=CHANNEL_METHOD, params=item["params"])
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await session.send_notification(channel)  # type: ignore[arg-type]  # any is sent
            sent += 1
        return JSONResponse({"sent": sent}, 202)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    routes = [
        Route("/mcp", StreamableHTTPASGIApp(manager), methods=["GET", "POST", "DELETE"]),
        Route("/push", push, methods=["POST"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def main() -> None:
    run("mcp-baseline", "The bare-SDK MCP push server of the benchmarks.", create_app)


if __name__ == "__main__":
    main()
