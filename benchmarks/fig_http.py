"""Figures 2-5: the HTTP API of a real ``herald serve`` on SQLite, driven by ``loadgen``."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks import raw_sqlite
from benchmarks.config import Sizes
from benchmarks.cpu import Probe, Usage, combined
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
)
from benchmarks.measure import Run, alternate, concurrent, median_round
from benchmarks.profiling import Profiler
from benchmarks.results import (
    Figure,
    Measurement,
    Target,
    http_notes,
    per_event_us,
    to_ms,
)
from benchmarks.server import Server, bare_server, create_agent, herald_server
from herald import Hub
from herald.inputs.events import parse_new_event

OK = {200, 202}
SINGLE_EVENT = {"type": "bench.tick", "text": "hello from the load generator", "data": {"n": 1}}
SERVER_METHOD = (
    "Server: `herald serve --store sqlite:///... --port 0` as a subprocess (uvloop, httptools,"
    " WAL + synchronous=FULL), bound to 127.0.0.1, fresh database per figure. Load: this"
    " process's raw-asyncio HTTP/1.1 keep-alive client (pre-serialized requests)."
)
BARE_METHOD = (
    "Baseline: the bare endpoint (`bare_server.py`, a subprocess on a fresh SQLite file): the"
    " same stack (uvicorn with uvloop and httptools, Starlette) doing the same durable work with"
    " nothing else: `json.loads` of the body, the agent's seqs reserved"
    " (`UPDATE agents ... RETURNING last_seq`) and the events inserted into a table with the"
    " columns of herald's events table, by one writer thread that commits the requests waiting"
    " together (group commit), WAL + synchronous=FULL. Same generator, same requests."
)
CPU_METHOD = (
    "CPU µs/event: the server process's CPU time (all its threads, from /proc) over the events"
    " it stored; for work done in this process, this process's CPU time."
)


def bench_event(handle: str, index: int) -> dict[str, Any]:
    return {"to": handle, "type": "bench.batch", "text": f"event {index}", "data": {"i": index}}


def batch_body(handle: str, size: int) -> bytes:
    return json.dumps([bench_event(handle, index) for index in range(size)]).encode()


def _closed_details(result: ClosedLoopResult, connections: int) -> dict[str, Any]:
    details: dict[str, Any] = {
        "requests": result.requests,
        "seconds": round(result.wall_s, 2),
        "connections": connections,
        "request p50": f"{to_ms(percentile(result.latencies_s, 0.5)):.2f} ms",
        "request p99": f"{to_ms(percentile(result.latencies_s, 0.99)):.2f} ms",
    }
    failed = {status: n for status, n in result.statuses.items() if status not in OK}
    if failed:
        details["failed statuses"] = failed
        samples = result.failures.items()
        details["first failure"] = {code: body.decode(errors="replace") for code, body in samples}
    return details


async def measure_closed(
    server: Server,
    connections: list[Connection],
    request: bytes,
    sizes: Sizes,
) -> tuple[ClosedLoopResult, Usage]:
    """A warm-up, then the measured closed loop with the CPU probe around it."""
    await _warm_up(connections, request, sizes)
    return await closed_round(server, connections, request, sizes, sizes.http_seconds)


async def _warm_up(connections: list[Connection], request: bytes, sizes: Sizes) -> None:
    await closed_loop(connections, request, max_requests=10**9, max_seconds=sizes.warmup_seconds)


async def closed_round(
    server: Server, connections: list[Connection], request: bytes, sizes: Sizes, seconds: float
) -> tuple[ClosedLoopResult, Usage]:
    """The measured closed loop with the CPU probe around it."""
    probe = Probe(server.pid)
    result = await closed_loop(
        connections, request, max_requests=sizes.http_requests, max_seconds=seconds
    )
    return result, probe.stop()


def answered(result: ClosedLoopResult) -> int:
    """The requests of a closed loop that were answered with success."""
    return sum(n for status, n in result.statuses.items() if status in OK)


def closed_rate(
    label: str,
    result: ClosedLoopResult,
    usage: Usage,
    connections: int,
    per_request: int = 1,
    unit: str = "events/s",
) -> Measurement:
    """The rate of successful answers times the events each one carries."""
    ok = answered(result)
    value = ok * per_request / result.wall_s if result.wall_s else 0.0
    details = _closed_details(result, connections)
    cpu_us = per_event_us(usage.server_s, ok * per_request)
    return Measurement(label, value, unit, usage=usage, details=details, cpu_us=cpu_us)


async def _fresh(
    server: Server, request: bytes, sizes: Sizes, seconds: float
) -> tuple[ClosedLoopResult, Usage]:
    """A closed loop on connections opened for it (and closed after): between the rounds of one
    side, the other side's may outlast the server's keep-alive timeout (uvicorn's 5 s)."""
    connections = await open_connections(server.address, sizes.http_connections)
    try:
        return await closed_round(server, connections, request, sizes, seconds)
    finally:
        await close_connections(connections)


def _closed_rounds(
    label: str, rounds: list[tuple[ClosedLoopResult, Usage]], connections: int
) -> Measurement:
    """The median round by rate, every round's rate beside it, and the CPU per event of all."""
    measured = [closed_rate(label, result, usage, connections) for result, usage in rounds]
    shown = median_round(measured, lambda m: m.value)
    shown.details["rounds"] = " / ".join(f"{m.value:,.0f}" for m in measured)
    server_s = [usage.server_s or 0.0 for _, usage in rounds]
    shown.cpu_us = per_event_us(sum(server_s), sum(answered(result) for result, _ in rounds))
    return shown


async def profile_herald(
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


def rules_now() -> dict[str, Any]:
    """The preferences of figure 2's second agent, all three kinds: muted types the event does
    not match (so its rules are read in full); quiet hours away from now (UTC: two hours from
    six hours ahead), so the event is not held by them yet every publish looks; and a digest
    of the event's own type, so each publish after a window's first is held by it (its store
    work the heaviest of the rules)."""
    hour = time.gmtime().tm_hour
    return {
        "muted": ["ci.*", "bench.noise", "*.heartbeat"],
        "quiet_hours": {
            "zone": "UTC",
            "start": f"{(hour + 6) % 24:02d}:00",
            "end": f"{(hour + 8) % 24:02d}:00",
        },
        "digests": [{"types": ["bench.*"], "window_s": 60}],
    }


async def _set_preferences(server: Server, handle: str, preferences: dict[str, Any]) -> None:
    body = json.dumps({"preferences": preferences}).encode()
    request = encode_request(
        "PATCH", f"/v1/agents/{handle}", server.address, token=server.admin_key, body=body
    )
    connection = await Connection.open(server.address)
    try:
        status, answer = await connection.call(request)
    finally:
        await connection.close()
    if status != 200:
        raise RuntimeError(f"PATCH /v1/agents/{handle} answered {status}: {answer[:300]!r}")


async def single_publish_figure(
    sizes: Sizes, workdir: Path, profiler: Profiler | None = None
) -> Figure:
    body = json.dumps({"to": "bench", **SINGLE_EVENT}).encode()
    ruled_body = json.dumps({"to": "bench-rules", **SINGLE_EVENT}).encode()
    async with (
        herald_server(workdir, "http-single") as server,
        bare_server(workdir, "bare-single") as bare,
    ):
        await create_agent(server, "bench")
        await create_agent(server, "bench-rules")
        await _set_preferences(server, "bench-rules", rules_now())
        await create_agent(bare, "bench")
        health = encode_request("GET", "/healthz", server.address)
        publish = encode_request(
            "POST", "/v1/events", server.address, token=server.admin_key, body=body
        )
        ruled = encode_request(
            "POST", "/v1/events", server.address, token=server.admin_key, body=ruled_body
        )
        bare_publish = encode_request("POST", "/v1/events", bare.address, body=body)
        await _fresh(bare, bare_publish, sizes, sizes.warmup_seconds)
        await _fresh(server, publish, sizes, sizes.warmup_seconds)
        await _fresh(server, ruled, sizes, sizes.warmup_seconds)
        seconds = sizes.http_seconds / (2 if sizes.http_rounds > 1 else 1)
        rounds = await alternate(
            {
                "bare": lambda: _fresh(bare, bare_publish, sizes, seconds),
                "herald": lambda: _fresh(server, publish, sizes, seconds),
                "rules": lambda: _fresh(server, ruled, sizes, seconds),
            },
            sizes.http_rounds,
        )
        connections = await open_connections(server.address, sizes.http_connections)
        try:
            await _warm_up(connections, health, sizes)
            base, base_usage = await closed_round(server, connections, health, sizes, seconds)
            await profile_herald(
                profiler, server, "fig2-single-publish",
                f"POST /v1/events, one event per request, {sizes.http_connections} connections",
                lambda: _again(connections, publish, sizes),
            )  # fmt: skip
        finally:
            await close_connections(connections)
        await profile_herald(
            profiler, bare, "fig2-bare-publish",
            f"the bare endpoint's POST /v1/events, {sizes.http_connections} connections",
            lambda: _fresh(bare, bare_publish, sizes, sizes.http_seconds),
        )  # fmt: skip
    n = sizes.http_connections
    figure = Figure(
        "2",
        "HTTP publish, one event per request",
        _closed_rounds("the bare endpoint's POST /v1/events", rounds["bare"], n),
        Target("≥ 0.85x the bare endpoint", "ratio_at_least", 0.85),
        _closed_rounds("POST /v1/events", rounds["herald"], n),
        diagnostics=[
            _closed_rounds(
                "POST /v1/events to an agent with preferences (mutes, quiet hours, a digest)",
                rounds["rules"],
                n,
            ),
            closed_rate("GET /healthz, same generator", base, base_usage, n, unit="requests/s"),
        ],
        method=[
            SERVER_METHOD,
            f"Closed loop: {n} connections each sending its next request when the last is"
            f" answered; a {sizes.warmup_seconds:g} s warm-up of each side, then"
            f" {sizes.http_rounds} round(s) of the two, the order alternating, each side up to"
            f" {sizes.http_requests:,} requests or {seconds:g} s a round; each side shows its"
            " median round (every round's rate in the details, CPU per event over all rounds).",
            BARE_METHOD,
            "Diagnostic: the same publish to a second agent of the same server whose"
            " preferences mute types that the event's type does not match, set quiet hours"
            " away from the run's time, and a digest of a minute over the event's own type"
            " (each publish after a window's first is held by it), a third side of the same"
            " alternating rounds: what an agent's rules cost a publish (the issue's bound:"
            " at most 5%).",
            "Diagnostic: the same generator and connections on herald's GET /healthz, the HTTP"
            f" stack's ceiling without the store, for {seconds:g} s.",
            CPU_METHOD,
        ],
    )
    usages = [usage for side in rounds.values() for _, usage in side]
    assert figure.herald is not None
    figure.notes += http_notes([*usages, base_usage], figure.herald.usage)
    figure.notes.append(_rules_cost(figure.herald, figure.diagnostics[0]))
    return figure


def _rules_cost(plain: Measurement, ruled: Measurement) -> str:
    """The CPU per event of a publish to an agent with preferences against one without."""
    if not plain.cpu_us or not ruled.cpu_us:
        return "Preferences' cost: no CPU figure for one of the sides."
    extra = (ruled.cpu_us / plain.cpu_us - 1) * 100
    return (
        f"Preferences' cost: {ruled.cpu_us:.1f} CPU µs/event publishing to an agent with rules"
        f" (mutes, quiet hours, a digest) against {plain.cpu_us:.1f} to one without"
        f" ({extra:+.1f}%; bound: +5%)."
    )


# Figure 3: batched publish


async def _api_batches(sizes: Sizes, workdir: Path) -> Run:
    """The same batches through ``Hub.publish_many`` in this process: the store's share."""
    hub = Hub.from_url(f"sqlite:///{workdir / 'api-batches.db'}")
    await hub.open()
    try:
        await hub.create_agent("bench")

        def publish() -> Any:
            events = [parse_new_event(bench_event("bench", i)) for i in range(sizes.batch_size)]
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
    body = batch_body("bench", size)
    async with herald_server(workdir, "http-batch") as server:
        await create_agent(server, "bench")
        request = encode_request(
            "POST", "/v1/events", server.address, token=server.admin_key, body=body
        )
        connections = await open_connections(server.address, n)
        try:
            result, usage = await measure_closed(server, connections, request, sizes)
            await profile_herald(
                profiler, server, "fig3-batch-publish",
                f"POST /v1/events, batches of {size}, {n} connections",
                lambda: _again(connections, request, sizes),
            )  # fmt: skip
        finally:
            await close_connections(connections)
    async with bare_server(workdir, "bare-batch") as bare:
        await create_agent(bare, "bench")
        bare_request = encode_request("POST", "/v1/events", bare.address, body=body)
        connections = await open_connections(bare.address, n)
        try:
            floor, floor_usage = await measure_closed(bare, connections, bare_request, sizes)
        finally:
            await close_connections(connections)
    raw = raw_sqlite.batches(workdir / "raw-batches.db", size, 10**8, sizes.http_seconds)
    api = await _api_batches(sizes, workdir)
    figure = Figure(
        "3",
        f"HTTP publish, batches of {size}",
        Measurement(
            f"sqlite3, executemany {size} + COMMIT",
            raw.rate,
            "events/s",
            details=raw.details(),
            cpu_us=per_event_us(raw.cpu_s, raw.events),
        ),
        Target("≥ 0.25x raw", "ratio_at_least", 0.25),
        closed_rate(f"POST /v1/events, JSON array of {size}", result, usage, n, size),
        diagnostics=[
            closed_rate(
                f"the bare endpoint's POST /v1/events, JSON array of {size}",
                floor,
                floor_usage,
                n,
                size,
            ),
            Measurement(
                f"Hub.publish_many({size}) in process, {n} tasks",
                api.rate,
                "events/s",
                details=api.details(),
                cpu_us=per_event_us(api.cpu_s, api.events),
            ),
        ],
        method=[
            SERVER_METHOD,
            f"Closed loop: {n} connections, each request a JSON array of {size} events (one"
            f" transaction each); up to {sizes.http_seconds:g} s after a warm-up.",
            "Baseline: plain `sqlite3` inserting the same number of rows per transaction"
            " (executemany + COMMIT, WAL, synchronous=FULL): the storage ceiling.",
            "Diagnostics: the bare endpoint (figure 2's baseline) with the same requests and"
            " connections; the same batches through the Python API (parse_new_event +"
            " Hub.publish_many) without HTTP, to split the cost between store and HTTP/JSON.",
            CPU_METHOD,
        ],
    )
    figure.notes += http_notes([usage, floor_usage], usage)
    return figure


# Figure 5: latency at a steady rate


def _latency_measurement(label: str, result: OpenLoopResult, usage: Usage) -> Measurement:
    p50 = to_ms(percentile(result.from_schedule_s, 0.5))
    p99 = to_ms(percentile(result.from_schedule_s, 0.99))
    failed = {status: n for status, n in result.statuses.items() if status not in OK}
    details: dict[str, Any] = {
        "sent": sum(result.statuses.values()),
        "planned": result.planned,
        "p99.9": f"{to_ms(percentile(result.from_schedule_s, 0.999)):.2f} ms",
        "max": f"{to_ms(max(result.from_schedule_s, default=math.nan)):.2f} ms",
        "from send p50/p99": f"{to_ms(percentile(result.from_send_s, 0.5)):.2f}"
        f" / {to_ms(percentile(result.from_send_s, 0.99)):.2f} ms",
        "sender lag p99": f"{to_ms(percentile(result.send_lag_s, 0.99)):.2f} ms",
    }
    if failed or result.unfinished:
        details["failed"] = {**failed, "unfinished": result.unfinished}
    text = f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"
    answered = sum(n for status, n in result.statuses.items() if status in OK)
    cpu_us = per_event_us(usage.server_s, answered)
    return Measurement(label, p99, "ms", text=text, usage=usage, details=details, cpu_us=cpu_us)


async def _measure_open(
    server: Server, request: bytes, sizes: Sizes, seconds: float
) -> tuple[OpenLoopResult, Usage]:
    """The open loop on connections opened for it and closed after: between the rounds of one
    side, the other side's may outlast the server's keep-alive timeout (uvicorn's 5 s)."""
    rate = sizes.latency_rate
    connections = await open_connections(server.address, sizes.latency_connections)
    try:
        probe = Probe(server.pid)
        result = await open_loop(connections, request, rate=rate, seconds=seconds)
        return result, probe.stop()
    finally:
        await close_connections(connections)


def _pooled(rounds: list[tuple[OpenLoopResult, Usage]]) -> tuple[OpenLoopResult, Usage]:
    """The rounds' requests as one sample (percentiles over all of them), and their CPU."""
    pooled = OpenLoopResult(rate=rounds[0][0].rate, planned=0)
    for result, _ in rounds:
        pooled.planned += result.planned
        pooled.wall_s += result.wall_s
        pooled.statuses.update(result.statuses)
        pooled.from_schedule_s += result.from_schedule_s
        pooled.from_send_s += result.from_send_s
        pooled.send_lag_s += result.send_lag_s
        pooled.unfinished += result.unfinished
    return pooled, combined([usage for _, usage in rounds])


async def latency_figure(sizes: Sizes, workdir: Path, profiler: Profiler | None = None) -> Figure:
    body = json.dumps({"to": "bench", **SINGLE_EVENT}).encode()
    async with (
        herald_server(workdir, "http-latency") as server,
        bare_server(workdir, "bare-latency") as bare,
    ):
        await create_agent(server, "bench")
        await create_agent(bare, "bench")
        health = encode_request("GET", "/healthz", server.address)
        publish = encode_request(
            "POST", "/v1/events", server.address, token=server.admin_key, body=body
        )
        bare_publish = encode_request("POST", "/v1/events", bare.address, body=body)
        rounds, seconds = sizes.http_rounds, sizes.latency_seconds
        each = seconds / 2 if rounds > 1 else seconds
        await _measure_open(bare, bare_publish, sizes, sizes.warmup_seconds)  # warm-ups
        await _measure_open(server, publish, sizes, sizes.warmup_seconds)
        measured = await alternate(
            {
                "bare": lambda: _measure_open(bare, bare_publish, sizes, each),
                "herald": lambda: _measure_open(server, publish, sizes, each),
            },
            rounds,
        )
        floor, floor_usage = _pooled(measured["bare"])
        pub, pub_usage = _pooled(measured["herald"])
        await _measure_open(server, health, sizes, sizes.warmup_seconds)
        base, base_usage = await _measure_open(server, health, sizes, each)
        if profiler is not None:
            connections = await open_connections(server.address, sizes.latency_connections)
            try:
                await profiler.run(
                    server.pid, "fig5-latency",
                    f"POST /v1/events at a steady {sizes.latency_rate:g}/s",
                    open_loop(connections, publish, rate=sizes.latency_rate, seconds=seconds),
                )  # fmt: skip
            finally:
                await close_connections(connections)
    rate = f"{sizes.latency_rate:,.0f}/s"
    figure = Figure(
        "5",
        f"HTTP publish latency at a steady {rate}",
        _latency_measurement(f"the bare endpoint's POST /v1/events at {rate}", floor, floor_usage),
        Target("p99 ≤ 2x the bare endpoint's", "ratio_at_most", 2.0),
        _latency_measurement(f"POST /v1/events at {rate}", pub, pub_usage),
        diagnostics=[_latency_measurement(f"GET /healthz at {rate}", base, base_usage)],
        method=[
            SERVER_METHOD,
            f"Open loop: request i is due at start + i / {sizes.latency_rate:g} s whatever the"
            f" answers before it, over up to {sizes.latency_connections} keep-alive connections"
            f" (a request waits for an idle one), after a {sizes.warmup_seconds:g} s warm-up of"
            f" each side; {rounds} round(s) of {each:g} s of each side, the order alternating,"
            " on connections opened for the round; each side's percentiles are over the"
            " requests of all its rounds, its CPU shares over all of them.",
            "Latency is measured from the scheduled send time to the end of the answer, so a"
            " late sender or a stalled server shows up in it (no coordinated omission); latency"
            " from the actual write, and how late the sender was, are in the details.",
            BARE_METHOD.replace("Same generator, same requests.", "Same schedule, same requests."),
            f"Diagnostic: the same schedule on herald's GET /healthz, for {each:g} s.",
            CPU_METHOD,
        ],
    )
    figure.notes += http_notes([floor_usage, base_usage, pub_usage], pub_usage)
    return figure
