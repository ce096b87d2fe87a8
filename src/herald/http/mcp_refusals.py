"""What ``/mcp`` answers when it refuses a request before the MCP SDK sees it (no key, a key
herald does not know, the store out of reach, a key over its live sessions): a JSON-RPC error
carrying herald's reason, with the request's id where it can be read, at herald's HTTP status
and with its headers (``WWW-Authenticate``, ``Retry-After``).

An MCP client shows the error of a JSON-RPC body in a non-2xx answer; any other body (herald's
HTTP error shape) reaches its user as "Server returned an error response", the reason lost."""

from __future__ import annotations

import json
from typing import Any

from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST
from starlette.types import Receive, Scope, Send

from herald.errors import HeraldError
from herald.http.io import error_headers, json_response
from herald.subscriptions.codes import RESOURCE_EXHAUSTED

ID_READ_BYTES = 64 * 1024
"""How much of a refused request's body is read for its id: a request to open a session or
call a tool is far smaller; a larger one is answered with no id (``null``)."""


async def refuse(
    exc: HeraldError, scope: Scope, receive: Receive, send: Send, *, body_unread: bool
) -> None:
    """Answer ``exc`` as a JSON-RPC error. With ``body_unread``, the body is read (so far) for
    the request's id; otherwise it has been read already, and the id is ``null``, as JSON-RPC
    says of a request whose id cannot be known."""
    request_id = await _request_id(scope, receive) if body_unread else None
    error: dict[str, Any] = {
        "code": _code(exc.http_status),
        "message": exc.message,
        "data": {"code": exc.code},
    }
    headers = error_headers(exc) or {}
    answer = json_response({"jsonrpc": "2.0", "id": request_id, "error": error}, exc.http_status)
    answer.headers.update(headers)
    await answer(scope, receive, send)


def _code(status: int) -> int:
    if status == 429:
        return RESOURCE_EXHAUSTED
    return INTERNAL_ERROR if status >= 500 else INVALID_REQUEST


async def _request_id(scope: Scope, receive: Receive) -> str | int | None:
    if scope.get("method") != "POST":
        return None
    body = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None  # the client went away
        body += message.get("body", b"")
        if len(body) > ID_READ_BYTES:
            return None
        if not message.get("more_body", False):
            break
    return request_id_of(body)


def request_id_of(body: bytes) -> str | int | None:
    """The id of the JSON-RPC request in ``body`` (None: none, or not one that can be read)."""
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return None
    found = request.get("id") if isinstance(request, dict) else None
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None
