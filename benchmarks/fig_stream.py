"""Figures 8a-8c: herald's SSE stream ``GET /channel/stream``, beside the bare SSE broadcast
of ``stream_baseline.py`` (uvicorn + Starlette, no store), both subprocesses driven by the same
raw asyncio stream clients (``mcp_client.StreamProtocol``: chunked SSE decoded in
``data_received``, no task per stream).

8a: the server's RSS (``/proc/PID/status``) before and after opening N streams for one agent,
over N. 8b: one event published to that agent, until it reached all N streams. 8c: 100
streams, one per agent, an open loop of events spread over them; publish-to-receipt latency.
"""

from __future__ import annotations

import asyncio
import json
import math
import resource
import statistics
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.config import Sizes
from benchmarks.cpu import Probe, Usage
from benchmarks.loadgen import (
    Address,
    HttpFailure,
    close_connections,
    encode_request,
    open_connections,
    open_loop_each,
    percentile,
    send_each,
)
from benchmarks.mcp_client import Inbox, Receipts, StreamProtocol, take_chunks
from benchmarks.results import Figure, Measurement, Target
from benchmarks.server import Server, create_agents, herald_server, stream_server

MARKER = '"text":"K'
OPEN_AT_ONCE = 200
OPEN_TIMEOUT_S = 120.0
PADDING = "x" * 40


@dataclass
class Arrivals(Receipts):
    """For each event (by the tag in its text): how many streams got it, first and last time."""

    count: dict[str, int] = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)

    def add(self, payload: str, now: float) -> None:
        start = payload.find(MARKER)
        if start < 0:
            self.other += 1
            return
        start += len(MARKER)
        key = payload[start : payload.index('"', start)]
        self.count[key] = self.count.get(key, 0) + 1
        self.at.setdefault(key, now)
        self.last[key] = now


class SseProtocol(StreamProtocol):
    """``mcp_client.StreamProtocol`` for ``GET /channel/stream`` (herald's and the baseline's):
    the chunked body is decoded as it arrives and the data of each complete event goes to the
    inbox, stamped with its arrival time."""

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        buffer = self._buffer
        buffer += data
        if not self._opened:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            status = int(bytes(buffer[:end]).split(b" ", 2)[1])
            del buffer[: end + 4]
            self._opened = True
            if not self.answered.done():
                if status == 200:
                    self.answered.set_result(status)
                else:
                    self.answered.set_exception(HttpFailure(f"GET /channel/stream: {status}"))
        events = self._events
        if not take_chunks(buffer, events):
            return
        for event in self._decoder.feed(bytes(events)):
            self._inbox.receipts.add(event.data, now)
        events.clear()


@dataclass
class Side:
    """One server under test: how to open a stream and how to publish to one token's agent.
    ``bare``: the broadcast of ``stream_baseline.py``, which publishes on ``POST /publish``."""

    name: str
    server: Server
    tokens: list[str]
    handles: list[str]
    bare: bool = False

    def stream_request(self, token: str) -> bytes:
        address = self.server.address
        return (
            f"GET /channel/stream HTTP/1.1\r\nHost: {address.host}:{address.port}\r\n"
            f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
        ).encode()

    def protocol(self, request: bytes, inbox: Inbox) -> StreamProtocol:
        """The client side of one stream: it writes ``request`` and reads the answer."""
        return SseProtocol(request, inbox)

    def publish_request(self, index: int, tag: str) -> bytes:
        text = f"K{tag}"
        token: str | None
        body: dict[str, Any]
        if not self.bare:
            body = {"to": self.handles[index], "type": "bench.stream", "text": text,
                    "data": {"pad": PADDING}}  # fmt: skip
            path, token = "/v1/events", self.server.admin_key
        else:
            event: dict[str, Any] = {"id": f"evt_{tag:0>26}", "agent": self.tokens[index], "seq": 1,
                     "type": "bench.stream", "text": text, "data": {"pad": PADDING},
                     "created_at": "2026-01-01T00:00:00.000Z", "status": "pending"}  # fmt: skip
            body = {"to": self.tokens[index], "seq": 1, "data": event}
            path, token = "/publish", None
        raw = json.dumps(body).encode()
        return encode_request("POST", path, self.server.address, token=token, body=raw)


@asynccontextmanager
async def _side(name: str, workdir: Path, agents: int) -> AsyncIterator[Side]:
    if name == "herald":
        async with herald_server(workdir, "stream-herald") as server:
            handles = [f"s{index:04d}" for index in range(agents)]
            yield Side(name, server, await create_agents(server, handles), handles)
    else:
        async with stream_server(workdir, "stream-baseline") as server:
            tokens = [f"agent{index:04d}" for index in range(agents)]
            yield Side(name, server, tokens, tokens, bare=True)


def _raise_open_files(needed: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed and (hard == resource.RLIM_INFINITY or hard > soft):
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def _open_streams(side: Side, tokens: Sequence[str], inbox: Inbox) -> list[StreamProtocol]:
    loop = asyncio.get_running_loop()
    address: Address = side.server.address
    gate = asyncio.Semaphore(OPEN_AT_ONCE)
    streams: list[StreamProtocol] = []

    async def one(token: str) -> None:
        async with gate:
            request = side.stream_request(token)
            _, protocol = await loop.create_connection(
                lambda: side.protocol(request, inbox), address.host, address.port
            )
            streams.append(protocol)
            await asyncio.shield(protocol.answered)

    await asyncio.wait_for(asyncio.gather(*(one(token) for token in tokens)), OPEN_TIMEOUT_S)
    return streams


def _close(streams: list[StreamProtocol]) -> None:
    for stream in streams:
        stream.close()


@dataclass
class FanoutResult:
    kib_per_stream: float
    fanout_ms: float
    rounds_ms: list[float]
    open_s: float
    reached: int
    usage: Usage


async def _fanout(side: Side, count: int, rounds: int) -> FanoutResult:
    """8a and 8b on one side: ``count`` streams of agent 0, then ``rounds`` publishes."""
    pid = side.server.pid
    await asyncio.sleep(0.5)
    before = _rss_kib(pid)
    arrivals = Arrivals()
    inbox = Inbox()
    inbox.receipts = arrivals
    started = time.perf_counter()
    streams = await _open_streams(side, [side.tokens[0]] * count, inbox)
    open_s = time.perf_counter() - started
    try:
        await asyncio.sleep(1.0)
        after = _rss_kib(pid)
        connections = await open_connections(side.server.address, 1)
        times: list[float] = []
        reached = 0
        probe = Probe(pid)
        try:
            for round_ in range(rounds):
                tag = f"f{round_}"
                sent = time.perf_counter()
                await send_each(connections, [side.publish_request(0, tag)])
                deadline = sent + 10.0
                while arrivals.count.get(tag, 0) < count and time.perf_counter() < deadline:
                    await asyncio.sleep(0.002)
                reached = arrivals.count.get(tag, 0)
                end = arrivals.last.get(tag, math.inf) if reached == count else math.inf
                times.append((end - sent) * 1000)
                await asyncio.sleep(0.2)
        finally:
            await close_connections(connections)
        usage = probe.stop()
    finally:
        _close(streams)
    kib = (after - before) / count
    return FanoutResult(kib, statistics.median(times), times, open_s, reached, usage)


async def open_loop_latency(side: Side, sizes: Sizes) -> tuple[list[float], Usage, int]:
    """8c on one side: one stream per agent, an open loop of events spread over them."""
    arrivals = Arrivals()
    inbox = Inbox()
    inbox.receipts = arrivals
    agents = sizes.stream_agents
    streams = await _open_streams(side, side.tokens[:agents], inbox)
    try:
        count = int(sizes.stream_rate * (sizes.stream_seconds + sizes.warmup_seconds))
        tags = [f"l{index}" for index in range(count)]
        requests = [side.publish_request(index % agents, tag) for index, tag in enumerate(tags)]
        connections = await open_connections(side.server.address, sizes.stream_publishers)
        probe = Probe(side.server.pid)
        try:
            result = await open_loop_each(connections, requests, rate=sizes.stream_rate)
        finally:
            await close_connections(connections)
        await arrivals.wait_for(tags, time.perf_counter() + 5.0)
        usage = probe.stop()
    finally:
        _close(streams)
    skip = int(sizes.stream_rate * sizes.warmup_seconds)
    latencies = [
        (arrivals.at[tag] - due) * 1000 if tag in arrivals.at else math.inf
        for tag, due in zip(tags[skip:], result.due[skip:], strict=True)
    ]
    missing = sum(1 for value in latencies if math.isinf(value))
    return latencies, usage, missing


def _kib(label: str, result: FanoutResult, count: int) -> Measurement:
    details = {"streams": count, "open_s": round(result.open_s, 2)}
    text = f"{result.kib_per_stream:.1f} KiB/stream"
    return Measurement(label, result.kib_per_stream, "KiB", text=text, details=details)


def _fan_ms(label: str, result: FanoutResult, count: int) -> Measurement:
    details = {"streams": count, "reached": result.reached,
               "rounds_ms": [round(value, 1) for value in result.rounds_ms]}  # fmt: skip
    return Measurement(label, result.fanout_ms, "ms", usage=result.usage, details=details)


async def stream_figures(sizes: Sizes, workdir: Path) -> list[Figure]:
    count = sizes.stream_count
    limit = _raise_open_files(count + 1000)
    notes = [f"Open-file limit of the harness (inherited by the servers): {limit}."]
    if limit < count + 100:
        count = max(100, limit - 500)
        notes.append(f"Too few file descriptors for {sizes.stream_count} streams: {count} used.")
    fan: dict[str, FanoutResult] = {}
    lat: dict[str, tuple[list[float], Usage, int]] = {}
    for name in ("baseline", "herald"):
        async with _side(name, workdir, sizes.stream_agents) as side:
            fan[name] = await _fanout(side, count, sizes.stream_fanout_rounds)
            lat[name] = await open_loop_latency(side, sizes)
    memory = Figure(
        "8a",
        f"memory per SSE stream, {count:,} streams of one agent",
        _kib("bare SSE broadcast", fan["baseline"], count),
        Target("< 50 KiB per stream", "at_most", 50.0),
        herald=_kib("herald GET /channel/stream", fan["herald"], count),
        method=[
            "RSS of the server process (/proc/PID/status VmRSS) 0.5 s before and 1 s after"
            f" opening {count:,} streams with the same agent key as Bearer (200 opening at"
            " once), the difference over the count; the open time is in the details.",
        ],
        notes=notes,
    )
    fanout = Figure(
        "8b",
        f"one event to all {count:,} streams",
        _fan_ms("bare SSE broadcast", fan["baseline"], count),
        Target("< 1,000 ms", "at_most", 1000.0),
        herald=_fan_ms("herald", fan["herald"], count),
        method=[
            "With the streams of 8a open: one event published to their agent (herald: POST"
            " /v1/events with the admin key; baseline: POST /publish), from the write of the"
            " request to the arrival of the event at the last stream; the median of"
            f" {sizes.stream_fanout_rounds} publishes (all rounds in the details; a stream"
            " missed within 10 s makes the round infinite).",
        ],
    )
    latency = Figure(
        "8c",
        f"stream latency p99, {sizes.stream_rate:,.0f} events/s over {sizes.stream_agents} streams",
        _lat("bare SSE broadcast", lat["baseline"]),
        Target("p99 ≤ 2x the bare broadcast's", "ratio_at_most", 2.0),
        herald=_lat("herald", lat["herald"]),
        method=[
            f"{sizes.stream_agents} streams, one per agent; an open loop of"
            f" {sizes.stream_rate:,.0f} events/s, event i due at start + i / rate and addressed"
            f" to agent i mod {sizes.stream_agents}, over {sizes.stream_publishers} publish"
            f" connections, for {sizes.stream_seconds:.0f} s after a"
            f" {sizes.warmup_seconds:.0f} s warm-up. Latency from the scheduled time to the"
            " arrival of the event's bytes at its stream; one not arrived within 5 s is"
            " infinite.",
        ],
    )
    return [memory, fanout, latency]


def _lat(label: str, measured: tuple[list[float], Usage, int]) -> Measurement:
    latencies, usage, missing = measured
    p99 = percentile(latencies, 0.99)
    details = {"p50_ms": round(percentile(latencies, 0.5), 2), "p99_ms": round(p99, 2),
               "events": len(latencies), "missing": missing}  # fmt: skip
    return Measurement(label, p99, "ms", usage=usage, details=details)
