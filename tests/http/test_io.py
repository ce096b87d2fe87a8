"""herald's answers to errors nobody expected, on a real uvicorn server and a real keep-alive
connection."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald.http.io import json_response
from herald.http.middleware import HeraldMiddleware
from herald.metrics import Metrics

pytestmark = pytest.mark.anyio

STARTUP_TIMEOUT_S = 10.0


async def broken(request: Request) -> Response:
    raise RuntimeError("a deliberate failure")


async def fine(request: Request) -> Response:
    return json_response({"ok": True})


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[int]:
    """``app`` on uvicorn as ``herald serve`` runs it (its defaults), on a free port."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_level="critical")
    )
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(STARTUP_TIMEOUT_S):
            while not server.started:
                await asyncio.sleep(0.01)  # polling for the listening socket, bounded
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        await task


async def exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str
) -> tuple[int, dict[str, Any]]:
    """One request on an open connection; its status and JSON body."""
    writer.write(f"GET {path} HTTP/1.1\r\nhost: test\r\n\r\n".encode())
    await writer.drain()
    async with asyncio.timeout(10):
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        headers = dict(line.lower().split(": ", 1) for line in head[1:] if line)
        body = await reader.readexactly(int(headers["content-length"]))
    return int(head[0].split(" ")[1]), json.loads(body)


async def test_an_unexpected_error_is_a_500_in_heralds_shape_and_the_connection_stays_open(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = Starlette(
        routes=[Route("/broken", broken), Route("/fine", fine)],
        middleware=[
            Middleware(
                HeraldMiddleware,
                metrics=Metrics(),
                requests_per_key=0,
                body_idle_s=10.0,
                body_total_s=60.0,
                clock=time.monotonic,
            )
        ],
    )
    with caplog.at_level(logging.ERROR, logger="herald.http"):
        async with serving(app) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                status, body = await exchange(reader, writer, "/broken")
                assert status == 500
                assert body == {
                    "error": {
                        "code": "internal",
                        "message": "herald failed on this request; the error is logged",
                    }
                }
                # The same connection serves the request behind it.
                assert await exchange(reader, writer, "/fine") == (200, {"ok": True})
            finally:
                writer.close()
    (logged,) = [r for r in caplog.records if r.name == "herald.http"]
    assert "GET /broken" in logged.getMessage() and logged.exc_info is not None
