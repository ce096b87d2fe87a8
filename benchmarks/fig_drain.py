"""Figures 4 and 4b: the heartbeat drain of a real ``herald serve``, on SQLite and on PostgreSQL,
each beside the bare endpoint doing the same drain steps (``bare_server.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from benchmarks import raw_postgres, raw_sqlite
from benchmarks.config import Sizes
from benchmarks.cpu import Probe, Usage, processes_cpu_s, used_since
from benchmarks.fig_http import (
    CPU_METHOD,
    OK,
    SERVER_METHOD,
    batch_body,
    bench_event,
)
from benchmarks.loadgen import (
    Connection,
    close_connections,
    encode_request,
    open_connections,
    send_all,
)
from benchmarks.measure import Run, Stopwatch, alternate, median_round
from benchmarks.profiling import Profiler
from benchmarks.results import Figure, Measurement, Target, http_notes, per_event_us
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
    database_s: float | None = None
    """CPU seconds the PostgreSQL server's processes serving the drained store used meanwhile."""

    @property
    def rate(self) -> float:
        return self.events / self.wall_s if self.wall_s else 0.0


async def drain_one(server: Server, key: str, limit: int, deadline: float) -> tuple[int, int]:
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


async def drain_backlogs(
    server: Server, keys: list[str], limit: int, seconds: float, database: str | None = None
) -> Drain:
    """The drain of ``keys``' backlogs; with ``database`` (the store's PostgreSQL database),
    also the CPU of the server processes serving it, read from /proc around the drain."""
    backends = processes_cpu_s(await raw_postgres.backend_pids(database)) if database else {}
    probe = Probe(server.pid)
    deadline = time.perf_counter() + seconds
    counts = await asyncio.gather(*(drain_one(server, key, limit, deadline) for key in keys))
    usage = probe.stop()
    database_s = None
    if database is not None:
        after = processes_cpu_s(await raw_postgres.backend_pids(database))
        database_s = used_since(backends, after)
    events = sum(count[0] for count in counts)
    return Drain(events, sum(count[1] for count in counts), usage.wall_s, usage, database_s)


async def prefill(server: Server, backlog: dict[str, int], batch_size: int) -> None:
    requests = []
    for handle, count in backlog.items():
        for start in range(0, count, batch_size):
            body = batch_body(handle, min(batch_size, count - start))
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
            await hub.publish_many([parse_new_event(bench_event("bench", i)) for i in range(count)])
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


def _rounds_measurement(label: str, drains: list[Drain], expected: int) -> Measurement:
    """The median round, every round's rate beside it, and the CPU per event of all rounds."""
    shown = _drain_measurement(label, median_round(drains, lambda d: d.rate), expected)
    shown.details["rounds"] = " / ".join(f"{drain.rate:,.0f}" for drain in drains)
    server_s = sum(drain.usage.server_s or 0.0 for drain in drains)
    events = sum(drain.events for drain in drains)
    shown.cpu_us = per_event_us(server_s, events)
    if all(drain.database_s is not None for drain in drains):
        database_us = per_event_us(sum(drain.database_s or 0.0 for drain in drains), events)
        if database_us is not None:
            shown.details["PostgreSQL CPU µs/event"] = round(database_us, 1)
    return shown


def _run_measurement(label: str, run: Run) -> Measurement:
    cpu_us = per_event_us(run.cpu_s, run.events)
    return Measurement(label, run.rate, "events/s", details=run.details(), cpu_us=cpu_us)


BARE_SQLITE, HERALD_SQLITE = "bare endpoint, SQLite", "herald, SQLite"
HERALD_POSTGRES, BARE_POSTGRES = "herald, PostgreSQL", "bare endpoint, PostgreSQL"


@dataclass
class Drains:
    """Each side's drains, a round each; ``parallel``: herald's SQLite drain of several agents
    at once; ``postgres_error``: why PostgreSQL's sides were not measured."""

    rounds: dict[str, list[Drain]]
    parallel: Drain
    postgres_error: str | None = None


async def _servers(
    stack: contextlib.AsyncExitStack,
    workdir: Path,
    postgres_url: str | None,
    databases: dict[str, str],
) -> tuple[dict[str, Server], str | None]:
    """The servers of the drain figures, each on a store of its own: bare and herald on SQLite,
    and on PostgreSQL if there is one (else why not), its sides' databases put in
    ``databases``."""
    servers = {
        BARE_SQLITE: await stack.enter_async_context(bare_server(workdir, "bare-drain")),
        HERALD_SQLITE: await stack.enter_async_context(herald_server(workdir, "http-drain")),
    }
    if postgres_url is None:
        return servers, None
    try:
        herald_db = await stack.enter_async_context(raw_postgres.scratch_database(postgres_url))
        bare_db = await stack.enter_async_context(raw_postgres.scratch_database(postgres_url))
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        return servers, f"PostgreSQL at {postgres_url} unavailable: {exc}"
    servers[HERALD_POSTGRES] = await stack.enter_async_context(
        herald_server(workdir, "http-drain-postgres", store=herald_db)
    )
    servers[BARE_POSTGRES] = await stack.enter_async_context(
        bare_server(workdir, "bare-drain-postgres", store=bare_db)
    )
    databases.update({HERALD_POSTGRES: herald_db, BARE_POSTGRES: bare_db})
    return servers, None


async def _drains(
    sizes: Sizes, workdir: Path, profiler: Profiler | None, postgres_url: str | None
) -> Drains:
    """Every side's backlogs published first (one agent a round), then the rounds: each side
    drains one agent's backlog, the order alternating between rounds."""
    limit, seconds, rounds = sizes.drain_limit, sizes.drain_seconds, sizes.http_rounds
    per_round = max(1, sizes.backlog // rounds)
    async with contextlib.AsyncExitStack() as stack:
        databases: dict[str, str] = {}
        servers, postgres_error = await _servers(stack, workdir, postgres_url, databases)
        keys: dict[str, list[str]] = {}
        for side, server in servers.items():
            handles = [f"round-{index}" for index in range(rounds)]
            keys[side] = [await create_agent(server, handle) for handle in handles]
            await prefill(server, dict.fromkeys(handles, per_round), sizes.batch_size)

        def drain(side: str) -> Callable[[], Awaitable[Drain]]:
            agents = iter(keys[side])
            database = databases.get(side)
            return lambda: drain_backlogs(servers[side], [next(agents)], limit, seconds, database)

        measured = await alternate({side: drain(side) for side in servers}, rounds)
        herald = servers[HERALD_SQLITE]
        parallel = await _parallel_drain(sizes, herald)
        if profiler is not None:
            for side, name in ((HERALD_SQLITE, "fig4-drain"), (BARE_SQLITE, "fig4-bare-drain")):
                server = servers[side]
                key = await create_agent(server, "profiled")
                await prefill(server, {"profiled": sizes.backlog}, sizes.batch_size)
                await profiler.run(
                    server.pid, name, f"POST /channel/heartbeat, limit={limit}, {side}",
                    drain_backlogs(server, [key], limit, seconds),
                )  # fmt: skip
    return Drains(measured, parallel, postgres_error)


async def _parallel_drain(sizes: Sizes, server: Server) -> Drain:
    """The backlog split among ``sizes.drainers`` agents, drained at once."""
    share = max(1, sizes.backlog // sizes.drainers)
    handles = [f"shared-{index}" for index in range(sizes.drainers)]
    keys = [await create_agent(server, handle) for handle in handles]
    await prefill(server, dict.fromkeys(handles, share), sizes.batch_size)
    return await drain_backlogs(server, keys, sizes.drain_limit, sizes.drain_seconds)


def _method(sizes: Sizes) -> str:
    limit, rounds = sizes.drain_limit, sizes.http_rounds
    return (
        f"Each side's backlog, {sizes.backlog // rounds:,} events for each of {rounds} agents"
        f" (one a round), is published first (batches, not timed). In each round one client"
        f" drains one agent of each side in turn (the order alternating between rounds) with"
        f" POST /channel/heartbeat {{cursor, limit: {limit}}}, sending the cursor of the"
        " previous answer (which acks everything up to it and leases the next"
        f" {limit}) until an empty answer, or {sizes.drain_seconds:g} s. The client parses each"
        " answer with json.loads. Each side shows its median round (every round's rate in the"
        " details, CPU per event over all rounds)."
    )


def _label(side: str) -> str:
    return f"POST /channel/heartbeat, {side}, one drainer"


async def drain_figures(
    sizes: Sizes, workdir: Path, profiler: Profiler | None, postgres_url: str | None
) -> list[Figure]:
    """Figure 4, and with a PostgreSQL to use, 4b beside it: their drains measured together."""
    drains = await _drains(sizes, workdir, profiler, postgres_url)
    figures = [await _sqlite_figure(sizes, workdir, drains)]
    if postgres_url is not None:
        figures.append(_postgres_figure(sizes, drains))
    return figures


async def _sqlite_figure(sizes: Sizes, workdir: Path, drains: Drains) -> Figure:
    limit, backlog = sizes.drain_limit, sizes.backlog
    raw = raw_sqlite.drain(workdir / "raw-drain.db", backlog, limit, sizes.drain_seconds)
    api = await _api_drain(sizes, workdir)
    share = max(1, backlog // sizes.drainers)
    herald, bare = drains.rounds[HERALD_SQLITE], drains.rounds[BARE_SQLITE]
    per_round = backlog // sizes.http_rounds
    figure = Figure(
        "4",
        f"Heartbeat drain with cursor, limit={limit}, SQLite",
        _rounds_measurement(_label(BARE_SQLITE), bare, per_round),
        Target("≥ 0.7x the bare endpoint", "ratio_at_least", 0.7),
        _rounds_measurement(_label(HERALD_SQLITE), herald, per_round),
        diagnostics=[
            _drain_measurement(
                f"herald, {sizes.drainers} agents drained in parallel",
                drains.parallel,
                share * sizes.drainers,
            ),
            _run_measurement(f"Hub.drain(cursor, limit={limit}) in process", api),
            _run_measurement(f"sqlite3, ack-to-cursor + lease {limit} per COMMIT", raw),
        ],
        method=[
            SERVER_METHOD,
            _method(sizes),
            f"Baseline: {BARE_DRAIN}, on a fresh SQLite file (WAL + synchronous=FULL).",
            f"Diagnostics: herald with {sizes.drainers} agents drained at once (one connection"
            " each, the backlog split among them); Hub.drain in process (no HTTP); plain"
            " `sqlite3` doing the same state changes per step in one transaction (mark delivered"
            " up to the cursor, select the next events, lease them, COMMIT) in this process,"
            f" without HTTP or JSON; {backlog:,} events each.",
            CPU_METHOD,
        ],
    )
    usages = [drain.usage for drain in herald + bare]
    assert figure.herald is not None
    figure.notes += http_notes([*usages, drains.parallel.usage], figure.herald.usage)
    figure.notes += _short_notes(herald + bare, per_round, sizes)
    return figure


def _short_notes(drains: list[Drain], expected: int, sizes: Sizes) -> list[str]:
    short = [drain for drain in drains if drain.events < expected]
    if not short:
        return []
    return [
        f"{len(short)} drain(s) stopped at the {sizes.drain_seconds:g} s limit before the"
        " backlog was empty; their rate is over what was drained."
    ]


def _postgres_figure(sizes: Sizes, drains: Drains) -> Figure:
    limit = sizes.drain_limit
    per_round = sizes.backlog // sizes.http_rounds
    baseline = _rounds_measurement(
        f"{_label(HERALD_SQLITE)} (figure 4's)", drains.rounds[HERALD_SQLITE], per_round
    )
    figure = Figure(
        "4b",
        f"Heartbeat drain with cursor, limit={limit}, PostgreSQL",
        baseline,
        Target("≥ 0.7x herald's drain on SQLite", "ratio_at_least", 0.7),
        method=[
            "Server: `herald serve --store postgresql://...` (a scratch database on"
            " 127.0.0.1:5432 created for the figure and dropped after it; durability is the"
            " server's, synchronous_commit on), otherwise as figure 4. The PostgreSQL server"
            " shares the machine's cores: its CPU is in the other processes' share.",
            _method(sizes) + " Figure 4's sides are the same rounds.",
            "Baseline: herald's own drain on SQLite, figure 4's, in the same rounds.",
            f"Diagnostic: {BARE_DRAIN}, on a scratch database of its own (asyncpg, one writer"
            " task on one connection).",
            CPU_METHOD + " The PostgreSQL server's CPU is not in it: each PostgreSQL side"
            " shows it apart (PostgreSQL CPU µs/event: the CPU of the server processes serving"
            " its database, from /proc, over the events drained).",
        ],
        skipped=drains.postgres_error,
    )
    if drains.postgres_error is not None:
        return figure
    herald, bare = drains.rounds[HERALD_POSTGRES], drains.rounds[BARE_POSTGRES]
    figure.herald = _rounds_measurement(_label(HERALD_POSTGRES), herald, per_round)
    figure.diagnostics.append(_rounds_measurement(_label(BARE_POSTGRES), bare, per_round))
    figure.notes += http_notes([d.usage for d in herald + bare], figure.herald.usage)
    figure.notes += _short_notes(herald + bare, per_round, sizes)
    return figure
