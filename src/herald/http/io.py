"""Reading JSON requests and writing JSON answers, errors included, the same way everywhere."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping
from typing import Any

from pydantic_core import PydanticSerializationError, to_json
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive

from herald import json_input
from herald.errors import HeraldError, InvalidInput, RateLimited, TooLarge, UnknownKey

# A full batch of large events is far over this; such publishers split their batches.
MAX_BODY_BYTES = 32 * 1024 * 1024
RETRY_AFTER_S = 5
"""What a 503 tells clients to wait before they try again: an outage of the store is usually
over in seconds, and clients that all retry at once would prolong it."""


BOM = b"\xef\xbb\xbf"

_NEEDED: Any = object()
"""``read_json``'s default: a body must be sent."""


async def read_json(request: Request, *, if_empty: Any = _NEEDED) -> Any:
    """The request body as JSON, checked by ``herald.json_input``; ``if_empty`` when there is no
    body at all (zero bytes) and one is not needed. (A body of JSON ``null``, ``false`` or ``[]``
    is a body: it is returned as it is, for the route to refuse. So is one of only whitespace or
    a byte-order mark: it is refused, not taken for no body, since a route may do something
    else without one, such as a drain that delivers at once.)

    Raises:
        TooLarge: the body is over 32 MiB.
        InvalidInput: the body is missing (and ``if_empty`` not given), holds no JSON (only
            whitespace), is not JSON, or holds what herald does not take (a key twice in one
            object, nesting over 100 levels, NUL, an unpaired surrogate, a number JSON cannot
            carry); the message names the JSON path.
    """
    return json_of(await read_body(request), if_empty=if_empty)


async def read_body(request: Request) -> bytes:
    """The request body as it came, up to 32 MiB (``read_json`` without the parse).

    Raises:
        TooLarge: the body is over 32 MiB.
    """
    if _declared_over_limit(request.headers.get("content-length")):
        raise TooLarge(f"the request body is over {MAX_BODY_BYTES} bytes; send smaller batches")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise TooLarge(f"the request body is over {MAX_BODY_BYTES} bytes; send smaller batches")
        chunks.append(chunk)
    return b"".join(chunks)


def json_of(body: bytes, *, if_empty: Any = _NEEDED) -> Any:
    """A body read by ``read_body``, as ``read_json`` returns it.

    Raises:
        InvalidInput: as ``read_json``.
    """
    if not body:
        if if_empty is not _NEEDED:
            return if_empty
        raise InvalidInput("the request needs a JSON body")
    if not body.removeprefix(BOM).strip():  # spaces, tabs, line or form feeds
        raise InvalidInput(
            "the request body holds no JSON, only whitespace or a byte-order mark: send a JSON"
            + (" value" if if_empty is _NEEDED else " object, or no body at all (zero bytes)")
        )
    return json_input.loads(body)


def _declared_over_limit(declared: str | None) -> bool:
    if declared is None or not (declared.isascii() and declared.isdigit()):
        return False  # the server itself refuses a malformed length
    digits = declared.lstrip("0")
    return len(digits) > len(str(MAX_BODY_BYTES)) or int(digits or "0") > MAX_BODY_BYTES


async def cancel_on_disconnect(receive: Receive, task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` (a long answer being written) once the client has gone away."""
    while (await receive())["type"] != "http.disconnect":
        pass
    if task is not None:
        task.cancel()


def json_response(payload: Any, status: int = 200) -> Response:
    """An answer in JSON, encoded once, compactly, in UTF-8."""
    try:
        body = to_json(payload)
    except PydanticSerializationError:  # nesting past its depth: data an older herald took
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    return Response(body, status_code=status, media_type="application/json")


def error_response(
    code: str,
    message: str,
    status: int,
    headers: Mapping[str, str] | None = None,
    details: Mapping[str, object] | None = None,
) -> Response:
    if status == 503:
        headers = {"Retry-After": str(RETRY_AFTER_S), **(headers or {})}
    error = {"code": code, "message": message, **(details or {})}
    return JSONResponse({"error": error}, status, headers=headers)


def error_headers(exc: HeraldError) -> dict[str, str] | None:
    """The headers an error's answer needs: how to authenticate (and, for a key sent but not
    known, why it was refused, as RFC 6750 says: clients that show no body show this), or when
    to retry."""
    if isinstance(exc, UnknownKey):
        reason = exc.message.replace('"', "'").replace("\\", "/")
        return {"WWW-Authenticate": f'Bearer error="invalid_token", error_description="{reason}"'}
    if exc.http_status == 401:
        return {"WWW-Authenticate": "Bearer"}
    if isinstance(exc, RateLimited):
        # Whole seconds, never 0: a client told 0 would retry at once.
        return {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
    if exc.http_status == 503:
        return {"Retry-After": str(RETRY_AFTER_S)}
    return None


async def herald_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HeraldError)
    return error_response(exc.code, exc.message, exc.http_status, error_headers(exc), exc.details())
