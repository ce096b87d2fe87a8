"""What every Server-Sent Events answer of herald's shares: its headers, a writer that gives up
on a client that stops reading, and the watch that ends the answer when the client goes away."""

from __future__ import annotations

import asyncio
import contextlib
import json
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterator
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
    watch = _watch()

    async def write(text: str) -> None:
        with watch.deadline(timeout_s):
            await send({"type": "http.response.body", "body": text.encode(), "more_body": True})

    return write


class WriteWatch:
    """The writes in progress on one event loop, and one timer for all of them, at the earliest
    deadline, that cuts off the writes past theirs. Nearly every write ends without waiting
    (the client reads): a timer of its own (``asyncio.timeout``: a timer made and cancelled per
    write) was a tenth of the CPU of one event sent to 10,000 streams."""

    def __init__(self) -> None:
        self._due: dict[asyncio.Task[Any], float] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.TimerHandle | None = None

    @contextlib.contextmanager
    def deadline(self, timeout_s: float) -> Iterator[None]:
        """Raise ``TimeoutError`` from the block (which awaits) once it has run ``timeout_s``:
        the task is cancelled then, and that cancellation, and only that, becomes the error."""
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a write's deadline is kept only inside a task")
        cancelling = task.cancelling()
        due = asyncio.get_running_loop().time() + timeout_s
        self._due[task] = due
        if self._timer is None or self._timer.when() > due:
            self._arm(due)
        try:
            yield
        except asyncio.CancelledError:
            if task in self._expired and task.uncancel() <= cancelling:
                raise TimeoutError(f"the client read nothing for {timeout_s:g} s") from None
            raise
        finally:
            del self._due[task]
            self._expired.discard(task)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(when, self._cut_off)

    def _cut_off(self) -> None:
        self._timer = None
        now = asyncio.get_running_loop().time()
        for task, due in self._due.items():
            if due <= now and task not in self._expired:
                self._expired.add(task)
                task.cancel()
        waiting = [due for task, due in self._due.items() if task not in self._expired]
        if waiting:
            self._arm(min(waiting))


_watches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WriteWatch] = (
    weakref.WeakKeyDictionary()
)


def _watch() -> WriteWatch:
    """The running loop's watch of writes (a loop's timers are its own; the watch does not
    keep its loop, which would keep both for ever)."""
    loop = asyncio.get_running_loop()
    watch = _watches.get(loop)
    if watch is None:
        watch = _watches[loop] = WriteWatch()
    return watch


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
