"""A short way through ``/mcp`` for the one request a draining client sends over and over: a
2026-07-28 ``events/poll``.

Through the ``mcp`` SDK, each answer is built as a model, dumped to a dict, then to JSON, in a
task of its own: for a page of a hundred events that costs more than the poll itself. A
well-formed poll on the 2026-07-28 era (the SDK's own classifier says so, headers and envelope)
is answered here, by the same function as through the SDK (``mcp.events.poll_answer``), its
JSON written once; anything else, including every request the classifier refuses, goes to the
SDK untouched, so errors of the protocol keep the SDK's words and statuses.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from herald.config import EventsConfig
from herald.hub import Hub
from herald.mcp.events import poll_answer
from herald.models import Agent

METHOD = "events/poll"
MAX_BODY_BYTES = 1024 * 1024
"""A poll's params are a few hundred bytes; a larger body goes the SDK's way (its own limit)."""


def is_modern_poll(scope: Scope) -> bool:
    """Whether the request says, in its headers, that it is a 2026-07-28 ``events/poll``."""
    if scope.get("method") != "POST":
        return False
    headers = dict(scope["headers"])
    version = headers.get(b"mcp-protocol-version", b"").decode("latin-1")
    return headers.get(b"mcp-method") == METHOD.encode() and version in MODERN_PROTOCOL_VERSIONS


async def answer(
    hub: Hub,
    agent: Agent,
    config: EventsConfig,
    server_info: dict[str, Any],
    scope: Scope,
    receive: Receive,
    send: Send,
) -> Receive | None:
    """Answer the poll and return None; or, when it is not one this path takes, return the
    ``receive`` to hand the SDK (the body read here, given again)."""
    request = Request(scope, receive)
    body, whole = await _body(request)
    replay = _replaying(body, whole, receive)
    if not whole or not _accepts_json(request):
        return replay
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return replay
    if not _is_request(decoded) or find_duplicated_routing_header(request.headers.items()):
        return replay
    if not isinstance(
        classify_inbound_request(decoded, headers=dict(request.headers)), InboundModernRoute
    ):
        return replay
    try:
        result = await poll_answer(hub, agent, decoded.get("params"), config)
    except MCPError as exc:
        error = exc.error.model_dump(mode="json", exclude_none=True)
        status = ERROR_CODE_HTTP_STATUS.get(exc.code, 200)
        await _json(
            {"jsonrpc": "2.0", "id": decoded["id"], "error": error}, status, scope, receive, send
        )
        return None
    result["resultType"] = "complete"
    result["_meta"] = {"io.modelcontextprotocol/serverInfo": server_info}
    await _json(
        {"jsonrpc": "2.0", "id": decoded["id"], "result": result}, 200, scope, receive, send
    )
    return None


async def _body(request: Request) -> tuple[bytes, bool]:
    """The body as far as it was read, and whether that is all of it (reading stops once it
    passes ``MAX_BODY_BYTES``)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return b"".join(chunks), False
    return b"".join(chunks), True


def _replaying(body: bytes, whole: bool, receive: Receive) -> Receive:
    """``receive`` for the SDK: what was read here first, then the rest of the body."""
    given = False

    async def again() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": not whole}
        return await receive()

    return again


def _accepts_json(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/event-stream" in accept


def _is_request(decoded: Any) -> bool:
    return (
        isinstance(decoded, dict)
        and decoded.get("jsonrpc") == "2.0"
        and decoded.get("method") == METHOD
        and isinstance(decoded.get("id"), (str, int))
        and not isinstance(decoded.get("id"), bool)
        and isinstance(decoded.get("params"), dict)
    )


async def _json(
    message: dict[str, Any], status: int, scope: Scope, receive: Receive, send: Send
) -> None:
    body = json.dumps(message, separators=(",", ":")).encode()
    await Response(body, status_code=status, media_type="application/json")(scope, receive, send)
