"""The ceiling for the MCP figures: the bare ``mcp`` SDK pushing notifications, without herald.

The same stack as ``herald serve``'s ``/mcp`` endpoint (uvicorn with uvloop and httptools,
Starlette, the SDK's ``StreamableHTTPSessionManager`` in front of a low-level ``Server``), and
nothing else: no store, no agents, no keys, no delivery engine. Each session's connection is
captured at ``notifications/initialized`` (as herald does), and a plain route beside ``/mcp``
pushes on request:

    POST /push  {"session": "<Mcp-Session-Id>", "params": {...}}   (or a JSON array of them)

sends ``notifications/claude/channel`` with those params on that session's GET stream, each
awaited in turn, and answers 202 once all were handed to the SDK (``{"sent": n}``; 404 if a
session is unknown). Run it as a script (the harness does, in a subprocess, like herald):

    python benchmarks/mcp_baseline.py --host 127.0.0.1 --port 0

It prints ``mcp-baseline: listening on http://HOST:PORT`` once it accepts connections, and stops
on SIGINT. It binds where it is told; the harness only ever tells it 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import uvicorn
import uvloop
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

CHANNEL_METHOD = "notifications/claude/channel"
IDLE_TIMEOUT_S = 900.0


def create_app() -> Starlette:
    server: Server[Any] = Server("mcp-baseline", version="0")
    connections: dict[str, Connection] = {}

    async def on_initialized(
        ctx: ServerRequestContext[Any], params: types.NotificationParams
    ) -> None:
        # The same private attribute herald's SessionPeer reads: the SDK exposes a session's
        # connection (its id, its exit stack, its notify) only there.
        connection: Connection = ctx.session._connection
        session_id = connection.session_id
        if session_id is None:
            return
        connections[session_id] = connection

        async def forget() -> None:
            connections.pop(session_id, None)

        connection.exit_stack.push_async_callback(forget)

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
            connection = connections.get(item["session"])
            if connection is None:
                return JSONResponse({"error": "unknown session", "sent": sent}, 404)
            await connection.notify(CHANNEL_METHOD, item["params"])
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


async def serve(host: str, port: int) -> None:
    sock = socket.create_server((host, port), reuse_port=False)
    config = uvicorn.Config(
        create_app(), log_level="warning", access_log=False, timeout_graceful_shutdown=5
    )
    print(f"mcp-baseline: listening on http://{host}:{sock.getsockname()[1]}", flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser(description="The bare-SDK MCP push server of the benchmarks.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with (
        contextlib.suppress(KeyboardInterrupt),
        asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
    ):
        runner.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
