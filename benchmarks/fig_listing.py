"""Figures 15a-15d and 17a-17d: the admin's listings with a million events stored over ten
thousand agents: ``GET /v1/events`` (15), and what the console's overview and agents page read,
``GET /v1/stats`` and ``GET /v1/agents`` (17).

On each backend (SQLite, a fresh file; PostgreSQL, a scratch database made for the run as in
figures 1c-1d) the store is filled first: the events spread over the agents in turn, published with
``Hub.publish_many`` in this process in batches of ``FILL_BATCH`` by ``FILL_TASKS`` tasks (one
transaction each, through the checks of any publish; the same parsed batch is published again
and again, so the fill does not wait on this process parsing). Then ``herald serve`` runs on that
store, and one keep-alive connection sends in turn, after a warm-up, ``GET /healthz``,
``GET /v1/events`` (the first page: default limit, newest first),
``GET /v1/events?agent=<handle>``, ``GET /v1/stats``, ``GET /v1/agents`` (the first page) and
``GET /v1/agents?search=<part of a handle>`` and ``GET /metrics``, as many times as the sizes
say. A request's
latency runs from its write to the end of its answer.

The baseline is ``GET /healthz`` on the same connection and server, interleaved with the
listings: the round trip of the HTTP stack, so what a listing adds is the route's own cost.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import asyncpg

from benchmarks import raw_postgres
from benchmarks.config import Sizes
from benchmarks.cpu import Probe, Usage
from benchmarks.fig_http import bench_event
from benchmarks.loadgen import Connection, encode_request, percentile
from benchmarks.measure import Run, concurrent
from benchmarks.results import Figure, Measurement, Target, noise_note, to_ms
from benchmarks.server import Server, ServerFailure, herald_server
from herald import Hub
from herald.inputs.events import parse_new_event

FILL_BATCH = 5000
FILL_TASKS = 4
AGENTS_AT_ONCE = 200
WARMUP_REQUESTS = 20
TARGET = Target("p99 < 20 ms", "at_most", 20.0)
PAGES_TARGET = Target("p99 < 100 ms", "at_most", 100.0)
METRICS_TARGET = Target("p99 < 50 ms", "at_most", 50.0)
Latencies = dict[str, list[float]]


def _handles(sizes: Sizes) -> list[str]:
    return [f"bench-{index:05d}" for index in range(sizes.listing_agents)]


async def _fill(url: str, sizes: Sizes) -> Run:
    """Create the agents and publish the events, spread over them in turn."""
    hub = Hub.from_url(url)
    await hub.open()
    try:
        handles = _handles(sizes)
        for start in range(0, len(handles), AGENTS_AT_ONCE):  # concurrent: commits are shared
            await asyncio.gather(
                *(hub.create_agent(h) for h in handles[start : start + AGENTS_AT_ONCE])
            )
        batch = [
            parse_new_event(bench_event(handles[index % len(handles)], index))
            for index in range(FILL_BATCH)
        ]
        budget = max(1, sizes.listing_events // FILL_BATCH)
        run = await concurrent(
            lambda: hub.publish_many(batch), FILL_TASKS, budget, sizes.listing_fill_seconds
        )
        return Run(run.events * FILL_BATCH, run.wall_s, run.cpu_s, run.others_s)
    finally:
        await hub.close()


def _requests(server: Server, handle: str) -> dict[str, bytes]:
    address, key = server.address, server.admin_key
    return {
        "healthz": encode_request("GET", "/healthz", address),
        "all": encode_request("GET", "/v1/events", address, token=key),
        "agent": encode_request("GET", f"/v1/events?agent={handle}", address, token=key),
        "stats": encode_request("GET", "/v1/stats", address, token=key),
        "agents": encode_request("GET", "/v1/agents", address, token=key),
        "search": encode_request("GET", f"/v1/agents?search={handle[-3:]}", address, token=key),
        "metrics": encode_request("GET", "/metrics", address, token=key),
    }


async def _call(connection: Connection, request: bytes) -> float:
    started = time.perf_counter()
    status, body = await connection.call(request)
    if status != 200:
        raise ServerFailure(f"answered {status}: {body[:300]!r}")
    return time.perf_counter() - started


async def _measure(server: Server, sizes: Sizes, handle: str) -> tuple[Latencies, Usage]:
    """Each request in turn on one connection, a warm-up first; the seconds each took."""
    requests = _requests(server, handle)
    latencies: Latencies = {name: [] for name in requests}
    connection = await Connection.open(server.address)
    try:
        for _ in range(WARMUP_REQUESTS):
            for request in requests.values():
                await _call(connection, request)
        probe = Probe(server.pid)
        for _ in range(sizes.listing_requests):
            for name, request in requests.items():
                latencies[name].append(await _call(connection, request))
        usage = probe.stop()
    finally:
        await connection.close()
    return latencies, usage


async def _backend(
    url: str, workdir: Path, name: str, sizes: Sizes
) -> tuple[Run, Latencies, Usage]:
    fill = await _fill(url, sizes)
    handle = _handles(sizes)[0]
    async with herald_server(workdir, name, store=url) as server:
        latencies, usage = await _measure(server, sizes, handle)
    return fill, latencies, usage


def _latency(label: str, seconds: list[float], usage: Usage, extra: dict[str, Any]) -> Measurement:
    p50, p99 = to_ms(percentile(seconds, 0.5)), to_ms(percentile(seconds, 0.99))
    details: dict[str, Any] = {
        "requests": len(seconds),
        "max": f"{to_ms(max(seconds)):.2f} ms",
        **extra,
    }
    text = f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"
    return Measurement(label, p99, "ms", text=text, usage=usage, details=details)


def _method(sizes: Sizes, backend: str) -> list[str]:
    return [
        f"Server: `herald serve --store {backend} --port 0` as a subprocess (uvloop, httptools),"
        " bound to 127.0.0.1. Client: this process's raw-asyncio HTTP/1.1 client, one"
        " keep-alive connection.",
        f"The store is filled first (not part of the latency): {sizes.listing_events:,} events"
        f" over {sizes.listing_agents} agents, through Hub.publish_many in this process, batches"
        f" of {FILL_BATCH:,} by {FILL_TASKS} tasks (the same parsed batch each time), then the"
        " server starts on that store.",
        f"After {WARMUP_REQUESTS} unmeasured turns, {sizes.listing_requests} turns of GET"
        " /healthz, GET /v1/events (first page, default limit 50, newest first), GET"
        f" /v1/events?agent=<one of the {sizes.listing_agents:,} handles>, GET /v1/stats, GET"
        " /v1/agents (first page, 50 by handle, each with its pending count, live sessions and"
        " last activity), GET /v1/agents?search=<the last 3 characters of a handle> and GET"
        " /metrics (the store's gauges are read at most once a second, so most scrapes in a"
        " turn of requests render from a reading), one request at a time; latency is from each"
        " request's write to the end of its answer.",
        "Baseline: GET /healthz, interleaved on the same connection and server: the HTTP"
        " round trip, so the listing's own cost is what it adds.",
    ]


def _figures(
    numbers: tuple[str, str, str, str, str],
    backend: str,
    sizes: Sizes,
    measured: tuple[Run, Latencies, Usage],
) -> list[Figure]:
    first, second, *pages = numbers
    fill, latencies, usage = measured
    filled = {
        "stored": f"{fill.events:,} events",
        "filled in": f"{fill.wall_s:.1f} s ({fill.rate:,.0f} events/s)",
    }
    baseline = _latency("GET /healthz, same connection", latencies["healthz"], usage, {})
    method = _method(sizes, "sqlite:///..." if backend == "SQLite" else "postgresql://...")
    noise = noise_note([usage])
    notes = [noise] if noise else []
    if fill.events < sizes.listing_events:
        notes.append(
            f"The fill stopped at its time limit ({sizes.listing_fill_seconds:g} s) after"
            f" {fill.events:,} of {sizes.listing_events:,} events."
        )
    count = f"{fill.events:,}"
    agents = f"{sizes.listing_agents:,} agents"

    def figure(number: str, title: str, label: str, name: str, target: Target) -> Figure:
        measured = _latency(label, latencies[name], usage, filled)
        return Figure(number, title, baseline, target, measured, method=method, notes=notes)

    return [
        figure(
            first,
            f"GET /v1/events first page, {count} events, {backend}",
            "GET /v1/events",
            "all",
            TARGET,
        ),
        figure(
            second,
            f"GET /v1/events?agent= first page, {count} events, {backend}",
            "GET /v1/events?agent=<handle>",
            "agent",
            TARGET,
        ),
        figure(
            pages[0],
            f"GET /v1/stats (the console's overview), {count} events, {agents}, {backend}",
            "GET /v1/stats",
            "stats",
            PAGES_TARGET,
        ),
        figure(
            pages[1],
            f"GET /v1/agents first page and ?search= (the console's agents page), {agents},"
            f" {backend}",
            "GET /v1/agents, ?search= (the slower)",
            _slower(latencies, "agents", "search"),
            PAGES_TARGET,
        ),
        figure(
            pages[2],
            f"GET /metrics (a Prometheus scrape), {count} events, {agents}, {backend}",
            "GET /metrics",
            "metrics",
            METRICS_TARGET,
        ),
    ]


def _slower(latencies: Latencies, *names: str) -> str:
    """The name of the request, of ``names``, with the highest p99 (it stands for them all)."""
    return max(names, key=lambda name: percentile(latencies[name], 0.99))


async def sqlite_figures(sizes: Sizes, workdir: Path) -> list[Figure]:
    url = f"sqlite:///{workdir / 'listing.db'}"
    measured = await _backend(url, workdir, "listing-sqlite", sizes)
    return _figures(("15a", "15b", "17a", "17b", "17e"), "SQLite", sizes, measured)


async def postgres_figures(sizes: Sizes, workdir: Path, admin_url: str) -> list[Figure]:
    try:
        async with raw_postgres.scratch_database(admin_url) as url:
            measured = await _backend(url, workdir, "listing-postgres", sizes)
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        nothing = Measurement("GET /healthz", float("nan"), "ms", text="not measured")
        reason = f"PostgreSQL at {admin_url} unavailable: {exc}"
        title = "GET /v1/events first page, PostgreSQL"
        return [Figure("15c", title, nothing, TARGET, skipped=reason)]
    return _figures(("15c", "15d", "17c", "17d", "17f"), "PostgreSQL", sizes, measured)
