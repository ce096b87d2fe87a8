"""A short way through ``/mcp`` for the requests an Events client sends most: a 2026-07-28
``events/poll`` (over and over, draining) and ``events/stream`` (each of its pushes).

Through the ``mcp`` SDK, each answer and each notification is built as a model, dumped to a
dict, then to JSON, in tasks and streams of its own: for a page of a hundred events, or a
thousand pushes a second, that costs more than the work itself. A well-formed request of the
2026-07-28 era (its headers and its envelope plainly right, as ``takes_envelope`` checks) is
answered here, by the same code as through the SDK (``mcp.events.poll_answer``,
``mcp.events.Streams``), its JSON written once; anything else, anything in doubt, goes to the SDK
untouched, so errors of the protocol keep the SDK's words and statuses.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY
from mcp_types.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from herald import json_input
from herald.config import EventsConfig
from herald.http import sse
from herald.hub import Hub
from herald.mcp.events import PollAdmit, Streams, no_poll_limit, poll_answer
from herald.models import Agent
from herald.subscriptions.stream import KeyRevocation

POLL = "events/poll"
STREAM = "events/stream"
MAX_BODY_BYTES = 1024 * 1024
"""Their params are a few hundred bytes; a larger body goes the SDK's way (its own limit)."""
SSE_HEADERS = sse.headers(b"text/event-stream")
"""As the SDK's: no charset."""
ROUTING_HEADERS = (b"mcp-protocol-version", b"mcp-method", b"mcp-name")
"""The headers a 2026-07-28 request is routed by: one given twice is for the SDK to refuse."""
ERROR_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}
"""The HTTP status of a JSON-RPC error on the 2026-07-28 transport, as the SDK answers it (any
other code: 200). The SDK keeps its table in a module it does not document as public."""


def short_method(scope: Scope) -> str | None:
    """The method a 2026-07-28 request says in its headers it is, if this way takes it."""
    if scope.get("method") != "POST":
        return None
    headers = dict(scope["headers"])
    version = headers.get(b"mcp-protocol-version", b"").decode("latin-1")
    method = headers.get(b"mcp-method", b"").decode("latin-1")
    return method if method in (POLL, STREAM) and version in MODERN_PROTOCOL_VERSIONS else None


async def take(
    scope: Scope, receive: Receive, method: str, decoded: Any = json_input.NOT_JSON
) -> tuple[dict[str, Any] | None, Receive]:
    """The request, if this way takes it (None: hand it to the SDK), and the ``receive`` to go
    on with (the body read here, given again). ``decoded``: the body's JSON value, where the
    caller parsed it already (``json_input.decoded``); it is parsed here otherwise."""
    request = Request(scope, receive)
    body, whole = await _body(request)
    replay = _replaying(body, whole, receive)
    if not whole or not _accepts_json(request):
        return None, replay
    if decoded is json_input.NOT_JSON:
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            return None, replay
    if not _is_request(decoded, method) or not takes_envelope(decoded, scope):
        return None, replay
    return decoded, replay


def takes_envelope(request: dict[str, Any], scope: Scope) -> bool:
    """Whether a request's routing headers and envelope are plainly right for 2026-07-28: each
    routing header given once, ``Mcp-Method`` the body's method, ``params._meta`` an object with
    the protocol version (a version served, the header's) and the client's capabilities (an
    object), its client info absent or an object. The SDK checks the same before it serves a
    request; it has no public function for it, so this stays on the safe side of the SDK's
    checks: what passes here passes there, and anything else is left to the SDK to answer."""
    raw = [name.lower() for name, _ in scope["headers"]]
    if any(raw.count(name) > 1 for name in ROUTING_HEADERS):
        return False
    headers = dict(scope["headers"])
    version = headers.get(b"mcp-protocol-version", b"").decode("latin-1")
    if headers.get(b"mcp-method", b"").decode("latin-1") != request["method"]:
        return False
    meta = request["params"].get("_meta")
    if not isinstance(meta, dict):
        return False
    info = meta.get(CLIENT_INFO_META_KEY)
    return (
        meta.get(PROTOCOL_VERSION_META_KEY) == version
        and version in MODERN_PROTOCOL_VERSIONS
        and isinstance(meta.get(CLIENT_CAPABILITIES_META_KEY), dict)
        and (info is None or isinstance(info, dict))
    )


async def answer_poll(
    hub: Hub,
    agent: Agent,
    config: EventsConfig,
    server_info: dict[str, Any],
    request: dict[str, Any],
    scope: Scope,
    receive: Receive,
    send: Send,
    admit: PollAdmit = no_poll_limit,
) -> None:
    answered: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
    try:
        result = await poll_answer(hub, agent, request.get("params"), config, admit)
    except MCPError as exc:
        await _refuse(answered, exc, scope, receive, send)
        return
    result["resultType"] = "complete"
    result["_meta"] = {"io.modelcontextprotocol/serverInfo": server_info}
    answered["result"] = result
    await _json(answered, 200, scope, receive, send)


async def answer_stream(
    streams: Streams,
    agent: Agent,
    server_info: dict[str, Any],
    request: dict[str, Any],
    scope: Scope,
    receive: Receive,
    send: Send,
    revocation: KeyRevocation | None = None,
) -> None:
    """Serve the stream as SSE until it ends or the client goes away (which cancels it)."""
    started = False

    async def write(message: dict[str, Any], more: bool = True) -> None:
        nonlocal started
        if not started:
            started = True
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        frame = "event: message\r\ndata: " + json.dumps(message, separators=(",", ":"))
        await send(
            {"type": "http.response.body", "body": (frame + "\r\n\r\n").encode(), "more_body": more}
        )

    async def notify(method: str, params: dict[str, Any]) -> None:
        await write({"jsonrpc": "2.0", "method": method, "params": params})

    async def serve() -> None:
        try:
            params, request_id = request.get("params"), request["id"]
            result = await streams.run(agent, params, request_id, notify, revocation)
        except MCPError as exc:  # refused before anything was sent
            await _refuse({"jsonrpc": "2.0", "id": request["id"]}, exc, scope, receive, send)
            return
        result["resultType"] = "complete"
        meta = {**result.get("_meta", {}), "io.modelcontextprotocol/serverInfo": server_info}
        result["_meta"] = meta
        await write({"jsonrpc": "2.0", "id": request["id"], "result": result}, more=False)

    await sse.while_connected(receive, serve())


async def _refuse(
    answered: dict[str, Any], exc: MCPError, scope: Scope, receive: Receive, send: Send
) -> None:
    answered["error"] = exc.error.model_dump(mode="json", exclude_none=True)
    await _json(answered, ERROR_STATUS.get(exc.code, 200), scope, receive, send)


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


def _is_request(decoded: Any, method: str) -> bool:
    return (
        isinstance(decoded, dict)
        and decoded.get("jsonrpc") == "2.0"
        and decoded.get("method") == method
        and isinstance(decoded.get("id"), (str, int))
        and not isinstance(decoded.get("id"), bool)
        and isinstance(decoded.get("params"), dict)
    )


async def _json(
    message: dict[str, Any], status: int, scope: Scope, receive: Receive, send: Send
) -> None:
    # ASCII escapes, as the SDK writes them (not io.json_response): an old event's lone
    # surrogate stays encodable.
    body = json.dumps(message, separators=(",", ":")).encode()
    await Response(body, status_code=status, media_type="application/json")(scope, receive, send)
