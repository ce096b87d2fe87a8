"""Request bodies have deadlines, as request heads do (``herald.http.connections``): a client
cannot hold a connection by sending its body a byte at a time, or by stopping half way.

While herald waits for more of a body, at most ``idle_s`` may pass with nothing arriving, and
the whole body must have arrived ``total_s`` after herald began to read it. Past either, the
request is answered 408 ``body_timeout`` in herald's error shape and its connection closed.

This bounds ``receive`` (``herald.http.middleware``): only what the app waits for. A body left
unread behind an early answer (a 401 before the body is read, say) is the server's to discard;
``herald.http.connections`` bounds that with the same total deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from starlette.types import Message, Receive

from herald.errors import BodyTimeout
from herald.http.io import error_response


class BodyDeadlines:
    """Each request body arrives without a pause over ``idle_s`` and whole within ``total_s`` of
    its first read (by ``clock``, in seconds), or the request is answered 408 and its connection
    closed (``herald.http.middleware`` keeps them around each request)."""

    def __init__(self, *, idle_s: float, total_s: float, clock: Callable[[], float]) -> None:
        self.idle_s = idle_s
        self.total_s = total_s
        self.clock = clock

    def of(self, receive: Receive) -> _Body:
        """The bounded ``receive`` of one request whose head announces a body."""
        return _Body(self, receive)


class _Body:
    """The ``receive`` of one request, bounded while the body is still coming."""

    __slots__ = ("_deadlines", "_first_read", "_receive", "_whole", "answered", "late")

    def __init__(self, deadlines: BodyDeadlines, receive: Receive) -> None:
        self._deadlines = deadlines
        self._receive = receive
        self._first_read: float | None = None
        self._whole = False
        self.answered = False
        """An answer has begun: the body's remains, if any, are the server's to bound."""
        self.late: BodyTimeout | None = None
        """Why the body ran out of time, once it has."""

    async def receive(self) -> Message:
        if self._whole or self.answered:
            return await self._receive()
        deadlines, now = self._deadlines, self._deadlines.clock()
        if self._first_read is None:
            self._first_read = now
        left = self._first_read + deadlines.total_s - now
        try:
            async with asyncio.timeout(max(0.0, min(deadlines.idle_s, left))):
                message = await self._receive()
        except TimeoutError:
            raise self._ran_out(stalled=left > deadlines.idle_s) from None
        if message["type"] != "http.request" or not message.get("more_body", False):
            self._whole = True
        elif deadlines.clock() - self._first_read > deadlines.total_s:
            raise self._ran_out(stalled=False)
        return message

    def _ran_out(self, *, stalled: bool) -> BodyTimeout:
        deadlines = self._deadlines
        if stalled:
            why = (
                f"the request body sent nothing for {deadlines.idle_s:g} s; send the body at"
                " once, as it is ready"
            )
        else:
            why = (
                f"the request body did not arrive whole within {deadlines.total_s:g} s; send"
                " it at once, or in smaller requests"
            )
        self.late = BodyTimeout(why)
        return self.late


def body_refusal(late: BodyTimeout) -> list[Message]:
    """The answer that replaces the app's once a body ran out of time: herald's 408, and the
    connection closed after it."""
    answer = error_response(late.code, late.message, late.http_status)
    headers = [*answer.raw_headers, (b"connection", b"close")]
    return [
        {"type": "http.response.start", "status": 408, "headers": headers},
        {"type": "http.response.body", "body": answer.body},
    ]
