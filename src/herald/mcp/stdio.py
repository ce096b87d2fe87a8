"""An MCP server on a pair of streams (stdio), in the era its client's profile gets.

The ``mcp`` SDK's dual-era loop locks a connection to 2026-07-28 when its first request is
``server/discover``; a refused probe would then leave the client no way back to ``initialize``.
So a probe that herald refuses (``McpConfig.era``, or the client's profile: Claude Code stays on
the legacy era, where herald can push to it) is answered here, before the loop sees it, and the
client's ``initialize`` that follows opens a legacy connection as usual.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.models import InitializationOptions
from mcp.server.runner import serve_dual_era_loop
from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError, JSONRPCRequest

from herald.mcp.server import serves_modern

Streams = Any
"""The SDK's read and write streams of ``SessionMessage`` (its own types are private)."""


async def serve_by_era(
    server: Server[Any],
    read_stream: Streams,
    write_stream: Streams,
    *,
    era: str,
    lifespan_state: Any,
    init_options: InitializationOptions | None = None,
) -> None:
    """Serve one connection until its client leaves."""
    relay_send, relay_receive = anyio.create_memory_object_stream[SessionMessage | Exception](16)

    async def refuse_probes_then_relay() -> None:
        opened = False
        async with relay_send:
            async for item in read_stream:
                request = _request(item)
                if not opened and request is not None:
                    if request.method == "server/discover" and not serves_modern(
                        era, request.params
                    ):
                        await write_stream.send(SessionMessage(_method_not_found(request)))
                        continue
                    opened = True
                await relay_send.send(item)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(refuse_probes_then_relay)
        await serve_dual_era_loop(
            server,
            relay_receive,
            write_stream,
            lifespan_state=lifespan_state,
            init_options=init_options,
        )
        tasks.cancel_scope.cancel()


def _request(item: SessionMessage | Exception) -> JSONRPCRequest | None:
    if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
        return item.message
    return None


def _method_not_found(request: JSONRPCRequest) -> JSONRPCError:
    error = ErrorData(code=types.METHOD_NOT_FOUND, message="Method not found", data=request.method)
    return JSONRPCError(jsonrpc="2.0", id=request.id, error=error)
