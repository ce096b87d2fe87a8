"""A minimal MCP client over streamable HTTP (the 2025-11-25 era), in raw asyncio.

It does what Claude Code does to get pushes, and nothing else: ``initialize`` (declaring
clientInfo.name ``claude-code``) and ``notifications/initialized`` as POSTs, then one GET
``/mcp`` held open as the session's SSE stream. It is kept light so that 200 sessions in this
process are not what gets measured: the handshakes run over a few keep-alive connections
(``loadgen``'s style, pre-serialized), and each session's GET stream is an ``asyncio.Protocol``
that decodes the chunked body and the SSE framing in ``data_received``, with no task or
coroutine per message. A pushed ``notifications/claude/channel`` is not parsed as JSON: the
``event_id`` of its meta is cut out of the bytes and stamped with the time its bytes arrived.
It only ever talks to the address it is given (127.0.0.1 in this harness).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from benchmarks.loadgen import HEAD_END, Address, HttpFailure
from herald.sse import SSEDecoder

PROTOCOL_VERSION = "2025-11-25"
CLIENT_NAME = "claude-code"
CHANNEL_METHOD = '"method":"notifications/claude/channel"'
EVENT_ID = '"event_id":"'
HANDSHAKE_TIMEOUT_S = 15.0
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {"roots": {"listChanged": True}, "elicitation": {"form": {}, "url": {}}},
        "clientInfo": {"name": CLIENT_NAME, "title": "Claude Code", "version": "2.1.328"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


@dataclass
class Receipts:
    """The pushes seen by every session: the arrival time of each channel notification, by the
    ``event_id`` of its meta (the first arrival; repeats are counted as duplicates)."""

    at: dict[str, float] = field(default_factory=dict)
    duplicates: int = 0
    other: int = 0

    def add(self, payload: str, now: float) -> None:
        start = payload.find(EVENT_ID)
        if start < 0 or CHANNEL_METHOD not in payload:
            self.other += 1  # a summary, a log line, anything but one event's channel push
            return
        start += len(EVENT_ID)
        key = payload[start : payload.index('"', start)]
        if key in self.at:
            self.duplicates += 1
        else:
            self.at[key] = now

    async def wait_for(self, keys: Sequence[str], deadline: float, poll_s: float = 0.005) -> int:
        """Wait until every key arrived or the deadline passed; returns how many are missing."""
        missing = [key for key in keys if key not in self.at]
        counted = len(self.at)
        while missing and time.perf_counter() < deadline:
            await asyncio.sleep(poll_s)
            if len(self.at) - counted < len(missing):
                continue  # too few arrivals since the last look for all of them to be in
            missing = [key for key in missing if key not in self.at]
            counted = len(self.at)
        return len(missing)


class Inbox:
    """Where the sessions put what they receive; the harness swaps ``receipts`` between phases."""

    def __init__(self) -> None:
        self.receipts = Receipts()
        self.closed_streams = 0


def _head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split(" ", 2)[1])
    except (IndexError, ValueError) as exc:
        raise HttpFailure(f"bad status line {lines[0]!r}") from exc
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name:
            headers[name.strip().lower()] = value.strip()
    return status, headers


def sse_payloads(body: bytes) -> list[str]:
    """The data of each complete SSE event in ``body``, empty data dropped."""
    return [event.data for event in SSEDecoder().feed(body) if event.data]


class HandshakeConnection:
    """A keep-alive connection for the handshake POSTs (answers may be JSON or a short SSE
    body, chunked or not)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def open(cls, address: Address) -> HandshakeConnection:
        reader, writer = await asyncio.open_connection(address.host, address.port, limit=1 << 20)
        return cls(reader, writer)

    async def call(self, request: bytes) -> tuple[int, dict[str, str], bytes]:
        self._writer.write(request)
        await self._writer.drain()
        try:
            status, headers = _head(await self._reader.readuntil(HEAD_END))
            if headers.get("transfer-encoding", "").lower() == "chunked":
                body = bytearray()
                while True:
                    size = int((await self._reader.readuntil(b"\r\n")).split(b";")[0], 16)
                    chunk = await self._reader.readexactly(size + 2)
                    if size == 0:
                        break
                    body += chunk[:-2]
                return status, headers, bytes(body)
            length = int(headers.get("content-length", "0"))
            body_bytes = await self._reader.readexactly(length) if length else b""
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            raise HttpFailure(f"unreadable response: {exc}") from exc
        return status, headers, body_bytes

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()


def _request(
    method: str,
    address: Address,
    token: str | None,
    session_id: str | None,
    accept: str,
    body: dict[str, Any] | None = None,
) -> bytes:
    lines = [f"{method} /mcp HTTP/1.1", f"Host: {address.host}:{address.port}", f"Accept: {accept}"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    if session_id is not None:
        lines += [f"Mcp-Session-Id: {session_id}", f"MCP-Protocol-Version: {PROTOCOL_VERSION}"]
    payload = b""
    if body is not None:
        payload = json.dumps(body).encode()
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload


async def handshake(connection: HandshakeConnection, address: Address, token: str | None) -> str:
    """``initialize`` then ``notifications/initialized``; returns the Mcp-Session-Id."""
    accept = "application/json, text/event-stream"
    status, headers, body = await connection.call(
        _request("POST", address, token, None, accept, INITIALIZE)
    )
    session_id = headers.get("mcp-session-id")
    if status != 200 or not session_id:
        raise HttpFailure(f"initialize answered {status}: {body[:300]!r}")
    is_sse = headers.get("content-type", "").startswith("text/event-stream")
    answer = json.loads(sse_payloads(body)[0] if is_sse else body)
    if answer.get("result", {}).get("protocolVersion") != PROTOCOL_VERSION:
        raise HttpFailure(f"initialize did not settle on {PROTOCOL_VERSION}: {answer!r:.300}")
    status, _, body = await connection.call(
        _request("POST", address, token, session_id, accept, INITIALIZED)
    )
    if status != 202:
        raise HttpFailure(f"notifications/initialized answered {status}: {body[:300]!r}")
    return session_id


class StreamProtocol(asyncio.Protocol):
    """One session's GET ``/mcp``: writes the request, then decodes the chunked SSE answer as it
    arrives (``herald.sse.SSEDecoder``) and hands each event's data to the inbox, stamped with
    its arrival time."""

    def __init__(self, request: bytes, inbox: Inbox) -> None:
        self._request = request
        self._inbox = inbox
        self._buffer = bytearray()
        self._events = bytearray()
        self._decoder = SSEDecoder()
        self._opened = False
        self.answered: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        self.transport = cast(asyncio.Transport, transport)
        self.transport.write(self._request)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        buffer = self._buffer
        buffer += data
        if not self._opened:
            end = buffer.find(HEAD_END)
            if end < 0:
                return
            status, headers = _head(bytes(buffer[:end]))
            del buffer[: end + len(HEAD_END)]
            self._opened = True
            chunked = headers.get("transfer-encoding", "").lower() == "chunked"
            if not self.answered.done():
                if status == 200 and chunked:
                    self.answered.set_result(status)
                else:
                    self.answered.set_exception(HttpFailure(f"GET /mcp answered {status}"))
        events = self._events
        if not take_chunks(buffer, events):
            return
        for event in self._decoder.feed(bytes(events)):
            if event.data:
                self._inbox.receipts.add(event.data, now)
        events.clear()

    def connection_lost(self, exc: Exception | None) -> None:
        self._inbox.closed_streams += 1
        if not self.answered.done():
            self.answered.set_exception(HttpFailure(f"GET /mcp closed before answering: {exc}"))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def take_chunks(buffer: bytearray, events: bytearray) -> bool:
    """Move the whole chunks of a chunked body from ``buffer`` to ``events`` (each is one SSE
    event or a part of one); False once the last chunk has come."""
    while True:
        line_end = buffer.find(b"\r\n")
        if line_end < 0:
            return True
        size = int(bytes(buffer[:line_end]).split(b";")[0], 16)
        if size == 0:
            del buffer[:]
            return False
        end = line_end + 2 + size
        if len(buffer) < end + 2:
            return True
        events += buffer[line_end + 2 : end]
        del buffer[: end + 2]


@dataclass
class Session:
    session_id: str
    token: str | None
    stream: StreamProtocol


async def open_stream(
    address: Address, token: str | None, session_id: str, inbox: Inbox
) -> StreamProtocol:
    """Open the session's GET stream and wait for its 200 (herald pushes only once it is open)."""
    request = _request("GET", address, token, session_id, "text/event-stream")
    loop = asyncio.get_running_loop()
    _, protocol = await loop.create_connection(
        lambda: StreamProtocol(request, inbox), address.host, address.port
    )
    try:
        await asyncio.wait_for(asyncio.shield(protocol.answered), HANDSHAKE_TIMEOUT_S)
    except BaseException:
        protocol.close()
        raise
    return protocol


async def open_sessions(
    address: Address, tokens: Sequence[str | None], inbox: Inbox, parallel: int = 8
) -> list[Session]:
    """One session per token (handshakes over ``parallel`` connections), each with its stream
    open; in the order of ``tokens``."""
    connections = [await HandshakeConnection.open(address) for _ in range(parallel)]
    sessions: list[Session | None] = [None] * len(tokens)
    pending = iter(range(len(tokens)))

    async def worker(connection: HandshakeConnection) -> None:
        for index in pending:
            token = tokens[index]
            session_id = await asyncio.wait_for(
                handshake(connection, address, token), HANDSHAKE_TIMEOUT_S
            )
            stream = await open_stream(address, token, session_id, inbox)
            sessions[index] = Session(session_id, token, stream)

    try:
        await asyncio.gather(*(worker(connection) for connection in connections))
    except BaseException:
        for session in sessions:
            if session is not None:
                session.stream.close()
        raise
    finally:
        await asyncio.gather(*(connection.close() for connection in connections))
    return [session for session in sessions if session is not None]


async def close_sessions(address: Address, sessions: Sequence[Session]) -> None:
    """Close each session's stream and end the session (DELETE /mcp)."""
    for session in sessions:
        session.stream.close()
    connection = await HandshakeConnection.open(address)
    try:
        for session in sessions:
            request = _request("DELETE", address, session.token, session.session_id, "*/*")
            await asyncio.wait_for(connection.call(request), HANDSHAKE_TIMEOUT_S)
    finally:
        await connection.close()
