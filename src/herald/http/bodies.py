"""Request bodies have deadlines, as request heads do (``herald.http.connections``): a client
cannot hold a connection by sending its body a byte at a time, or by stopping half way.

While herald waits for more of a body, at most ``idle_s`` may pass with nothing arriving, and
the whole body must have arrived ``total_s`` after herald began to read it. Past either, the
request is answered 408 ``body_timeout`` in herald's error shape and its connection closed.

This is ASGI middleware around ``receive``: it bounds only what the app waits for. A body left
unread behind an early answer (a 401 before the body is read, say) is the server's to discard;
``herald.http.connections`` bounds that with the same total deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herald.errors import BodyTimeout
from herald.http.io import error_response


class BodyDeadlines:
    """ASGI middleware: each request body arrives without a pause over ``idle_s`` and whole
    within ``total_s`` of its first read (by ``clock``, in seconds), or the request is answered
    408 and its connection closed."""

    def __init__(
        self, app: ASGIApp, *, idle_s: float, total_s: float, clock: Callable[[], float]
    ) -> None:
        self.app = app
        self.idle_s = idle_s
        self.total_s = total_s
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_body(scope):
            # Nothing to wait for: a stream's answer (every push on it) goes out unwrapped.
            await self.app(scope, receive, send)
            return
        body = _Body(self, receive)
        answer = _Answer(send, body)
        with contextlib.suppress(BodyTimeout):  # an app that let it through unanswered
            await self.app(scope, body.receive, answer.send)
        if body.late is not None and not answer.started:
            await answer.send({"type": "http.response.start", "status": 408})


def _has_body(scope: Scope) -> bool:
    """Whether the request's head announces a body: a request with neither ``Content-Length``
    (other than 0) nor ``Transfer-Encoding`` has none (RFC 9112, section 6.3)."""
    for name, value in scope["headers"]:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


class _Body:
    """The ``receive`` of one request, bounded while the body is still coming."""

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


class _Answer:
    """The ``send`` of one request: once its body ran out of time, the answer is herald's 408
    (whatever the app answers instead) and the connection is closed after it."""

    def __init__(self, send: Send, body: _Body) -> None:
        self._send = send
        self._body = body
        self.started = False
        self._replaced = False

    async def send(self, message: Message) -> None:
        if self._replaced:
            return  # the rest of an answer the 408 replaced
        if message["type"] == "http.response.start":
            self.started = self._body.answered = True
            if self._body.late is not None:
                self._replaced = True
                await self._refuse(self._body.late)
                return
        await self._send(message)

    async def _refuse(self, late: BodyTimeout) -> None:
        answer = error_response(late.code, late.message, late.http_status)
        headers = [*answer.raw_headers, (b"connection", b"close")]
        await self._send({"type": "http.response.start", "status": 408, "headers": headers})
        await self._send({"type": "http.response.body", "body": answer.body})
