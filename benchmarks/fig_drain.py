"""Figures 4 and 4b: the heartbeat drain of a real ``herald serve``, on SQLite and on PostgreSQL,
each beside the bare endpoint doing the same drain steps (``bare_server.py``)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from benchmarks import raw_postgres, raw_sqlite
from benchmarks.config import Sizes
from benchmarks.cpu import Probe, Usage
from benchmarks.fig_http import (
    CPU_METHOD,
    OK,
    SERVER_METHOD,
    _batch_body,
    _event,
    _http_notes,
    _profile,
)
from benchmarks.loadgen import (
    Connection,
    close_connections,
    encode_request,
    open_connections,
    send_all,
)
from benchmarks.measure import Run, Stopwatch
from benchmarks.profiling import Profiler
from benchmarks.results import Figure, Measurement, Target, per_event_us
from benchmarks.server import Server, ServerFailure, bare_server, create_agent, herald_server
from herald import Hub
from herald.inputs.events import parse_new_event

BARE_DRAIN = (
    "the bare endpoint (`bare_server.py`: the same stack, uvicorn with uvloop and httptools and"
    " Starlette, doing each step's durable work with nothing else: `json.loads` of the body,"
    " one transaction that marks the agent's open events up to the cursor delivered and leases"
    " the next ones in one UPDATE ... RETURNING, committed by its one writer together with the"
    " requests waiting beside it; the events answered as JSON with herald's fields)"
)


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
    """The same drain through ``Hub.drain`` in this process: the store's share."""
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
    cpu_us = per_event_us(drain.usage.server_s, drain.events)
    return Measurement(
        label, drain.rate, "events/s", usage=drain.usage, details=details, cpu_us=cpu_us
    )


def _run_measurement(label: str, run: Run) -> Measurement:
    cpu_us = per_event_us(run.cpu_s, run.events)
    return Measurement(label, run.rate, "events/s", details=run.details(), cpu_us=cpu_us)


async def _solo_drain(
    sizes: Sizes, server: Server, profiler: Profiler | None = None, name: str = ""
) -> Drain:
    """One agent's backlog, published first, drained by one client."""
    backlog = {"solo": sizes.backlog} | ({"profiled": sizes.backlog} if profiler else {})
    keys = {handle: await create_agent(server, handle) for handle in backlog}
    await _prefill(server, backlog, sizes.batch_size)
    limit, seconds = sizes.drain_limit, sizes.drain_seconds
    solo = await _drain(server, [keys["solo"]], limit, seconds)
    await _profile(
        profiler, server, name, f"POST /channel/heartbeat, limit={limit}, one drainer",
        lambda: _drain(server, [keys["profiled"]], limit, seconds),
    )  # fmt: skip
    return solo


async def _parallel_drain(sizes: Sizes, server: Server) -> Drain:
    """The backlog split among ``sizes.drainers`` agents, drained at once."""
    share = max(1, sizes.backlog // sizes.drainers)
    handles = [f"shared-{index}" for index in range(sizes.drainers)]
    keys = [await create_agent(server, handle) for handle in handles]
    await _prefill(server, dict.fromkeys(handles, share), sizes.batch_size)
    return await _drain(server, keys, sizes.drain_limit, sizes.drain_seconds)


@dataclass(frozen=True)
class SqliteDrains:
    herald: Drain
    parallel: Drain
    bare: Drain


async def _sqlite_drains(sizes: Sizes, workdir: Path, profiler: Profiler | None) -> SqliteDrains:
    async with bare_server(workdir, "bare-drain") as bare:
        floor = await _solo_drain(sizes, bare)
    async with herald_server(workdir, "http-drain") as server:
        solo = await _solo_drain(sizes, server, profiler, "fig4-drain")
        parallel = await _parallel_drain(sizes, server)
    return SqliteDrains(solo, parallel, floor)


def _method(sizes: Sizes) -> str:
    limit = sizes.drain_limit
    return (
        f"A backlog of {sizes.backlog:,} events is published first (batches, not timed);"
        f" one client then sends POST /channel/heartbeat {{cursor, limit: {limit}}} with the"
        " cursor of the previous answer (which acks everything up to it and leases the next"
        f" {limit}) until an empty answer, or {sizes.drain_seconds:g} s. The client parses"
        " each answer with json.loads."
    )


def _solo_label(store: str) -> str:
    return f"POST /channel/heartbeat on {store}, one agent, one drainer"


async def drain_figures(
    sizes: Sizes, workdir: Path, profiler: Profiler | None, postgres_url: str | None
) -> list[Figure]:
    """Figure 4, and with a PostgreSQL to use, 4b beside it."""
    sqlite = await _sqlite_drains(sizes, workdir, profiler)
    figures = [await _sqlite_figure(sizes, workdir, sqlite)]
    if postgres_url is not None:
        figures.append(await _postgres_figure(sizes, workdir, postgres_url, sqlite.herald))
    return figures


async def _sqlite_figure(sizes: Sizes, workdir: Path, drains: SqliteDrains) -> Figure:
    limit = sizes.drain_limit
    raw = raw_sqlite.drain(workdir / "raw-drain.db", sizes.backlog, limit, sizes.drain_seconds)
    api = await _api_drain(sizes, workdir)
    share = max(1, sizes.backlog // sizes.drainers)
    solo, parallel, floor = drains.herald, drains.parallel, drains.bare
    figure = Figure(
        "4",
        f"Heartbeat drain with cursor, limit={limit}, SQLite",
        _drain_measurement("the bare endpoint's POST /channel/heartbeat", floor, sizes.backlog),
        Target("≥ 0.7x the bare endpoint", "ratio_at_least", 0.7),
        _drain_measurement(_solo_label("SQLite"), solo, sizes.backlog),
        diagnostics=[
            _drain_measurement(
                f"{sizes.drainers} agents drained in parallel", parallel, share * sizes.drainers
            ),
            _run_measurement(f"Hub.drain(cursor, limit={limit}) in process", api),
            _run_measurement(f"sqlite3, ack-to-cursor + lease {limit} per COMMIT", raw),
        ],
        method=[
            SERVER_METHOD,
            _method(sizes),
            f"Baseline: {BARE_DRAIN}, on a fresh SQLite file (WAL + synchronous=FULL), with the"
            " same backlog and client.",
            f"Diagnostics: {sizes.drainers} agents drained at once (one connection each, the same"
            " backlog split among them); Hub.drain in process (no HTTP); plain `sqlite3` doing"
            " the same state changes per step in one transaction (mark delivered up to the"
            " cursor, select the next events, lease them, COMMIT) in this process, without"
            " HTTP or JSON.",
            CPU_METHOD,
        ],
    )
    figure.notes += _http_notes([solo.usage, parallel.usage, floor.usage], solo.usage)
    if solo.events < sizes.backlog:
        figure.notes.append(
            f"The drain stopped at its time limit after {solo.events:,} of"
            f" {sizes.backlog:,} events; the rate is over what was drained."
        )
    return figure


async def _postgres_drains(sizes: Sizes, workdir: Path, admin_url: str) -> tuple[Drain, Drain]:
    """herald's drain and the bare endpoint's, each on a scratch database of its own."""
    async with (
        raw_postgres.scratch_database(admin_url) as url,
        bare_server(workdir, "bare-drain-postgres", store=url) as bare,
    ):
        floor = await _solo_drain(sizes, bare)
    async with (
        raw_postgres.scratch_database(admin_url) as url,
        herald_server(workdir, "http-drain-postgres", store=url) as server,
    ):
        solo = await _solo_drain(sizes, server)
    return solo, floor


async def _postgres_figure(sizes: Sizes, workdir: Path, admin_url: str, sqlite: Drain) -> Figure:
    limit = sizes.drain_limit
    baseline = _drain_measurement(f"{_solo_label('SQLite')} (figure 4's)", sqlite, sizes.backlog)
    target = Target("≥ 0.7x herald's drain on SQLite", "ratio_at_least", 0.7)
    title = f"Heartbeat drain with cursor, limit={limit}, PostgreSQL"
    method = [
        "Server: `herald serve --store postgresql://...` (a scratch database on 127.0.0.1:5432"
        " created for the figure and dropped after it; durability is the server's,"
        " synchronous_commit on), otherwise as figure 4. The PostgreSQL server shares the"
        " machine's cores: its CPU is in the other processes' share.",
        _method(sizes),
        "Baseline: herald's own drain on SQLite, figure 4's, measured in the same run.",
        f"Diagnostic: {BARE_DRAIN}, on a scratch database of its own (asyncpg, one writer task"
        " on one connection).",
        CPU_METHOD + " The PostgreSQL server's CPU is not in it.",
    ]
    try:
        solo, floor = await _postgres_drains(sizes, workdir, admin_url)
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        return Figure(
            "4b", title, baseline, target, method=method,
            skipped=f"PostgreSQL at {admin_url} unavailable: {exc}",
        )  # fmt: skip
    figure = Figure(
        "4b",
        title,
        baseline,
        target,
        _drain_measurement(_solo_label("PostgreSQL"), solo, sizes.backlog),
        diagnostics=[
            _drain_measurement(
                "the bare endpoint's POST /channel/heartbeat on PostgreSQL", floor, sizes.backlog
            )
        ],
        method=method,
    )
    figure.notes += _http_notes([solo.usage, floor.usage], solo.usage)
    return figure
