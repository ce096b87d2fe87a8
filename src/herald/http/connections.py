"""The connections ``herald serve`` accepts: no client may hold one open without sending its
request in time, send a request head without end, or take the last file the process can open.

- A request head (request line and headers) over ``MAX_HEAD_BYTES`` is answered 431 and the
  connection closed; about that much (and one read more) is buffered at most.
- A request head not complete ``head_timeout_s`` after the connection opened (or after the first
  byte of the next request on a kept-alive connection) closes the connection, with 408 if part of
  a head had come. A kept-alive connection idle between requests is closed by uvicorn's own
  keep-alive timeout (5 s).
- At most ``max_connections`` are open at once, below the process's open-file limit
  (``ConnectionBudget``). A connection that arrives at the cap makes room by closing the one that
  has waited longest for a request head (or idled longest between requests). Every HTTP client
  sends its request as soon as it connects, so a legitimate client is the newest waiter, never
  the oldest: a flood of slow or idle connections cannot keep it (or ``/healthz``) out, and the
  head timeout sweeps the flood away. Connections with a request in flight (streams, MCP GET
  streams) are never closed for room; they are bounded per key instead (``herald.http.limits``).
  When every open connection has a request in flight, a new one is taken into a small reserve
  beyond the cap (``PROBE_RESERVE``) that serves only health and readiness probes (``/healthz``,
  ``/readyz``) and closes after one; any other request on it, or a connection past the reserve,
  gets 503. No key may hold more than a quarter of the cap in requests (``per_key``, enforced
  by ``herald.http.limits.RequestsPerKey``).
- A request body is bounded by ``herald.http.bodies`` while the app reads it. A body left unread
  behind an early answer (a 401, say) is discarded as it comes; meanwhile the connection has no
  request in flight (it may be closed for room), and if the body has not ended
  ``body_timeout_s`` after the answer, the connection is closed.
- A request uvicorn's parser refuses (a control character in a header, say) gets 400 in
  herald's error shape, not uvicorn's plain text.

The seam is uvicorn's httptools protocol (``http=`` of ``uvicorn.Config``), subclassed: it
relies on the internals of the uvicorn range pinned in pyproject.toml.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections import OrderedDict
from dataclasses import dataclass
from http import HTTPStatus
from typing import ClassVar, Literal

from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from herald.errors import InvalidInput

MAX_HEAD_BYTES = 64 * 1024
OWN_FILES = 256
"""Files kept for herald's own use at most (the store, webhook connections, logs); a quarter of
the limit when it is small."""
MIN_CONNECTIONS = 16
UNKNOWN_FILE_LIMIT = 8192
"""Assumed where the limit cannot be read (not on Unix), or is unlimited."""
BUSY_RETRY_AFTER_S = 1
PROBE_RESERVE = 16
"""Connections taken beyond the cap, when every connection has a request in flight, to answer a
health or readiness probe each."""
PROBES = frozenset({b"/healthz", b"/readyz"})


Admission = Literal["admitted", "probes only", "refused"]


@dataclass(frozen=True)
class ConnectionBudget:
    """How many connections one process may hold, from its open-file limit."""

    files: int
    backlog: int
    """The listen backlog: connections the kernel queues before herald accepts them."""
    max_connections: int

    @property
    def per_key(self) -> int:
        """Requests one key may have in flight at once: a quarter of the connections."""
        return self.max_connections // 4

    @classmethod
    def for_files(cls, files: int) -> ConnectionBudget:
        """The budget within ``files`` open files. A burst of connections is accepted before the
        cap can close any for room, a backlog's worth per turn of the event loop: twice the
        backlog is kept free for that, besides herald's own files.

        Raises:
            InvalidInput: the limit leaves fewer than ``MIN_CONNECTIONS`` connections.
        """
        own = min(OWN_FILES, files // 4)
        backlog = max(16, min(2048, files // 16))
        cap = files - own - 2 * backlog
        if cap < MIN_CONNECTIONS:
            raise InvalidInput(
                f"this process may open only {files} files, too few to serve; "
                "raise its limit (ulimit -n) to 256 or more"
            )
        return cls(files, backlog, cap)


def raise_file_limit() -> int:
    """Raise the soft open-file limit to the hard one where allowed; the limit now in force."""
    try:
        import resource
    except ImportError:  # not on Unix: no limit to read, assume a common one
        return UNKNOWN_FILE_LIMIT
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return UNKNOWN_FILE_LIMIT
    if hard == resource.RLIM_INFINITY or soft >= hard:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):  # the system allows less than the hard limit says
        return soft
    return hard


class ConnectionGuard:
    """The open connections of one server, and which of them wait for a request head, the
    longest waiting first; and those beyond the cap that may answer only a probe."""

    def __init__(
        self, max_connections: int, head_timeout_s: float, body_timeout_s: float = 60.0
    ) -> None:
        if not (math.isfinite(head_timeout_s) and head_timeout_s > 0):
            raise InvalidInput("the head timeout must be more than 0 seconds")
        self.max_connections = max_connections
        self.head_timeout_s = head_timeout_s
        self.body_timeout_s = body_timeout_s
        self._open: set[GuardedHttpProtocol] = set()
        self._waiting: OrderedDict[GuardedHttpProtocol, None] = OrderedDict()
        self._reserve: set[GuardedHttpProtocol] = set()

    def admit(self, connection: GuardedHttpProtocol) -> Admission:
        """Count a new connection, closing the longest waiting one for room at the cap. When
        every open connection has a request in flight, the new one goes into the probes'
        reserve while it has room (``"probes only"``), or is not taken (``"refused"``)."""
        if len(self._open) >= self.max_connections:
            if not self._waiting:
                if len(self._reserve) >= PROBE_RESERVE:
                    return "refused"
                self._reserve.add(connection)
                return "probes only"
            oldest, _ = self._waiting.popitem(last=False)
            self._open.discard(oldest)
            oldest.evict()
        self._open.add(connection)
        self._waiting[connection] = None
        return "admitted"

    def busy(self, connection: GuardedHttpProtocol) -> None:
        """The connection has a request in flight: it is not closed for room."""
        self._waiting.pop(connection, None)

    def waiting(self, connection: GuardedHttpProtocol) -> None:
        """The connection waits for its next request, from now."""
        if connection in self._open:
            self._waiting[connection] = None

    def forget(self, connection: GuardedHttpProtocol) -> None:
        self._open.discard(connection)
        self._waiting.pop(connection, None)
        self._reserve.discard(connection)


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a bounded, timed request head and a place under the
    guard's cap. ``guarded_protocol`` binds it to a guard."""

    guard: ClassVar[ConnectionGuard]
    _head_pending = True
    """A request head is expected or in progress (and its bytes are counted)."""
    _head_bytes = 0
    _head_clock: asyncio.TimerHandle | None = None
    _body_read = False
    """The request's body (if any) was read to its end."""
    _body_clock: asyncio.TimerHandle | None = None
    """Runs while the body of an answered request is still coming."""
    _probes_only = False
    """The connection is in the probes' reserve, beyond the cap."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        admission = self.guard.admit(self)
        if admission == "refused":
            self._answer_and_close(503, "server_busy", _BUSY, _BUSY_HEADERS)
            return
        self._probes_only = admission == "probes only"
        self._start_head_clock()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_clock()
        self._stop_body_clock()
        self.guard.forget(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head_pending:
            self._head_bytes += len(data)
            self._start_head_clock()
        super().data_received(data)
        if (
            self._head_pending
            and self._head_bytes > MAX_HEAD_BYTES
            and not self.transport.is_closing()
        ):
            self._answer_and_close(431, "head_too_large", _HEAD_TOO_LARGE)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._body_read = False
        self._head_pending = True
        self._start_head_clock()

    def on_headers_complete(self) -> None:
        self._stop_head_clock()
        self._head_pending = False
        self._head_bytes = 0
        self.guard.busy(self)
        if _head_size(self.url, self.headers) > MAX_HEAD_BYTES:
            # The URL uvicorn would parse first is not needed: a long one (over 64 KiB) fails
            # to parse, which uvicorn would answer with a plain-text 400 instead.
            self.url = b"/"
            self._run_instead(_refusal(431, "head_too_large", _HEAD_TOO_LARGE))
        elif self._probes_only and self.url.split(b"?", 1)[0] not in PROBES:
            self._run_instead(_refusal(503, "server_busy", _BUSY, _BUSY_HEADERS))
        else:
            super().on_headers_complete()
        if self._probes_only and self.cycle is not None:
            self.cycle.keep_alive = False  # one probe, then the reserve's place is free again

    def _run_instead(self, app: ASGIApp) -> None:
        """uvicorn runs the request's cycle as usual, with ``app`` instead of herald."""
        herald, self.app = self.app, app
        try:
            super().on_headers_complete()
        finally:
            self.app = herald

    def on_message_complete(self) -> None:
        self._body_read = True  # uvicorn notes it only while the answer is still to come
        super().on_message_complete()
        self._wait_for_next_head()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._wait_for_next_head()

    def _wait_for_next_head(self) -> None:
        """Once a request's answer is sent and its body all read, what comes next is a new
        request head. Until the body is read, what comes is body (an answer can go before the
        body arrives, a refusal say), never counted as a head; it must end within the body
        timeout. Either way, the connection has no request in flight: it may be closed for
        room."""
        cycle = self.cycle
        answered = cycle is not None and cycle.response_complete
        # (after on_response_complete, a pipelined request may have started a new cycle)
        if not answered or self.transport.is_closing():
            return
        self.guard.waiting(self)
        if self._body_read:
            self._stop_body_clock()
            self._head_pending = True
        elif self._body_clock is None:
            self._body_clock = self.loop.call_later(self.guard.body_timeout_s, self._body_late)

    def _body_late(self) -> None:
        """The body of an answered request did not end in time: nothing is left to answer."""
        self._body_clock = None
        self.transport.close()

    def _stop_body_clock(self) -> None:
        if self._body_clock is not None:
            self._body_clock.cancel()
            self._body_clock = None

    def evict(self) -> None:
        """Close the connection to make room for a new one."""
        self._stop_head_clock()
        self._stop_body_clock()
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to what its parser refuses, in herald's shape. An answer already
        under way cannot be followed by another: the connection is only closed."""
        cycle = self.cycle
        if cycle is not None and cycle.response_started and not cycle.response_complete:
            self._stop_head_clock()
            self.transport.close()
            return
        self._answer_and_close(400, "bad_request", _NOT_HTTP)

    def _start_head_clock(self) -> None:
        if self._head_clock is None:
            self._head_clock = self.loop.call_later(self.guard.head_timeout_s, self._head_timed_out)

    def _stop_head_clock(self) -> None:
        if self._head_clock is not None:
            self._head_clock.cancel()
            self._head_clock = None

    def _head_timed_out(self) -> None:
        self._head_clock = None
        if self.transport.is_closing():
            return
        in_flight = self.cycle is not None and not self.cycle.response_complete
        if not self._head_bytes or in_flight:  # nothing to answer, or an answer under way
            self.transport.close()
            return
        message = (
            f"the request head did not arrive within {self.guard.head_timeout_s:g} s; "
            "send the request line and headers at once"
        )
        self._answer_and_close(408, "head_timeout", message)

    def _answer_and_close(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        self._stop_head_clock()
        self._head_pending = False
        self.transport.write(_raw_response(status, code, message, headers or {}))
        self.transport.close()


def guarded_protocol(guard: ConnectionGuard) -> type[GuardedHttpProtocol]:
    """The protocol class to give ``uvicorn.Config(http=...)``, bound to ``guard``."""
    return type("GuardedHttpProtocol", (GuardedHttpProtocol,), {"guard": guard})


_HEAD_TOO_LARGE = (
    f"the request line and headers are over {MAX_HEAD_BYTES // 1024} KiB; send smaller headers"
)
_BUSY = "herald holds as many connections as it can, all busy; retry shortly"
_BUSY_HEADERS = {"retry-after": str(BUSY_RETRY_AFTER_S)}
_NOT_HTTP = (
    "the request is not valid HTTP/1.1: a control character in a header, or a malformed"
    " request line, header or chunk; fix the request"
)


def _head_size(url: bytes, headers: list[tuple[bytes, bytes]]) -> int:
    # The request line and each "name: value\r\n", close enough to the bytes on the wire.
    return len(url) + 32 + sum(len(name) + len(value) + 4 for name, value in headers)


def _error_body(code: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message}}, separators=(",", ":")).encode()


def _raw_response(status: int, code: str, message: str, headers: dict[str, str]) -> bytes:
    body = _error_body(code, message)
    lines = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _refusal(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> ASGIApp:
    """An app that answers every request with this error and closes the connection."""
    body = _error_body(code, message)
    raw_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *((name.encode(), value.encode()) for name, value in (headers or {}).items()),
    ]

    async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": status, "headers": raw_headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    return refuse
