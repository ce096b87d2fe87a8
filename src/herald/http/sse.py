"""What every Server-Sent Events answer of herald's shares: its headers, a writer that gives up
on a client that stops reading, and the watch that ends the answer when the client goes away."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from starlette.types import Receive, Send

from herald.http.io import cancel_on_disconnect

SEND_TIMEOUT_S = 30.0
"""A client that takes no data for this long is not reading: the stream is closed."""

Write = Callable[[str], Awaitable[None]]


def headers(content_type: bytes = b"text/event-stream; charset=utf-8") -> list[tuple[bytes, bytes]]:
    # no-transform and x-accel-buffering: a proxy on the way must not hold frames back.
    return [
        (b"content-type", content_type),
        (b"cache-control", b"no-cache, no-transform"),
        (b"x-accel-buffering", b"no"),
    ]


async def start(send: Send, timeout_s: float = SEND_TIMEOUT_S) -> Write:
    """Send the headers of a 200 answer, and return the writer of its frames: it writes text as
    the next part of the body, and raises ``TimeoutError`` once a write has waited
    ``timeout_s`` for a client that reads nothing."""
    await send({"type": "http.response.start", "status": 200, "headers": headers()})

    async def write(text: str) -> None:
        async with asyncio.timeout(timeout_s):
            await send({"type": "http.response.body", "body": text.encode(), "more_body": True})

    return write


async def end(send: Send) -> None:
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def frame(kind: str | None, frame_id: int | str | None, data: Any) -> str:
    """One frame: its event name (none: a plain message), its id, and data as compact JSON."""
    lines = []
    if kind:
        lines.append(f"event: {kind}")
    if frame_id is not None:
        lines.append(f"id: {frame_id}")
    lines.append("data: " + json.dumps(data, separators=(",", ":"), ensure_ascii=False))
    return "\n".join(lines) + "\n\n"


async def while_connected(receive: Receive, answer: Coroutine[Any, Any, None]) -> None:
    """Run ``answer`` (a stream being written) until it ends or the client goes away, which
    cancels it. A client that went away, or stopped reading (``TimeoutError`` from a write) or
    whose connection broke (``OSError``), ends the answer normally: it resumes from the last id
    it read."""
    streaming = asyncio.current_task()
    watcher = asyncio.create_task(cancel_on_disconnect(receive, streaming))
    try:
        await answer
    except (TimeoutError, OSError):
        pass
    except asyncio.CancelledError:
        if not watcher.done():  # cancelled from elsewhere (the server stopping): pass it on
            raise
    finally:
        watcher.cancel()
