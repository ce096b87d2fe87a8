"""A minimal client of herald's MCP Events (``events/poll``, ``events/stream``) on the
2026-07-28 era, in raw asyncio: each call is one ``POST /mcp`` carrying its own ``_meta``
(protocol version, client info, capabilities) and the ``mcp-protocol-version`` and
``mcp-method`` headers, with no session and no handshake.

A poll is answered as JSON (read with ``loadgen.Connection``, which needs its
Content-Length); a stream is answered as a chunked SSE body held open for as long as the
subscription lasts, read by ``EventStreamProtocol`` as ``mcp_client.StreamProtocol`` reads a
session's GET stream: decoded in ``data_received`` (``herald.sse.SSEDecoder``), no task per
stream. It only ever talks to the address it is given (127.0.0.1 in this harness).
"""

from __future__ import annotations

import json
import time
from typing import Any

from benchmarks.loadgen import HEAD_END, Address, Connection, HttpFailure
from benchmarks.mcp_client import StreamProtocol, take_chunks

PROTOCOL_VERSION = "2026-07-28"
EVENT_NAME = "herald.event"
ACTIVE = '"method":"notifications/events/active"'
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "herald-bench", "version": "1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def events_request(
    address: Address, token: str, method: str, params: dict[str, Any], request_id: int | str
) -> bytes:
    """One complete ``POST /mcp`` carrying a 2026-07-28 JSON-RPC request."""
    body = json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": method,
         "params": {"_meta": META, **params}},
        separators=(",", ":"),
    ).encode()  # fmt: skip
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: {address.host}:{address.port}\r\n"
        f"Authorization: Bearer {token}\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
        f"MCP-Protocol-Version: {PROTOCOL_VERSION}\r\nMcp-Method: {method}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


def poll_request(
    address: Address, token: str, cursor: str | None, max_events: int, request_id: int
) -> bytes:
    params: dict[str, Any] = {"name": EVENT_NAME, "cursor": cursor}
    if cursor is not None:
        params["maxEvents"] = max_events
    return events_request(address, token, "events/poll", params, request_id)


async def poll(connection: Connection, request: bytes) -> dict[str, Any]:
    """Send one ``events/poll``; returns its result.

    Raises:
        HttpFailure: the answer was not 200, or was a JSON-RPC error.
    """
    status, body = await connection.call(request)
    if status != 200:
        raise HttpFailure(f"events/poll answered {status}: {body[:300]!r}")
    answer = json.loads(body)
    if "result" not in answer:
        raise HttpFailure(f"events/poll failed: {answer!r:.300}")
    return dict(answer["result"])


def stream_request(address: Address, token: str, request_id: str) -> bytes:
    """An ``events/stream`` from a null cursor: it starts at the agent's oldest open event."""
    params = {"name": EVENT_NAME, "cursor": None}
    return events_request(address, token, "events/stream", params, request_id)


class EventStreamProtocol(StreamProtocol):
    """One ``events/stream`` subscription: writes the POST, then decodes its chunked SSE answer
    as it arrives. ``answered`` is set at ``notifications/events/active`` (from then on the
    subscription follows the agent's live events); the data of every other message goes to the
    inbox, stamped with its arrival time."""

    _refused = False

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        buffer = self._buffer
        buffer += data
        if not self._opened:
            end = buffer.find(HEAD_END)
            if end < 0:
                return
            head = bytes(buffer[:end])
            del buffer[: end + len(HEAD_END)]
            self._opened = True
            if b"text/event-stream" not in head.lower():  # a refusal, answered as plain JSON
                self._refused = True
                self.answered.set_exception(
                    HttpFailure(f"events/stream answered {head[:200]!r} {bytes(buffer[:300])!r}")
                )
        if self._refused:
            return
        events = self._events
        more = take_chunks(buffer, events)
        for event in self._decoder.feed(bytes(events)):
            if not event.data:
                continue
            if not self.answered.done() and ACTIVE in event.data:
                self.answered.set_result(200)
            else:
                self._inbox.receipts.add(event.data, now)
        events.clear()
        if not more and not self.answered.done():
            self.answered.set_exception(HttpFailure("events/stream ended before it was active"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._inbox.closed_streams += 1
        if not self.answered.done():
            self.answered.set_exception(HttpFailure(f"events/stream closed early: {exc}"))
