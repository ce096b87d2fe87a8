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
  ``body_timeout_s`` after the answer, the connection is closed. A body of unknown length
  (chunked) left unread closes the connection once its answer is sent (its end cannot be told
  from the next request without parsing it); it is read and dropped until then still.
- A request uvicorn's parser refuses (a control character in a header, say) gets 400 in
  herald's error shape, not uvicorn's plain text.

uvicorn's HTTP protocol is wrapped, not subclassed, by an ``asyncio.Protocol`` that sees every
byte and event of the connection and gives uvicorn's protocol a transport of its own; herald's
ASGI middleware (``herald.http.middleware``) tells it when each answer is sent. The wrapper finds
where a request head ends itself (the blank line after it), and counts a body by its
``content-length``.

uvicorn has no public hook for any of this (no cap on connections that closes the idlest, no
head deadline or size limit for httptools, no answer of its own to a body left unread), so the
wrapper rests on what uvicorn documents, ``Config(http=...)`` taking an ``asyncio.Protocol``
class (its typed signature; its maintainers point there for a protocol of one's own,
Kludex/uvicorn#1228), and on four things its documentation does not say, each covered by tests
on a real ``herald serve`` (``tests/http/test_connections.py`` and its neighbours), which an
upgrade of uvicorn that changed one would fail:

1. ``AutoHTTPProtocol``, the class ``http="auto"`` names, lives in
   ``uvicorn.protocols.http.auto``, and is made with the keyword arguments uvicorn gives the
   protocol class (passed on as they are, none read).
2. uvicorn answers what its parser refuses with a 400 written straight to the transport, outside
   any answer of the app (``_Relay.write`` knows it by its first bytes); were it to change, its
   own plain-text 400 would go out instead of herald's.
3. An answer's head is written in one write before its body (``hold``); were it not, the head
   is written with the answer's end all the same.
4. uvicorn closes the transport once it has answered a request whose chunked body it did not
   read (``_Relay.close`` then reads and drops the rest first).

The app finds the connection of each request by documented behaviour alone
(``ConnectionGuard.serving``): the ASGI specification defines the scope's ``server`` and
``client`` as the connection's local and remote host and port, which asyncio's transport gives
as its ``sockname`` and ``peername``; no two open TCP connections have both ends alike, so the
guard keeps each connection under its two ends. uvicorn's proxy headers (``proxy_headers``)
would rewrite ``client`` before the app sees it: a guarded server runs with them off, and
herald's middleware applies uvicorn's documented ``ProxyHeadersMiddleware`` itself once its
connection is found (``herald.http.middleware``). A server listening on a Unix socket has no
peer address to tell its connections apart: herald listens on TCP only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, ClassVar, Literal, cast

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The class uvicorn's documented http="auto" names (httptools, else h11). Not documented API
# (point 1 of the module's docstring): uvicorn offers no public way to get its own protocol to
# wrap, and this is where uvicorn.config.HTTP_PROTOCOLS["auto"] points.
from uvicorn.protocols.http.auto import AutoHTTPProtocol

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
PROBES = frozenset({"/healthz", "/readyz"})


Admission = Literal["admitted", "probes only", "refused"]
Ends = tuple[str, int, str, int]
"""A TCP connection's two ends: its local host and port, and its remote host and port."""


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
        self._open: set[GuardedConnection] = set()
        self._waiting: OrderedDict[GuardedConnection, None] = OrderedDict()
        self._reserve: set[GuardedConnection] = set()
        self._by_ends: dict[Ends, GuardedConnection] = {}

    def admit(self, connection: GuardedConnection) -> Admission:
        """Count a new connection, closing the longest waiting one for room at the cap. When
        every open connection has a request in flight, the new one goes into the probes'
        reserve while it has room (``"probes only"``), or is not taken (``"refused"``). A
        connection taken is found by its requests' scopes (``serving``) until it is forgotten."""
        if len(self._open) >= self.max_connections:
            if not self._waiting:
                if len(self._reserve) >= PROBE_RESERVE:
                    return "refused"
                self._reserve.add(connection)
                self._known(connection)
                return "probes only"
            oldest, _ = self._waiting.popitem(last=False)
            self._open.discard(oldest)
            oldest.evict()
        self._open.add(connection)
        self._waiting[connection] = None
        self._known(connection)
        return "admitted"

    def _known(self, connection: GuardedConnection) -> None:
        if connection.ends is not None:
            # No two open connections have the same ends: one that had these before is closed
            # (its socket is closed after its loss is told, and forgotten then).
            self._by_ends[connection.ends] = connection

    def serving(self, scope: Scope) -> GuardedConnection | None:
        """The connection of the request ``scope`` is of, by its ``server`` and ``client`` (the
        connection's two ends, as the ASGI specification defines them) before anything
        rewrote ``client`` (a proxy's ``X-Forwarded-For``). None: not a connection of this
        guard's (served by another server, or one that closed before its request began)."""
        server, client = scope.get("server"), scope.get("client")
        if server is None or client is None:
            return None
        return self._by_ends.get((server[0], server[1], client[0], client[1]))

    def busy(self, connection: GuardedConnection) -> None:
        """The connection has a request in flight: it is not closed for room."""
        self._waiting.pop(connection, None)

    def waiting(self, connection: GuardedConnection) -> None:
        """The connection waits for its next request, from now."""
        if connection in self._open:
            self._waiting[connection] = None

    def forget(self, connection: GuardedConnection) -> None:
        self._open.discard(connection)
        self._waiting.pop(connection, None)
        self._reserve.discard(connection)
        ends = connection.ends
        if ends is not None and self._by_ends.get(ends) is connection:
            del self._by_ends[ends]


Phase = Literal["head", "request", "unread body"]
"""Where a connection is: waiting for (or reading) a request head; a request in flight (its
head read); answered, with the rest of its body still to come (to be discarded)."""


class GuardedConnection(asyncio.Protocol):
    """uvicorn's HTTP protocol, wrapped: it gets the connection's events and bytes through the
    asyncio protocol methods, and writes through a transport that is this one's (``_Relay``).
    Around it, a bounded and timed request head, a place under the guard's cap, and a deadline
    for the rest of a body left unread. ``guarded_protocol`` binds it to a guard; uvicorn
    makes one per connection (``uvicorn.Config(http=...)`` takes an ``asyncio.Protocol``)."""

    guard: ClassVar[ConnectionGuard]

    def __init__(self, **server: Any) -> None:
        # What uvicorn gives its protocol (its config and state) goes to its own protocol as is.
        self.server = AutoHTTPProtocol(**server)
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.ends: Ends | None = None
        """Its two ends, by which its requests find it (``ConnectionGuard.serving``)."""
        self.phase: Phase = "head"
        self.head_bytes = 0
        """Bytes of the request head so far."""
        self._tail = b""
        """The last bytes of the head so far: its end may be split across two reads."""
        self.body_bytes = 0
        """Bytes after the request head (its body, and whatever follows it), while in flight."""
        self.body_left: int | None = None
        """Of an unread body: the bytes still to come (None: not known, a chunked body)."""
        self.probes_only = False
        """The connection is in the probes' reserve, beyond the cap."""
        self.sending = False
        """The app's answer is being written (``sending_answer``)."""
        self.answering = False
        """The app's answer has begun and not ended."""
        self.closes_for_body = False
        """The answer closes the connection for a body of unknown length left unread
        (``sending_answer``): the rest of the body is read and dropped first."""
        self.holds_head = False
        """The next write is the head of an answer whose body follows at once (``hold``)."""
        self._head: bytes | None = None
        self._served = False
        self._discarding = False
        """uvicorn closed the connection with a body still coming: it is read and dropped."""
        self._refusing = False
        """herald answered what uvicorn's parser refused: uvicorn's own answer is dropped."""
        self._head_clock: asyncio.TimerHandle | None = None
        self._body_clock: asyncio.TimerHandle | None = None

    # The asyncio protocol methods, passed on to uvicorn's protocol.

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream connection's transport (uvloop's is not an asyncio.Transport subclass).
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        self.ends = ends_of(transport)
        admission = self.guard.admit(self)
        if admission == "refused":
            self._answer_and_close(503, "server_busy", _BUSY, _BUSY_HEADERS)
            return
        self.probes_only = admission == "probes only"
        self._served = True
        self._start_head_clock()
        self.server.connection_made(_Relay(self, transport))

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_clock()
        self._stop_body_clock()
        self.guard.forget(self)
        if self._served:
            self.server.connection_lost(exc)

    def eof_received(self) -> bool | None:
        if self._discarding:
            return None  # the transport closes
        return self.server.eof_received()

    def pause_writing(self) -> None:
        self.server.pause_writing()

    def resume_writing(self) -> None:
        self.server.resume_writing()

    def data_received(self, data: bytes) -> None:
        if self._discarding:
            self._count_unread_body(data)
            if self.phase == "head":  # the body ended: nothing is left to read
                self._close()
            return
        if self._account(data):
            self.server.data_received(data)

    # What the bytes are: head, body, or an unread body's rest.

    def _account(self, data: bytes) -> bool:
        """Count ``data`` into the request head, the request's body or an unread body's rest;
        whether the server may read it (not a head over the limit)."""
        if self.phase == "unread body":
            data = self._count_unread_body(data)
        if self.phase == "request":
            self.body_bytes += len(data)
            return True
        if not data:
            return True
        window = self._tail + data
        end = window.find(b"\r\n\r\n")
        if end < 0:
            # A head begun and not ended: its deadline runs from its first byte. (One that
            # comes whole in one read, as a client sends it, never needs a clock at all.)
            self._start_head_clock()
            self.head_bytes += len(data)
            self._tail = window[-3:]
            if self.head_bytes > MAX_HEAD_BYTES:
                self._answer_and_close(431, "head_too_large", _HEAD_TOO_LARGE)
                return False
            return True
        head_end = end + 4 - len(self._tail)  # where the head ends in data
        self.head_bytes += head_end
        if self.head_bytes > MAX_HEAD_BYTES:
            self._answer_and_close(431, "head_too_large", _HEAD_TOO_LARGE)
            return False
        self._stop_head_clock()
        self.phase = "request"
        self.body_bytes = len(data) - head_end
        self.guard.busy(self)
        return True

    def _count_unread_body(self, data: bytes) -> bytes:
        """Count ``data`` into the rest of an unread body; what follows the body's end."""
        if self.body_left is None:
            return b""
        if len(data) < self.body_left:
            self.body_left -= len(data)
            return b""
        rest = data[self.body_left :]
        self._next_head()
        return rest

    def request_began(self) -> None:
        """The app got a request: a pipelined one's head was read while the request before it
        was in flight."""
        if self.phase == "head":
            self._stop_head_clock()
            self.phase, self.body_bytes = "request", 0
            self.guard.busy(self)

    def has_body_bytes(self, length: int | None) -> bool:
        """Whether the request in flight has ``length`` bytes of body here already (None: a
        chunked body, whose end only the parser knows)."""
        return length is not None and self.phase == "request" and self.body_bytes >= length

    def probes_only_refuses(self, path: str) -> bool:
        """Whether a request for ``path`` is refused (``busy_refusal``): the connection is in
        the probes' reserve, and the request is not a probe."""
        return self.probes_only and path not in PROBES

    def sending_answer(self, message: Message, body_read: bool, length: int | None) -> Message:
        """A message of the app's answer, as it is to be written now (``sending`` until it is):
        an answer on the probes' reserve, or one that leaves a body of unknown length unread,
        closes the connection. ``body_read``: the request's body was read to its end;
        ``length``: the body's length by the request's head (None: chunked)."""
        if message["type"] == "http.response.start":
            self.closes_for_body = not body_read and length is None
            if self.probes_only or self.closes_for_body:  # a probe on the reserve: one only
                headers = [*message.get("headers", []), (b"connection", b"close")]
                message = {**message, "headers": headers}
            self.answering = True
            # An answer of known length is whole at once (its body is sent next): its head is
            # written with its body, in one write rather than two.
            self.holds_head = any(
                name == b"content-length" for name, _ in message.get("headers", ())
            )
        else:
            self.holds_head = False  # whatever was to be held has been written, or never was
        self.sending = True
        return message

    def hold(self, head: bytes) -> None:
        """Keep the answer's head (``holds_head``) to write with what follows it."""
        self.holds_head = False
        self._head = head

    def held(self) -> bytes | None:
        """The answer's head kept to be written, if any; it is the caller's to write now."""
        head, self._head = self._head, None
        return head

    def write_held(self) -> None:
        """Write the answer's head kept for its body, which was not written (an answer to HEAD
        has none; an app may fail before it)."""
        self.holds_head = False
        head = self.held()
        if head is not None and self.transport is not None and not self.transport.is_closing():
            self.transport.write(head)

    def answered(self, body_read: bool, body_length: int | None) -> None:
        """The app's answer was sent: the connection waits for its next
        request. A body not read to its end (an early answer, say) is discarded as it comes,
        by uvicorn, and must end within the body timeout; ``body_length`` is its length when
        known (``content-length``), else its answer closed the connection."""
        if self.transport is None or self.transport.is_closing():
            return
        self.guard.waiting(self)
        if body_read:
            self._next_head()
            if self._discarding:  # uvicorn closed it: nothing is left to read
                self._close()
            return
        left = None if body_length is None else body_length - self.body_bytes
        if left is not None and left <= 0:
            self._next_head()  # it came whole meanwhile
            return
        self.phase, self.body_left = "unread body", left
        if self._body_clock is None:
            self._body_clock = self.loop.call_later(self.guard.body_timeout_s, self._body_late)

    def _next_head(self) -> None:
        self._stop_body_clock()
        self.phase, self.body_left = "head", None
        self.head_bytes, self._tail, self.body_bytes = 0, b"", 0

    def discard(self) -> bool:
        """uvicorn closes the connection: whether it is kept open a while to read and drop the
        rest of a body herald closes it for (closed at once, the client might get a reset
        before the answer)."""
        if not self.closes_for_body or self._discarding:
            return False
        self._discarding = True
        return True

    def refused_by_server(self) -> None:
        """uvicorn's parser refused the request and uvicorn answers 400 in its own words:
        herald answers in its shape instead, unless an answer is under way (it cannot be
        followed by another: the connection is only closed)."""
        self._refusing = True
        if self.answering:
            self._stop_head_clock()
            self._close()
            return
        self._answer_and_close(400, "bad_request", _NOT_HTTP)

    @property
    def refusing(self) -> bool:
        return self._refusing

    # Deadlines, and closing.

    def _body_late(self) -> None:
        """The body of an answered request did not end in time: nothing is left to answer."""
        self._body_clock = None
        self._close()

    def _stop_body_clock(self) -> None:
        if self._body_clock is not None:
            self._body_clock.cancel()
            self._body_clock = None

    def evict(self) -> None:
        """Close the connection to make room for a new one."""
        self._stop_head_clock()
        self._stop_body_clock()
        self._close()

    def _start_head_clock(self) -> None:
        if self._head_clock is None:
            self._head_clock = self.loop.call_later(self.guard.head_timeout_s, self._head_timed_out)

    def _stop_head_clock(self) -> None:
        if self._head_clock is not None:
            self._head_clock.cancel()
            self._head_clock = None

    def _head_timed_out(self) -> None:
        self._head_clock = None
        if self.transport is None or self.transport.is_closing() or self.phase != "head":
            return
        if not self.head_bytes or self.answering:  # nothing to answer, or an answer under way
            self._close()
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
        assert self.transport is not None
        self.transport.write(_raw_response(status, code, message, headers or {}))
        self._close()

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class _Relay(asyncio.Transport):
    """The transport uvicorn's protocol writes to: the connection's own, but for what herald
    answers instead (a request uvicorn's parser refused), and a close that waits for the rest of
    an unread body (``GuardedConnection.discard``)."""

    def __init__(self, connection: GuardedConnection, transport: asyncio.Transport) -> None:
        super().__init__()
        self._guarded = connection
        self._transport = transport
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        connection = self._guarded
        if connection.refusing or self._closing:
            return
        if not connection.sending and bytes(data[:13]) == _SERVER_400:
            # uvicorn has no hook for the answer to what its parser refuses: it writes it
            # here, outside any answer of the app.
            connection.refused_by_server()
            return
        if connection.holds_head:
            connection.hold(bytes(data))
            return
        head = connection.held()
        if head is not None:
            self._transport.writelines((head, data))
            return
        self._transport.write(data)

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        for data in list_of_data:
            self.write(data)

    def close(self) -> None:
        if self._closing:
            self._transport.close()  # again: uvicorn shuts down, it waits no longer
            return
        self._guarded.write_held()
        self._closing = True
        if not self._guarded.discard():
            self._transport.close()

    def is_closing(self) -> bool:
        return self._closing or self._transport.is_closing()

    def abort(self) -> None:
        self._closing = True
        self._transport.abort()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def write_eof(self) -> None:
        self._transport.write_eof()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)


def guarded_protocol(guard: ConnectionGuard) -> type[GuardedConnection]:
    """The protocol class to give ``uvicorn.Config(http=...)``, bound to ``guard``; the app it
    serves, made with the same guard (``create_app(connections=...)``), tells each connection
    of its answers (``herald.http.middleware``). The server is to run with
    ``proxy_headers=False`` (the app reads a proxy's headers itself, ``trusted_proxies``): a
    client address they rewrote would name no connection."""
    return type("GuardedConnection", (GuardedConnection,), {"guard": guard})


_SERVER_400 = b"HTTP/1.1 400 "
_HEAD_TOO_LARGE = (
    f"the request line and headers are over {MAX_HEAD_BYTES // 1024} KiB; send smaller headers"
)
_BUSY = "herald holds as many connections as it can, all busy; retry shortly"
_BUSY_HEADERS = {"retry-after": str(BUSY_RETRY_AFTER_S)}
_NOT_HTTP = (
    "the request is not valid HTTP/1.1: a control character in a header, or a malformed"
    " request line, header or chunk; fix the request"
)


def ends_of(transport: asyncio.BaseTransport) -> Ends | None:
    """The two ends of a TCP connection, as its transport names them (asyncio's ``sockname``
    and ``peername``: for IPv6, the host and port come first); None when not known (the
    connection was reset as it was accepted) or not TCP."""
    local = transport.get_extra_info("sockname")
    remote = transport.get_extra_info("peername")
    if not (isinstance(local, tuple | list) and isinstance(remote, tuple | list)):
        return None
    return str(local[0]), int(local[1]), str(remote[0]), int(remote[1])


def body_length(scope: Scope) -> int | None:
    """The request body's length by its head: 0 without one, None when chunked."""
    length = 0
    for name, value in scope["headers"]:
        if name == b"transfer-encoding":
            return None
        if name == b"content-length":
            with contextlib.suppress(ValueError):
                length = int(value)
    return length


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


busy_refusal = _refusal(503, "server_busy", _BUSY, _BUSY_HEADERS)
"""The answer to a request other than a probe on a connection in the probes' reserve."""
