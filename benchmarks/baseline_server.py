"""What the baseline servers share: serving one Starlette app on uvicorn, the way herald serve
does (uvloop, a socket bound first, its address printed once it listens)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
from collections.abc import Callable

import uvicorn
import uvloop
from starlette.applications import Starlette


async def _serve(
    name: str, app: Starlette, host: str, port: int, backlog: int, grace_s: int
) -> None:
    sock = socket.create_server((host, port), reuse_port=False, backlog=backlog)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, timeout_graceful_shutdown=grace_s
    )
    print(f"{name}: listening on http://{host}:{sock.getsockname()[1]}", flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


def run(
    name: str,
    description: str,
    create_app: Callable[[], Starlette],
    *,
    backlog: int = 100,
    grace_s: int = 5,
) -> None:
    """Parse ``--host`` and ``--port`` and serve ``create_app()`` until interrupted."""
    args = parser(description).parse_args()
    serve(name, create_app(), args.host, args.port, backlog=backlog, grace_s=grace_s)


def parser(description: str) -> argparse.ArgumentParser:
    """A command line with ``--host`` and ``--port``, for a baseline to add its own to."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    return parser


def serve(
    name: str, app: Starlette, host: str, port: int, *, backlog: int = 100, grace_s: int = 5
) -> None:
    """Serve ``app`` on uvloop until interrupted."""
    with (
        contextlib.suppress(KeyboardInterrupt),
        asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
    ):
        runner.run(_serve(name, app, host, port, backlog, grace_s))
