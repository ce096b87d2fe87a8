"""Figures 2-5: the HTTP API of a real ``herald serve`` on SQLite, driven by ``loadgen``."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import raw_sqlite
from benchmarks.config import Sizes
from benchmarks.cpu import Probe, Usage
from benchmarks.loadgen import (
    ClosedLoopResult,
    Connection,
    OpenLoopResult,
    close_connections,
    closed_loop,
    encode_request,
    open_connections,
    open_loop,
    percentile,
    send_all,
)
from benchmarks.measure import Run, Stopwatch, concurrent
from benchmarks.profiling import Profiler
from benchmarks.results import (
    Figure,
    Measurement,
    Target,
    generator_note,
    noise_note,
    saturation_note,
)
from benchmarks.server import Server, ServerFailure, create_agent, herald_server
from herald import Hub
from herald.inputs.events import parse_new_event

OK = {200, 202}
SINGLE_EVENT = {"type": "bench.tick", "text": "hello from the load generator", "data": {"n": 1}}
SERVER_METHOD = (
    "Server: `herald serve --store sqlite:///... --port 0` as a subprocess (uvloop, httptools,"
    " WAL + synchronous=FULL), bound to 127.0.0.1, fresh database per figure. Load: this"
    " process's raw-asyncio HTTP/1.1 keep-alive client (pre-serialized requests)."
)


def _event(handle: str, index: int) -> dict[str, Any]:
    return {"to": handle, "type": "bench.batch", "text": f"event {index}", "data": {"i": index}}


def _batch_body(handle: str, size: int) -> bytes:
    return json.dumps([_event(handle, index) for index in range(size)]).encode()


def _ms(seconds: float) -> float:
    return seconds * 1000.0


def _closed_details(result: ClosedLoopResult, connections: int) -> dict[str, Any]:
    details: dict[str, Any] = {
        "requests": result.requests,
        "seconds": round(result.wall_s, 2),
        "connections": connections,
        "request p50": f"{_ms(percentile(result.latencies_s, 0.5)):.2f} ms",
        "request p99": f"{_ms(percentile(result.latencies_s, 0.99)):.2f} ms",
    }
    failed = {status: n for status, n in result.statuses.items() if status not in OK}
    if failed:
        details["failed statuses"] = failed
        samples = result.failures.items()
        details["first failure"] = {code: body.decode(errors="replace") for code, body in samples}
    return details


async def _measure_closed(
    server: Server,
    connections: list[Connection],
    request: bytes,
    sizes: Sizes,
) -> tuple[ClosedLoopResult, Usage]:
    """A warm-up, then the measured closed loop with the CPU probe around it."""
    await closed_loop(connections, request, max_requests=10**9, max_seconds=sizes.warmup_seconds)
    probe = Probe(server.pid)
    result = await closed_loop(
        connections, request, max_requests=sizes.http_requests, max_seconds=sizes.http_seconds
    )
    return result, probe.stop()


def _answered(result: ClosedLoopResult) -> int:
    """The requests of a closed loop that were answered with success."""
    return sum(n for status, n in result.statuses.items() if status in OK)


def _closed_rate(
    label: str,
    result: ClosedLoopResult,
    usage: Usage,
    connections: int,
    per_request: int = 1,
    unit: str = "events/s",
) -> Measurement:
    """The rate of successful answers times the events each one carries."""
    ok = _answered(result)
    value = ok * per_request / result.wall_s if result.wall_s else 0.0
    details = _closed_details(result, connections)
    return Measurement(label, value, unit, usage=usage, details=details)


async def _profile(
    profiler: Profiler | None,
    server: Server,
    name: str,
    title: str,
    load: Callable[[], Awaitable[object]],
) -> None:
    """With ``--profile``: one more run of the load, sampled, outside the measured ones."""
    if profiler is not None:
        await profiler.run(server.pid, name, title, load())


def _again(connections: list[Connection], request: bytes, sizes: Sizes) -> Awaitable[object]:
    return closed_loop(
        connections, request, max_requests=sizes.http_requests, max_seconds=sizes.http_seconds
    )


# Figure 2: single-event publish


async def single_publish_figure(
    sizes: Sizes, workdir: Path, profiler: Profiler | None = None
) -> Figure:
    async with herald_server(workdir, "http-single") as server:
        await create_agent(server, "bench")
        body = json.dumps({"to": "bench", **SINGLE_EVENT}).encode()
        health = encode_request("GET", "/healthz", server.address)
        publish = encode_request(
            "POST", "/v1/events", server.address, token=server.admin_key, body=body
        )
        connections = await open_connections(server.address, sizes.http_connections)
        try:
            base, base_usage = await _measure_closed(server, connections, health, sizes)
            pub, pub_usage = await _measure_closed(server, connections, publish, sizes)
            await _profile(
                profiler, server, "fig2-single-publish",
                f"POST /v1/events, one event per request, {sizes.http_connections} connections",
                lambda: _again(connections, publish, sizes),
            )  # fmt: skip
        finally:
            await close_connections(connections)
    n = sizes.http_connections
    figure = Figure(
        "2",
        "HTTP publish, one event per request",
        _closed_rate("GET /healthz, same generator", base, base_usage, n, unit="requests/s"),
        Target("≥ 3,000 events/s", "at_least", 3000),
        _closed_rate("POST /v1/events", pub, pub_usage, n),
        method=[
            SERVER_METHOD,
            f"Closed loop: {n} connections each sending its next request when the last is"
            f" answered; a {sizes.warmup_seconds:g} s warm-up, then up to"
            f" {sizes.http_requests:,} requests or {sizes.http_seconds:g} s.",
            "Baseline: the same generator and connections on GET /healthz, the HTTP stack's"
            " ceiling without the store.",
        ],
    )
    figure.notes += _http_notes([base_usage, pub_usage], pub_usage)
    if figure.herald is not None and figure.baseline.value > figure.herald.value:
        figure.notes.insert(
            0,
            f"The same generator and connections drove GET /healthz at"
            f" {figure.baseline.value:,.0f} requests/s,"
            f" {figure.baseline.value / max(figure.herald.value, 1.0):.1f}x the publish rate: it"
            " can offer far more load than herald answered.",
        )
    return figure


def _http_notes(usages: list[Usage], herald_usage: Usage) -> list[str]:
    notes = [generator_note(usages)]
    noise = noise_note(usages)
    if noise:
        notes.append(noise)
    saturation = saturation_note(herald_usage)
    if saturation:
        notes.append(saturation)
    return notes


# Figure 3: batched publish


async def _api_batches(sizes: Sizes, workdir: Path) -> Run:
    """The same batches through ``Hub.publish_many`` in this process: the store's share."""
    hub = Hub.from_url(f"sqlite:///{workdir / 'api-batches.db'}")
    await hub.open()
    try:
        await hub.create_agent("bench")

        def publish() -> Any:
            events = [parse_new_event(_event("bench", i)) for i in range(sizes.batch_size)]
            return hub.publish_many(events)

        budget = max(1, sizes.http_requests // sizes.batch_size)
        run = await concurrent(publish, sizes.batch_connections, budget, sizes.http_seconds)
        return Run(run.events * sizes.batch_size, run.wall_s, run.cpu_s)
    finally:
        await hub.close()


async def batch_publish_figure(
    sizes: Sizes, workdir: Path, profiler: Profiler | None = None
) -> Figure:
    n, size = sizes.batch_connections, sizes.batch_size
    async with herald_server(workdir, "http-batch") as server:
        await create_agent(server, "bench")
        request = encode_request(
            "POST",
            "/v1/events",
            server.address,
            token=server.admin_key,
            body=_batch_body("bench", size),
        )
        connections = await open_connections(server.address, n)
        try:
            result, usage = await _measure_closed(server, connections, request, sizes)
            await _profile(
                profiler, server, "fig3-batch-publish",
                f"POST /v1/events, batches of {size}, {n} connections",
                lambda: _again(connections, request, sizes),
            )  # fmt: skip
        finally:
            await close_connections(connections)
    raw = raw_sqlite.batches(workdir / "raw-batches.db", size, 10**8, sizes.http_seconds)
    api = await _api_batches(sizes, workdir)
    figure = Figure(
        "3",
        f"HTTP publish, batches of {size}",
        Measurement(
            f"sqlite3, executemany {size} + COMMIT", raw.rate, "events/s", details=raw.details()
        ),
        Target("≥ 30,000 events/s", "at_least", 30000),
        _closed_rate(f"POST /v1/events, JSON array of {size}", result, usage, n, size),
        diagnostics=[
            Measurement(
                f"Hub.publish_many({size}) in process, {n} tasks",
                api.rate,
                "events/s",
                details=api.details(),
            )
        ],
        method=[
            SERVER_METHOD,
            f"Closed loop: {n} connections, each request a JSON array of {size} events (one"
            f" transaction each); up to {sizes.http_seconds:g} s after a warm-up.",
            "Baseline: plain `sqlite3` inserting the same number of rows per transaction"
            " (executemany + COMMIT, WAL, synchronous=FULL): the storage ceiling.",
            "Diagnostic: the same batches through the Python API (parse_new_event +"
            " Hub.publish_many) without HTTP, to split the cost between store and HTTP/JSON.",
        ],
    )
    figure.notes += _http_notes([usage], usage)
    return figure


# Figure 4: heartbeat drain


@dataclass(frozen=True)
class Drain:
    events: int
    heartbeats: int
    wall_s: float
    usage: Usage

    @property
    def rate(self) -> float:
        return self.events / self.wall_s if self.wall_s else 0.0


async def _drain_one(server: Server, key: str, limit: int, deadline: float) -> tuple[int, int]:
    """Heartbeat with the cursor until the backlog is empty; returns (events, heartbeats)."""
    connection = await Connection.open(server.address)
    events = heartbeats = cursor = 0
    try:
        while time.perf_counter() < deadline:
            body = json.dumps({"cursor": cursor, "limit": limit}).encode()
            request = encode_request(
                "POST", "/channel/heartbeat", server.address, token=key, body=body
            )
            status, answer = await connection.call(request)
            heartbeats += 1
            if status != 200:
                raise ServerFailure(f"heartbeat answered {status}: {answer[:300]!r}")
            drained = json.loads(answer)
            if not drained["events"]:
                break
            events += len(drained["events"])
            cursor = drained["cursor"]
    finally:
        await connection.close()
    return events, heartbeats


async def _drain(server: Server, keys: list[str], limit: int, seconds: float) -> Drain:
    probe = Probe(server.pid)
    deadline = time.perf_counter() + seconds
    counts = await asyncio.gather(*(_drain_one(server, key, limit, deadline) for key in keys))
    usage = probe.stop()
    events = sum(count[0] for count in counts)
    return Drain(events, sum(count[1] for count in counts), usage.wall_s, usage)


async def _prefill(server: Server, backlog: dict[str, int], batch_size: int) -> None:
    requests = []
    for handle, count in backlog.items():
        for start in range(0, count, batch_size):
            body = _batch_body(handle, min(batch_size, count - start))
            requests.append(
                encode_request(
                    "POST", "/v1/events", server.address, token=server.admin_key, body=body
                )
            )
    connections = await open_connections(server.address, 4)
    try:
        statuses = await send_all(connections, requests)
    finally:
        await close_connections(connections)
    if set(statuses) - OK:
        raise ServerFailure(f"prefilling the backlog failed: {dict(statuses)}")


async def _api_drain(sizes: Sizes, workdir: Path) -> Run:
    """The same drain through ``Hub.heartbeat`` in this process: the store's share."""
    hub = Hub.from_url(f"sqlite:///{workdir / 'api-drain.db'}")
    await hub.open()
    try:
        agent, _ = await hub.create_agent("bench")
        for start in range(0, sizes.backlog, sizes.batch_size):
            count = min(sizes.batch_size, sizes.backlog - start)
            await hub.publish_many([parse_new_event(_event("bench", i)) for i in range(count)])
        watch = Stopwatch()
        deadline = watch.wall + sizes.drain_seconds
        drained = await hub.drain(agent, cursor=0, limit=sizes.drain_limit)
        events = 0
        while drained.events and time.perf_counter() < deadline:
            events += len(drained.events)
            drained = await hub.drain(agent, cursor=drained.cursor, limit=sizes.drain_limit)
        return watch.run(events)
    finally:
        await hub.close()


def _drain_measurement(label: str, drain: Drain, expected: int) -> Measurement:
    details = {
        "events": drain.events,
        "heartbeats": drain.heartbeats,
        "seconds": round(drain.wall_s, 2),
        "backlog": expected,
    }
    return Measurement(label, drain.rate, "events/s", usage=drain.usage, details=details)


async def _drain_server(
    sizes: Sizes, workdir: Path, profiler: Profiler | None
) -> tuple[Drain, Drain]:
    share = max(1, sizes.backlog // sizes.drainers)
    shared = [f"shared-{index}" for index in range(sizes.drainers)]
    backlog = {"solo": sizes.backlog} | dict.fromkeys(shared, share)
    if profiler is not None:
        backlog["profiled"] = sizes.backlog
    limit, seconds = sizes.drain_limit, sizes.drain_seconds
    async with herald_server(workdir, "http-drain") as server:
        keys = {handle: await create_agent(server, handle) for handle in backlog}
        await _prefill(server, backlog, sizes.batch_size)
        solo = await _drain(server, [keys["solo"]], limit, seconds)
        parallel = await _drain(server, [keys[handle] for handle in shared], limit, seconds)
        await _profile(
            profiler, server, "fig4-drain", f"POST /channel/heartbeat, limit={limit}, one drainer",
            lambda: _drain(server, [keys["profiled"]], limit, seconds),
        )  # fmt: skip
    return solo, parallel


async def drain_figure(sizes: Sizes, workdir: Path, profiler: Profiler | None = None) -> Figure:
    limit = sizes.drain_limit
    solo, parallel = await _drain_server(sizes, workdir, profiler)
    raw = raw_sqlite.drain(workdir / "raw-drain.db", sizes.backlog, limit, sizes.drain_seconds)
    api = await _api_drain(sizes, workdir)
    share = max(1, sizes.backlog // sizes.drainers)
    figure = Figure(
        "4",
        f"Heartbeat drain with cursor, limit={limit}",
        Measurement(
            f"sqlite3, ack-to-cursor + lease {limit} per COMMIT",
            raw.rate,
            "events/s",
            details=raw.details(),
        ),
        Target("≥ 20,000 events/s", "at_least", 20000),
        _drain_measurement("POST /channel/heartbeat, one agent, one drainer", solo, sizes.backlog),
        diagnostics=[
            _drain_measurement(
                f"{sizes.drainers} agents drained in parallel", parallel, share * sizes.drainers
            ),
            Measurement(
                f"Hub.drain(cursor, limit={limit}) in process",
                api.rate,
                "events/s",
                details=api.details(),
            ),
        ],
        method=[
            SERVER_METHOD,
            f"A backlog of {sizes.backlog:,} events is published first (batches, not timed);"
            f" one client then sends POST /channel/heartbeat {{cursor, limit: {limit}}} with the"
            " cursor of the previous answer (which acks everything up to it and leases the next"
            f" {limit}) until an empty answer, or {sizes.drain_seconds:g} s. The client parses"
            " each answer with json.loads.",
            "Baseline: plain `sqlite3` doing the same state changes per step in one transaction"
            " (mark delivered up to the cursor, select the next events, lease them, COMMIT)"
            " without herald's attempt log.",
            f"Diagnostics: {sizes.drainers} agents drained at once (one connection each, the same"
            " backlog split among them), and Hub.heartbeat in process (no HTTP).",
        ],
    )
    figure.notes += _http_notes([solo.usage, parallel.usage], solo.usage)
    if solo.events < sizes.backlog:
        figure.notes.append(
            f"The drain stopped at its time limit after {solo.events:,} of"
            f" {sizes.backlog:,} events; the rate is over what was drained."
        )
    return figure


# Figure 5: latency at a steady rate


def _latency_measurement(label: str, result: OpenLoopResult, usage: Usage) -> Measurement:
    p50 = _ms(percentile(result.from_schedule_s, 0.5))
    p99 = _ms(percentile(result.from_schedule_s, 0.99))
    failed = {status: n for status, n in result.statuses.items() if status not in OK}
    details: dict[str, Any] = {
        "sent": sum(result.statuses.values()),
        "planned": result.planned,
        "p99.9": f"{_ms(percentile(result.from_schedule_s, 0.999)):.2f} ms",
        "max": f"{_ms(max(result.from_schedule_s, default=math.nan)):.2f} ms",
        "from send p50/p99": f"{_ms(percentile(result.from_send_s, 0.5)):.2f}"
        f" / {_ms(percentile(result.from_send_s, 0.99)):.2f} ms",
        "sender lag p99": f"{_ms(percentile(result.send_lag_s, 0.99)):.2f} ms",
    }
    if failed or result.unfinished:
        details["failed"] = {**failed, "unfinished": result.unfinished}
    text = f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"
    return Measurement(label, p99, "ms", text=text, usage=usage, details=details)


async def _measure_open(
    server: Server, connections: list[Connection], request: bytes, sizes: Sizes
) -> tuple[OpenLoopResult, Usage]:
    rate = sizes.latency_rate
    await open_loop(connections, request, rate=rate, seconds=sizes.warmup_seconds)
    probe = Probe(server.pid)
    result = await open_loop(connections, request, rate=rate, seconds=sizes.latency_seconds)
    return result, probe.stop()


async def latency_figure(sizes: Sizes, workdir: Path, profiler: Profiler | None = None) -> Figure:
    async with herald_server(workdir, "http-latency") as server:
        await create_agent(server, "bench")
        body = json.dumps({"to": "bench", **SINGLE_EVENT}).encode()
        health = encode_request("GET", "/healthz", server.address)
        publish = encode_request(
            "POST", "/v1/events", server.address, token=server.admin_key, body=body
        )
        connections = await open_connections(server.address, sizes.latency_connections)
        try:
            base, base_usage = await _measure_open(server, connections, health, sizes)
            pub, pub_usage = await _measure_open(server, connections, publish, sizes)
            await _profile(
                profiler, server, "fig5-latency",
                f"POST /v1/events at a steady {sizes.latency_rate:g}/s",
                lambda: open_loop(
                    connections, publish, rate=sizes.latency_rate, seconds=sizes.latency_seconds
                ),
            )  # fmt: skip
        finally:
            await close_connections(connections)
    rate = f"{sizes.latency_rate:,.0f}/s"
    figure = Figure(
        "5",
        f"HTTP publish latency at a steady {rate}",
        _latency_measurement(f"GET /healthz at {rate}", base, base_usage),
        Target("p99 < 20 ms", "at_most", 20.0),
        _latency_measurement(f"POST /v1/events at {rate}", pub, pub_usage),
        method=[
            SERVER_METHOD,
            f"Open loop: request i is due at start + i / {sizes.latency_rate:g} s whatever the"
            f" answers before it, over up to {sizes.latency_connections} keep-alive connections"
            f" (a request waits for an idle one), for {sizes.latency_seconds:g} s after a"
            f" {sizes.warmup_seconds:g} s warm-up.",
            "Latency is measured from the scheduled send time to the end of the answer, so a"
            " late sender or a stalled server shows up in it (no coordinated omission); latency"
            " from the actual write, and how late the sender was, are in the details.",
            "Baseline: the same schedule on GET /healthz.",
        ],
    )
    figure.notes += _http_notes([base_usage, pub_usage], pub_usage)
    return figure
