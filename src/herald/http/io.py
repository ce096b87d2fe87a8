"""Reading JSON requests and writing JSON answers, errors included, the same way everywhere."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from herald.errors import HeraldError, InvalidInput, RateLimited, TooLarge

log = logging.getLogger("herald.http")

# A full batch of large events is far over this; such publishers split their batches.
MAX_BODY_BYTES = 32 * 1024 * 1024
RETRY_AFTER_S = 5
"""What a 503 tells clients to wait before they try again: an outage of the store is usually
over in seconds, and clients that all retry at once would prolong it."""


async def read_json(request: Request, *, optional: bool = False) -> Any:
    """The request body as JSON.

    Raises:
        TooLarge: the body is over 32 MiB.
        InvalidInput: the body is missing (unless ``optional``) or not JSON.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise TooLarge(f"the request body is over {MAX_BODY_BYTES} bytes; send smaller batches")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise TooLarge(f"the request body is over {MAX_BODY_BYTES} bytes; send smaller batches")
        chunks.append(chunk)
    body = b"".join(chunks)
    if not body.strip():
        if optional:
            return None
        raise InvalidInput("the request needs a JSON body")
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"the body is not valid JSON: {exc}") from exc


def json_response(payload: Any, status: int = 200) -> Response:
    return Response(
        json.dumps(payload, separators=(",", ":"), ensure_ascii=False),
        status_code=status,
        media_type="application/json",
    )


def error_response(
    code: str, message: str, status: int, headers: Mapping[str, str] | None = None
) -> Response:
    if status == 503:
        headers = {"Retry-After": str(RETRY_AFTER_S), **(headers or {})}
    return JSONResponse({"error": {"code": code, "message": message}}, status, headers=headers)


def error_headers(exc: HeraldError) -> dict[str, str] | None:
    """The headers an error's answer needs: how to authenticate, or when to retry."""
    if exc.http_status == 401:
        return {"WWW-Authenticate": "Bearer"}
    if isinstance(exc, RateLimited):
        # Whole seconds, never 0: a client told 0 would retry at once.
        return {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
    return None


async def herald_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HeraldError)
    return error_response(exc.code, exc.message, exc.http_status, error_headers(exc))


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    codes = {404: "not_found", 405: "method_not_allowed"}
    message = {
        404: f"no route {request.url.path}; see the README for the API",
        405: f"{request.method} is not allowed on {request.url.path}",
    }.get(exc.status_code, str(exc.detail))
    return error_response(
        codes.get(exc.status_code, "http_error"), message, exc.status_code, exc.headers
    )


async def unexpected_error(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response("internal", "herald failed on this request; the error is logged", 500)


def strict_object(body: Any, allowed: set[str], name: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidInput(f"the {name} body must be a JSON object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidInput(
            f"{name} has unknown field(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )
    return body
