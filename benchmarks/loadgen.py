"""A minimal HTTP/1.1 keep-alive load generator over ``asyncio.open_connection``.

It is kept light on purpose so that on a 2-core machine it is not what gets measured: requests
are serialized once up front, and a response is read as its head (status line and
Content-Length only) plus that many body bytes. Every run is bounded by a request count and by
a deadline, and only ever talks to the address it is given (127.0.0.1 in this harness).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

HEAD_END = b"\r\n\r\n"
LENGTH_HEADER = b"\r\ncontent-length:"


class HttpFailure(Exception):
    """The server answered something the generator cannot read, or closed the connection."""


@dataclass(frozen=True)
class Address:
    host: str
    port: int


def encode_request(
    method: str,
    path: str,
    address: Address,
    *,
    token: str | None = None,
    body: bytes | None = None,
) -> bytes:
    """One complete HTTP/1.1 request, ready to be written again and again."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {address.host}:{address.port}"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")
    return head + (body or b"")


def _content_length(head: bytes) -> int:
    start = head.lower().find(LENGTH_HEADER)
    if start < 0:
        raise HttpFailure(f"response without Content-Length: {head[:200]!r}")
    start += len(LENGTH_HEADER)
    return int(head[start : head.index(b"\r\n", start)])


class Connection:
    """One keep-alive connection carrying one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def open(cls, address: Address) -> Connection:
        reader, writer = await asyncio.open_connection(address.host, address.port, limit=1 << 22)
        return cls(reader, writer)

    async def call(self, request: bytes) -> tuple[int, bytes]:
        """Send a pre-serialized request; returns the status code and the body."""
        self._writer.write(request)
        await self._writer.drain()
        try:
            head = await self._reader.readuntil(HEAD_END)
            length = _content_length(head)
            body = await self._reader.readexactly(length) if length else b""
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            raise HttpFailure(f"unreadable response: {exc}") from exc
        return int(head[9:12]), body

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()


async def open_connections(address: Address, count: int) -> list[Connection]:
    return list(await asyncio.gather(*(Connection.open(address) for _ in range(count))))


async def close_connections(connections: list[Connection]) -> None:
    await asyncio.gather(*(connection.close() for connection in connections))


@dataclass
class ClosedLoopResult:
    """Requests answered by N connections, each sending its next request on the last answer."""

    requests: int = 0
    wall_s: float = 0.0
    statuses: Counter[int] = field(default_factory=Counter)
    latencies_s: list[float] = field(default_factory=list)
    failures: dict[int, bytes] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.requests / self.wall_s if self.wall_s else 0.0


async def closed_loop(
    connections: list[Connection],
    request: bytes,
    *,
    max_requests: int,
    max_seconds: float,
) -> ClosedLoopResult:
    """Keep every connection busy until ``max_requests`` were sent or ``max_seconds`` passed."""
    result = ClosedLoopResult()
    budget = [max_requests]
    start = time.perf_counter()
    deadline = start + max_seconds

    async def worker(connection: Connection) -> None:
        while budget[0] > 0 and time.perf_counter() < deadline:
            budget[0] -= 1
            sent = time.perf_counter()
            status, body = await connection.call(request)
            result.latencies_s.append(time.perf_counter() - sent)
            result.statuses[status] += 1
            if status >= 400:
                result.failures.setdefault(status, body[:300])

    await asyncio.gather(*(worker(connection) for connection in connections))
    result.wall_s = time.perf_counter() - start
    result.requests = sum(result.statuses.values())
    return result


@dataclass
class OpenLoopResult:
    """Requests sent on a fixed schedule, whatever the answers before them."""

    rate: float
    planned: int
    wall_s: float = 0.0
    statuses: Counter[int] = field(default_factory=Counter)
    from_schedule_s: list[float] = field(default_factory=list)
    from_send_s: list[float] = field(default_factory=list)
    send_lag_s: list[float] = field(default_factory=list)
    unfinished: int = 0


async def open_loop(
    connections: list[Connection],
    request: bytes,
    *,
    rate: float,
    seconds: float,
    grace_s: float = 5.0,
) -> OpenLoopResult:
    """Send ``rate`` requests a second for ``seconds``, request i due at ``start + i / rate``.

    A request waits for an idle connection if none is free; that wait counts in its latency
    measured from the schedule (so a stalled server cannot hide behind a slowed-down sender),
    not in its latency measured from the moment it was written.
    """
    result = OpenLoopResult(rate=rate, planned=round(rate * seconds))
    idle: asyncio.Queue[Connection] = asyncio.Queue()
    for connection in connections:
        idle.put_nowait(connection)
    tasks: set[asyncio.Task[None]] = set()

    async def send(due: float) -> None:
        connection = await idle.get()
        sent = time.perf_counter()
        try:
            status, _ = await connection.call(request)
        finally:
            idle.put_nowait(connection)
        done = time.perf_counter()
        result.statuses[status] += 1
        result.from_schedule_s.append(done - due)
        result.from_send_s.append(done - sent)
        result.send_lag_s.append(sent - due)

    start = time.perf_counter() + 0.01
    for index in range(result.planned):
        due = start + index / rate
        await _sleep_until(due)
        task = asyncio.create_task(send(due))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        _, pending = await asyncio.wait(set(tasks), timeout=grace_s)
        result.unfinished = len(pending)
        for task in pending:
            task.cancel()
    result.wall_s = time.perf_counter() - start
    return result


async def _sleep_until(due: float) -> None:
    delay = due - time.perf_counter()
    if delay > 0.0005:
        await asyncio.sleep(delay)
    elif delay > 0:
        await asyncio.sleep(0)


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in 0..1) of unsorted values; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = min(len(ordered), max(1, math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


async def send_all(connections: list[Connection], requests: list[bytes]) -> Counter[int]:
    """Send each request once, spread over the connections; returns the statuses answered."""
    statuses: Counter[int] = Counter()
    pending = iter(requests)

    async def worker(connection: Connection) -> None:
        for request in pending:
            status, _ = await connection.call(request)
            statuses[status] += 1

    await asyncio.gather(*(worker(connection) for connection in connections))
    return statuses


@dataclass
class ScheduledResult:
    """Distinct requests sent on a fixed schedule: for each, when it was due, when it was
    written, when its answer ended (NaN if it never did), its status and its body."""

    rate: float
    due: list[float]
    sent: list[float]
    done: list[float]
    statuses: list[int]
    bodies: list[bytes]
    wall_s: float = 0.0
    unfinished: int = 0


async def open_loop_each(
    connections: list[Connection],
    requests: Sequence[bytes],
    *,
    rate: float,
    grace_s: float = 5.0,
) -> ScheduledResult:
    """Like ``open_loop``, but request i is ``requests[i]``, due at ``start + i / rate``, and
    each answer is kept (for callers that need what the server said about that request)."""
    count = len(requests)
    nan = math.nan
    result = ScheduledResult(
        rate, [nan] * count, [nan] * count, [nan] * count, [0] * count, [b""] * count
    )
    idle: asyncio.Queue[Connection] = asyncio.Queue()
    for connection in connections:
        idle.put_nowait(connection)
    tasks: set[asyncio.Task[None]] = set()

    async def send(index: int) -> None:
        connection = await idle.get()
        result.sent[index] = time.perf_counter()
        try:
            status, body = await connection.call(requests[index])
        except (HttpFailure, OSError, RuntimeError) as exc:  # counted as status 0, with why
            status, body = 0, repr(exc).encode()
        finally:
            idle.put_nowait(connection)
        result.done[index] = time.perf_counter()
        result.statuses[index] = status
        result.bodies[index] = body

    start = time.perf_counter() + 0.01
    for index in range(count):
        due = start + index / rate
        result.due[index] = due
        await _sleep_until(due)
        task = asyncio.create_task(send(index))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        _, pending = await asyncio.wait(set(tasks), timeout=grace_s)
        result.unfinished = len(pending)
        for task in pending:
            task.cancel()
    result.wall_s = time.perf_counter() - start
    return result


async def send_each(
    connections: list[Connection], requests: Sequence[bytes]
) -> list[tuple[int, bytes]]:
    """Send each request once, spread over the connections; returns (status, body) in order."""
    answers: list[tuple[int, bytes]] = [(0, b"")] * len(requests)
    pending = iter(range(len(requests)))

    async def worker(connection: Connection) -> None:
        for index in pending:
            answers[index] = await connection.call(requests[index])

    await asyncio.gather(*(worker(connection) for connection in connections))
    return answers
