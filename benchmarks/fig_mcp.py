"""Figures 6-7: herald's MCP push (``notifications/claude/channel`` on each session's GET SSE
stream), beside the bare ``mcp`` SDK pushing the same notifications (``mcp_baseline.py``).

Both sides are driven by the same client process: ``loadgen`` connections publish (herald: POST
/v1/events with the admin key; the SDK: POST /push naming the session), and ``mcp_client``
sessions, each a raw-asyncio GET stream that looks like Claude Code, stamp each push with the
time its bytes arrived. A push is matched to its publish by the event_id in its meta (herald's
answer to the publish gives the id; the SDK's pushes carry the id the harness chose).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.config import Sizes
from benchmarks.cpu import Probe, Usage
from benchmarks.loadgen import (
    close_connections,
    encode_request,
    open_connections,
    open_loop_each,
    percentile,
    send_each,
)
from benchmarks.mcp_client import Inbox, Receipts, Session, close_sessions, open_sessions
from benchmarks.profiling import Profiler
from benchmarks.results import (
    GENERATOR_LIMIT,
    Figure,
    Measurement,
    Target,
    noise_note,
    per_event_us,
    saturation_note,
    to_ms,
)
from benchmarks.server import Server, create_agents, herald_server, sdk_server

EVENT_TYPE = "bench.mcp"
GRACE_S = 5.0
BATCH = 1000
BURST_CONNECTIONS = 4
AGENT_PREFIX = "mcp-"
STACK = (
    "Both servers are subprocesses on the same stack: uvicorn (uvloop, httptools), Starlette,"
    " the SDK's StreamableHTTPSessionManager (stateful, SSE answers) in front of a low-level"
    " Server, bound to 127.0.0.1."
)
HERALD_SIDE = (
    "herald: `herald serve` on a fresh SQLite file (WAL, synchronous=FULL), one agent per"
    " session; an event is published with POST /v1/events (admin key), committed, then pushed"
    " by the session's delivery worker (which also records the attempt and marks the event sent"
    " in the store). Nobody acks, as a Claude Code session that has not yet acted on its events."
)
SDK_SIDE = (
    "Baseline (the ceiling): `benchmarks/mcp_baseline.py`, the bare SDK without herald. It"
    " captures each session's connection at notifications/initialized, and a plain POST /push"
    " {session, params} beside /mcp makes it send the same notifications/claude/channel (content"
    " and meta shaped and sized like herald's) on that session's GET stream."
)
CLIENT = (
    "Clients: one process (uvloop) holds the publisher's keep-alive connections and every MCP"
    " session. A session is `mcp_client`: initialize (clientInfo.name claude-code, protocol"
    " 2025-11-25) and notifications/initialized as POSTs, then its GET /mcp stream, decoded"
    " (chunked, SSE) in an asyncio.Protocol; a push is not parsed as JSON, its meta's event_id"
    " is cut out of the bytes. Each session has its own TCP connection for its stream."
)


def _content(tag: str, seq: int, event_id: str) -> str:
    """What herald's channel content looks like for the events published here (render.as_text)."""
    return (
        f"[{EVENT_TYPE}] push {tag}\ndata: {json.dumps({'tag': tag}, separators=(',', ':'))}\n"
        f"(event {event_id}, seq {seq}: call ack once handled)"
    )


class Side(ABC):
    """One server under test, as the client drives it: how to publish events to sessions, and
    which event_ids the pushes of a publish will carry."""

    label: str

    def __init__(self, server: Server, tokens: Sequence[str | None]) -> None:
        self.server = server
        self.tokens = list(tokens)
        self.sessions: list[Session] = []
        self.agents: list[int] = []
        """For each open session, the index of its token (and of its agent, for herald)."""

    @abstractmethod
    def publish(self, events: Sequence[tuple[str, int]]) -> bytes:
        """One request publishing events, each (tag, index of the target session)."""

    @abstractmethod
    def keys(self, tags: Sequence[str], status: int, body: bytes) -> list[str]:
        """The event_ids the pushes of an answered publish carry ([] if it failed)."""


class HeraldSide(Side):
    label = "herald"

    def __init__(self, server: Server, tokens: Sequence[str | None], handles: list[str]) -> None:
        super().__init__(server, tokens)
        self.handles = handles

    def publish(self, events: Sequence[tuple[str, int]]) -> bytes:
        items = [
            {"to": self.handles[self.agents[target]], "type": EVENT_TYPE, "text": f"push {tag}",
             "data": {"tag": tag}}
            for tag, target in events
        ]  # fmt: skip
        body = json.dumps(items if len(items) > 1 else items[0]).encode()
        address, key = self.server.address, self.server.admin_key
        return encode_request("POST", "/v1/events", address, token=key, body=body)

    def keys(self, tags: Sequence[str], status: int, body: bytes) -> list[str]:
        if status != 202:
            return []
        answer = json.loads(body)
        receipts = answer.get("events", [answer])
        return [str(receipt["id"]) for receipt in receipts]


class SdkSide(Side):
    label = "SDK"

    def __init__(self, server: Server, tokens: Sequence[str | None]) -> None:
        super().__init__(server, tokens)
        self._seq = 0

    def publish(self, events: Sequence[tuple[str, int]]) -> bytes:
        items = []
        for tag, target in events:
            self._seq += 1
            event_id = f"evt_{tag:0>26}"
            meta = {"event_id": event_id, "seq": str(self._seq), "type": EVENT_TYPE}
            params = {"content": _content(tag, self._seq, event_id), "meta": meta}
            items.append({"session": self.sessions[target].session_id, "params": params})
        body = json.dumps(items if len(items) > 1 else items[0]).encode()
        return encode_request("POST", "/push", self.server.address, body=body)

    def keys(self, tags: Sequence[str], status: int, body: bytes) -> list[str]:
        return [f"evt_{tag:0>26}" for tag in tags] if status == 202 else []


@asynccontextmanager
async def _herald(workdir: Path, name: str, agents: int) -> AsyncIterator[HeraldSide]:
    async with herald_server(workdir, name) as server:
        handles = [f"{AGENT_PREFIX}{index:03d}" for index in range(agents)]
        keys = await create_agents(server, handles)
        yield HeraldSide(server, keys, handles)


@asynccontextmanager
async def _sdk(workdir: Path, name: str, sessions: int) -> AsyncIterator[SdkSide]:
    async with sdk_server(workdir, name) as server:
        yield SdkSide(server, [None] * sessions)


@asynccontextmanager
async def _connected(side: Side, inbox: Inbox, agents: Sequence[int]) -> AsyncIterator[None]:
    """Open one session for each of these tokens (streams open); end them afterwards."""
    tokens = [side.tokens[index] for index in agents]
    side.sessions = await open_sessions(side.server.address, tokens, inbox)
    side.agents = list(agents)
    try:
        yield
    finally:
        await close_sessions(side.server.address, side.sessions)
        side.sessions, side.agents = [], []


# Figure 6: latency from the scheduled publish to the push's arrival


@dataclass
class LatencyRun:
    """One open-loop run: for each planned event, its latency from its scheduled publish time
    to the arrival of its push (inf if it never arrived)."""

    sessions: int
    planned: int
    latencies_s: list[float]
    answered_s: list[float]
    lag_s: list[float]
    failed_publishes: int
    duplicates: int
    usage: Usage

    @property
    def received(self) -> int:
        return sum(1 for value in self.latencies_s if math.isfinite(value))


async def _latency_run(
    side: Side, inbox: Inbox, *, connections: int, rate: float, seconds: float, tag: str
) -> LatencyRun:
    """Event i, due at start + i / rate, goes to session i mod N (round robin). The publisher's
    connections are opened for each run (uvicorn closes keep-alive connections idle for 5 s)."""
    sessions = len(side.sessions)
    count = max(1, round(rate * seconds))
    tags = [f"{tag}{index}" for index in range(count)]
    requests = [side.publish([(tags[index], index % sessions)]) for index in range(count)]
    inbox.receipts = receipts = Receipts()
    publishers = await open_connections(side.server.address, connections)
    try:
        probe = Probe(side.server.pid)
        result = await open_loop_each(publishers, requests, rate=rate, grace_s=GRACE_S)
        keys = [
            side.keys([tags[index]], result.statuses[index], result.bodies[index])
            for index in range(count)
        ]
        await receipts.wait_for([k for ks in keys for k in ks], time.perf_counter() + GRACE_S)
        usage = probe.stop()
    finally:
        await close_connections(publishers)
    latencies = []
    for index, own in enumerate(keys):
        arrived = receipts.at.get(own[0]) if own else None
        latencies.append(math.inf if arrived is None else arrived - result.due[index])
    answered = [done - due for done, due in zip(result.done, result.due, strict=True)]
    lag = [sent - due for sent, due in zip(result.sent, result.due, strict=True)]
    failed = sum(1 for own in keys if not own)
    return LatencyRun(sessions, count, latencies, answered, lag, failed, receipts.duplicates, usage)


def _latency_measurement(label: str, run: LatencyRun) -> Measurement:
    p50 = to_ms(percentile(run.latencies_s, 0.5))
    p99 = to_ms(percentile(run.latencies_s, 0.99))
    finite_answered = [value for value in run.answered_s if math.isfinite(value)]
    finite_lags = [value for value in run.lag_s if math.isfinite(value)]
    details: dict[str, Any] = {
        "received": f"{run.received:,} of {run.planned:,}",
        "sessions": run.sessions,
        "p99.9": f"{to_ms(percentile(run.latencies_s, 0.999)):.2f} ms",
        "max": f"{to_ms(max(run.latencies_s, default=math.nan)):.2f} ms",
        "publish answered p50/p99": f"{to_ms(percentile(finite_answered, 0.5)):.2f}"
        f" / {to_ms(percentile(finite_answered, 0.99)):.2f} ms",
        "sender lag p99": f"{to_ms(percentile(finite_lags, 0.99)):.2f} ms",
    }
    if run.failed_publishes:
        details["failed publishes"] = run.failed_publishes
    if run.duplicates:
        details["duplicate pushes"] = run.duplicates
    text = f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"
    return Measurement(label, p99, "ms", text=text, usage=run.usage, details=details)


async def _latency_side(
    side: Side, sizes: Sizes, profiler: Profiler | None
) -> tuple[LatencyRun, LatencyRun]:
    """On one server: 1 session (the last token's), then one for each of the others; a warm-up
    before each."""
    inbox = Inbox()
    rate, seconds, warmup = sizes.mcp_rate, sizes.mcp_seconds, sizes.warmup_seconds
    connections = sizes.mcp_publishers

    def run(tag: str, seconds: float) -> Awaitable[LatencyRun]:
        return _latency_run(
            side, inbox, connections=connections, rate=rate, seconds=seconds, tag=tag
        )

    async with _connected(side, inbox, [len(side.tokens) - 1]):
        await run("w", warmup)
        solo = await run("s", seconds)
    async with _connected(side, inbox, range(len(side.tokens) - 1)):
        await run("x", warmup)
        many = await run("m", seconds)
        if profiler is not None and isinstance(side, HeraldSide):
            await profiler.run(
                side.server.pid, "fig6b-mcp-latency",
                f"MCP push at {rate:g} events/s over {len(side.sessions)} sessions",
                run("p", seconds),
            )  # fmt: skip
    return solo, many


def _client_note(usages: list[Usage]) -> str:
    worst = max(usage.generator_share for usage in usages)
    if worst < GENERATOR_LIMIT:
        return (
            f"The client process (publisher and every MCP session) used at most {worst:.0%} of a"
            " core here (process CPU time over wall time), so it had headroom: it is not what"
            " these figures measure."
        )
    return (
        f"WARNING: the client process used {worst:.0%} of a core here: it may be part of what"
        " is measured."
    )


def _notes(usages: list[Usage], herald_usage: Usage) -> list[str]:
    notes = [_client_note(usages)]
    noise = noise_note(usages)
    if noise:
        notes.append(noise)
    saturation = saturation_note(herald_usage)
    if saturation:
        notes.append("herald: " + saturation[0].lower() + saturation[1:])
    return notes


def _lost_note(runs: list[tuple[str, LatencyRun]]) -> list[str]:
    notes = []
    for label, run in runs:
        lost = run.planned - run.received
        if lost:
            notes.append(
                f"{label}: {lost:,} of {run.planned:,} pushes did not arrive within"
                f" {GRACE_S:g} s; they count as infinitely late in the percentiles."
            )
    return notes


async def latency_figures(
    sizes: Sizes, workdir: Path, profiler: Profiler | None = None
) -> list[Figure]:
    n = sizes.mcp_sessions
    async with _sdk(workdir, "mcp-latency-sdk", n + 1) as sdk:
        sdk_solo, sdk_many = await _latency_side(sdk, sizes, None)
    async with _herald(workdir, "mcp-latency", n + 1) as herald:
        herald_solo, herald_many = await _latency_side(herald, sizes, profiler)
    rate = f"{sizes.mcp_rate:,.0f} events/s"
    method = [
        STACK,
        HERALD_SIDE,
        SDK_SIDE,
        CLIENT,
        f"Open loop: event i is due at start + i / {sizes.mcp_rate:g} s whatever happened before"
        f" (one event per publish request, over up to {sizes.mcp_publishers} keep-alive"
        " connections), addressed to session i mod N; latency runs from that scheduled time to"
        " the arrival of the push's bytes at its session, so a late publisher or a stalled"
        " server shows up in it. Pushes that never arrive count as infinitely late.",
        f"Each side: 1 session for {sizes.mcp_seconds:g} s, then {n} sessions (one agent each)"
        f" for {sizes.mcp_seconds:g} s, each after a {sizes.warmup_seconds:g} s warm-up at the"
        f" same rate, then up to {GRACE_S:g} s for the last pushes. The single session is its"
        " own agent's, ended (DELETE /mcp) before the others connect.",
    ]
    solo = Figure(
        "6a",
        f"MCP push latency, 1 session, {rate}",
        _latency_measurement("bare SDK, same schedule and clients", sdk_solo),
        Target("p99 ≤ 2x the bare SDK's", "ratio_at_most", 2.0),
        _latency_measurement("herald, publish to push", herald_solo),
        method=method,
    )
    solo.notes += _notes([sdk_solo.usage, herald_solo.usage], herald_solo.usage)
    solo.notes += _lost_note([("herald", herald_solo), ("SDK", sdk_solo)])
    many = Figure(
        "6b",
        f"MCP push latency, {n} sessions, {rate} in total",
        _latency_measurement("bare SDK, same schedule and clients", sdk_many),
        Target("p99 < 50 ms", "at_most", 50.0),
        _latency_measurement("herald, publish to push", herald_many),
        method=["As 6a, with the events spread round robin over all the sessions."],
    )
    many.notes += _notes([sdk_many.usage, herald_many.usage], herald_many.usage)
    many.notes += _lost_note([("herald", herald_many), ("SDK", sdk_many)])
    return [solo, many]


# Figure 7: push rate to many sessions


@dataclass
class Burst:
    sessions: int
    events: int
    received: int
    published_s: float
    first_s: float
    last_s: float
    failed_publishes: int
    duplicates: int
    usage: Usage

    @property
    def rate(self) -> float:
        return self.received / self.last_s if self.last_s > 0 else 0.0


async def _burst(side: Side, inbox: Inbox, per_session: int, seconds: float, tag: str) -> Burst:
    """Publish ``per_session`` events to every session in batches (events interleaved over the
    sessions, so each batch reaches all of them) over a few connections; wait for all pushes."""
    sessions = len(side.sessions)
    total = sessions * per_session
    tags = [f"{tag}{index}" for index in range(total)]
    batches = [
        [(tags[index], index % sessions) for index in range(start, min(start + BATCH, total))]
        for start in range(0, total, BATCH)
    ]
    requests = [side.publish(batch) for batch in batches]
    publishers = await open_connections(side.server.address, BURST_CONNECTIONS)
    inbox.receipts = receipts = Receipts()
    try:
        probe = Probe(side.server.pid)
        start = time.perf_counter()
        deadline = start + seconds
        answers = await asyncio.wait_for(send_each(publishers, requests), seconds)
        published = time.perf_counter() - start
        keys = []
        failed = 0
        for batch, (status, body) in zip(batches, answers, strict=True):
            own = side.keys([batch_tag for batch_tag, _ in batch], status, body)
            failed += len(batch) - len(own)
            keys += own
        await receipts.wait_for(keys, deadline)
        usage = probe.stop()
    finally:
        await close_connections(publishers)
    arrivals = [receipts.at[key] - start for key in keys if key in receipts.at]
    return Burst(
        sessions,
        total,
        len(arrivals),
        published,
        min(arrivals, default=math.nan),
        max(arrivals, default=math.nan),
        failed,
        receipts.duplicates,
        usage,
    )


async def _burst_side(side: Side, sizes: Sizes, profiler: Profiler | None) -> list[Burst]:
    """A warm-up burst, then the measured rounds, on the same sessions."""
    inbox = Inbox()
    seconds = sizes.mcp_burst_seconds
    async with _connected(side, inbox, range(len(side.tokens))):
        await _burst(side, inbox, 1, seconds, "w")
        bursts = [
            await _burst(side, inbox, sizes.mcp_burst_per_session, seconds, f"b{round_}-")
            for round_ in range(sizes.mcp_burst_rounds)
        ]
        if profiler is not None and isinstance(side, HeraldSide):
            await profiler.run(
                side.server.pid, "fig7-mcp-push",
                f"MCP push burst to {len(side.sessions)} sessions",
                _burst(side, inbox, sizes.mcp_burst_per_session, seconds, "p"),
            )  # fmt: skip
    return bursts


def _median(bursts: list[Burst]) -> Burst:
    return sorted(bursts, key=lambda burst: burst.rate)[(len(bursts) - 1) // 2]


def _burst_measurement(label: str, bursts: list[Burst]) -> Measurement:
    """The median round by rate, with every round's rate."""
    burst = _median(bursts)
    window = burst.last_s - burst.first_s
    details: dict[str, Any] = {
        "rounds": " / ".join(f"{each.rate:,.0f}" for each in bursts),
        "received": f"{burst.received:,} of {burst.events:,}",
        "sessions": burst.sessions,
        "all published after": f"{burst.published_s:.2f} s",
        "first push after": f"{to_ms(burst.first_s):.1f} ms",
        "last push after": f"{burst.last_s:.2f} s",
        "rate from first to last push": f"{burst.received / window:,.0f} events/s"
        if window > 0
        else "n/a",
    }
    if burst.failed_publishes:
        details["failed publishes"] = burst.failed_publishes
    if burst.duplicates:
        details["duplicate pushes"] = burst.duplicates
    server_s = [each.usage.server_s for each in bursts]
    cpu_us = None
    if None not in server_s:  # the server's CPU over the pushes of all rounds
        cpu_us = per_event_us(sum(s for s in server_s if s), sum(b.received for b in bursts))
    return Measurement(
        label, burst.rate, "events/s", usage=burst.usage, details=details, cpu_us=cpu_us
    )


async def push_figure(sizes: Sizes, workdir: Path, profiler: Profiler | None = None) -> Figure:
    n, per = sizes.mcp_sessions, sizes.mcp_burst_per_session
    async with _sdk(workdir, "mcp-push-sdk", n) as sdk:
        sdk_bursts = await _burst_side(sdk, sizes, None)
    async with _herald(workdir, "mcp-push", n) as herald:
        herald_bursts = await _burst_side(herald, sizes, profiler)
    sdk_burst, herald_burst = _median(sdk_bursts), _median(herald_bursts)
    figure = Figure(
        "7",
        f"MCP push rate, {n * per:,} events to {n} sessions",
        _burst_measurement("bare SDK, same batches and clients", sdk_bursts),
        Target("none set (reported)", "none", math.nan),
        _burst_measurement("herald, publish to last push", herald_bursts),
        method=[
            STACK,
            HERALD_SIDE,
            SDK_SIDE,
            CLIENT,
            f"A burst of {n * per:,} events, {per} for each of {n} sessions, interleaved so that"
            f" every request reaches all sessions: {math.ceil(n * per / BATCH)} requests of up to"
            f" {BATCH:,} events (herald: a JSON array to POST /v1/events; the SDK: an array to"
            f" POST /push, pushed in turn) sent over {BURST_CONNECTIONS} connections at once."
            " The rate is events received over the time from the first publish request to the"
            " last push's arrival (publishing included: it is the same process's work). After a"
            f" 1-event-per-session warm-up burst, {sizes.mcp_burst_rounds} rounds on the same"
            " sessions; each side shows its median round (the SDK's rate alone varies by up to 2x"
            f" from one round to the next); each round is bounded by {sizes.mcp_burst_seconds:g}"
            " s.",
            "CPU µs/event: the server's CPU time over the pushes received in all its rounds.",
        ],
    )
    figure.notes += _notes([sdk_burst.usage, herald_burst.usage], herald_burst.usage)
    for label, burst in (("herald", herald_burst), ("SDK", sdk_burst)):
        if burst.received < burst.events:
            figure.notes.append(
                f"{label}: only {burst.received:,} of {burst.events:,} pushes arrived within"
                f" {sizes.mcp_burst_seconds:g} s; the rate is over those."
            )
    return figure
