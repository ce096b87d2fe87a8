"""Figure 16: `herald serve --workers 1, 2, 4` on PostgreSQL, as a curve with each process's CPU.

Figure 2's load (one event per `POST /v1/events`, a closed loop over many connections) against a
hub on a fresh PostgreSQL database served by N forked processes on one port, for N = 1, 2 and 4
in the same run; then a heartbeat drain (figure 4's, several agents at once) at each N. No
target: the curve is reported, with the CPU each process took (each worker, the first process,
PostgreSQL's server processes, the load generator) and the bottleneck it points to. The machine
has two cores, and PostgreSQL and the load generator share them with herald.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from benchmarks import raw_postgres
from benchmarks.config import Sizes
from benchmarks.cpu import Probe, Usage
from benchmarks.fig_drain import drain_one, prefill
from benchmarks.fig_http import SINGLE_EVENT, answered, closed_rate
from benchmarks.loadgen import (
    ClosedLoopResult,
    Connection,
    close_connections,
    closed_loop,
    encode_request,
    open_connections,
)
from benchmarks.results import Figure, Measurement, Target
from benchmarks.server import Server, ServerFailure, create_agent, herald_server

TITLE = "HTTP publish on PostgreSQL, --workers 1, 2, 4"
TARGET = Target("none set (reported as a curve)", "none", math.nan)
WORKER_COUNTS = (1, 2, 4)
CORES = 2
"""This machine's; the report's bottleneck is named against them."""
BUSY = 0.9
"""A share of all cores at which the machine, not one process, is what limits the rate."""
UNEVEN = 0.6
"""A share of the connections above which one worker is named as holding most of them."""
DRAIN_BACKLOG = 24_000
"""Events drained at each N: enough for a steady rate, small enough that the three drains and
their prefills fit in about a minute."""
_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a process, or None once it has ended."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[0] == parent:
                found.append(int(entry.name))
    return sorted(found)


def _postgres_processes(postmaster: int, database: str) -> list[int]:
    """The PostgreSQL server's processes that work for this database: its backends (named by
    the database in their title) and the server's own (WAL writer, checkpointer...); the
    backends of other databases on the shared server are left out."""
    ours = []
    for pid in _children(postmaster):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        is_backend = "(" in title or "[local]" in title
        if not is_backend or f" {database} " in title:
            ours.append(pid)
    return [postmaster, *ours]


ESTABLISHED = "01"
"""A TCP connection's state in /proc/net/tcp."""


def _connections_of(pids: list[int], port: int) -> list[int]:
    """How many established connections to ``port`` each of ``pids`` holds (the kernel hands
    each accepted connection to the one worker that accepted it, which keeps it)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == ESTABLISHED and int(fields[1].rsplit(":", 1)[1], 16) == port:
            inodes.add(f"socket:[{fields[9]}]")
    counts = []
    for pid in pids:
        held = 0
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    held += os.readlink(fd) in inodes
        counts.append(held)
    return counts


@dataclass
class ProcessCpu:
    """CPU seconds of each named process over a window: herald's (as ``herald`` names them when
    asked) and PostgreSQL's, beside the generator's and the machine's (``Probe``)."""

    herald: Callable[[], dict[str, int]]
    postmaster: int
    database: str

    def start(self) -> None:
        self._probe = Probe()
        self._before = self._sample()

    def _sample(self) -> dict[str, float]:
        named = {name: [pid] for name, pid in self.herald().items()}
        named["PostgreSQL"] = _postgres_processes(self.postmaster, self.database)
        return {
            name: sum(stat[1] for pid in pids if (stat := _stat(pid)) is not None)
            for name, pids in named.items()
        }

    def stop(self) -> tuple[Usage, dict[str, float]]:
        """The window's usage (server: herald's processes together) and each process's share
        of one core."""
        after = self._sample()
        probe = self._probe.stop()
        spent = {name: after[name] - self._before.get(name, 0.0) for name in after}
        herald_s = sum(s for name, s in spent.items() if name != "PostgreSQL")
        usage = Usage(probe.wall_s, probe.generator_s, herald_s, None, probe.machine_s)
        shares = {name: s / probe.wall_s for name, s in spent.items()} if probe.wall_s else {}
        return usage, shares


async def _postmaster(url: str) -> tuple[int, str]:
    """The PostgreSQL server's pid (the parent of a backend) and the database's name."""
    conn = await asyncpg.connect(url)
    try:
        backend = await conn.fetchval("SELECT pg_backend_pid()")
        database = await conn.fetchval("SELECT current_database()")
        stat = _stat(int(backend))  # while it runs: it ends with the connection
    finally:
        await conn.close()
    if stat is None:
        raise OSError("PostgreSQL's processes are not visible here (another host?)")
    return stat[0], str(database)


def _rss_mb(pids: list[int]) -> str:
    """Each process's resident memory, in MB, "/" between them."""
    sizes = []
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        kilobytes = next(int(line.split()[1]) for line in status.splitlines() if "VmRSS" in line)
        sizes.append(f"{kilobytes / 1024:.0f}")
    return "/".join(sizes)


def _cpu_details(usage: Usage, shares: dict[str, float], events: int) -> dict[str, Any]:
    """What the report shows of one point of the curve: each process's share of one core, and
    CPU microseconds per event of herald's processes and of PostgreSQL's."""
    details: dict[str, Any] = {
        name.replace(" ", "_") + "_cpu": f"{share:.0%}" for name, share in shares.items()
    }
    details["generator_cpu"] = f"{usage.generator_share:.0%}"
    if events:
        herald_us = (usage.server_s or 0.0) / events * 1e6
        postgres_us = shares.get("PostgreSQL", 0.0) * usage.wall_s / events * 1e6
        details["herald_cpu_us_per_event"] = round(herald_us)
        details["postgres_cpu_us_per_event"] = round(postgres_us)
    details["bottleneck"] = _bottleneck(usage, shares, events)
    return details


def _bottleneck(usage: Usage, shares: dict[str, float], events: int) -> str:
    """What the rate points to, and what it would be alone on the machine. The CPU each process
    spent per event is taken as it was: then the load fills either one process's core (a
    process runs Python on about one core) or the machine's cores (herald's processes,
    PostgreSQL's and the generator together), whichever comes first. On a busy machine this
    names the limit that other work hides; when no CPU was near full, the rate was bound by
    waiting (commits, round trips) instead."""
    if not events or not usage.wall_s:
        return "nothing answered"
    rate = events / usage.wall_s
    machine = (usage.machine_s or 0.0) / usage.wall_s
    processes = {n: s for n, s in shares.items() if n != "PostgreSQL"}
    herald, postgres = sum(processes.values()), shares.get("PostgreSQL", 0.0)
    ours = herald + postgres + usage.generator_share
    others = max(0.0, machine - ours)
    busiest = max(processes, key=lambda name: processes[name])
    by_process = rate / processes[busiest] if processes[busiest] else math.inf
    by_cores = rate * CORES / ours if ours else math.inf
    now = f"now {machine:.2f} of {CORES} cores busy, {others:.2f} of them by other work"
    if machine < BUSY * CORES and max(processes[busiest], postgres) < BUSY:
        return f"waiting, not CPU ({now})"
    if by_process < by_cores:
        limit = f"one core, {busiest}'s: alone, CPU allows ~{by_process:,.0f} events/s"
    else:
        limit = (
            f"the {CORES} cores (herald {herald / rate * 1e6:.0f}, PostgreSQL"
            f" {postgres / rate * 1e6:.0f}, generator {usage.generator_share / rate * 1e6:.0f}"
            f" CPU µs per event): alone, CPU allows ~{by_cores:,.0f} events/s"
        )
    return f"{limit} ({now})"


@dataclass(frozen=True)
class Point:
    publish: Measurement
    drain: Measurement | None


def _workers_of(server: Server) -> Callable[[], dict[str, int]]:
    def named() -> dict[str, int]:
        workers = {f"worker {i + 1}": pid for i, pid in enumerate(_children(server.pid))}
        return {"first process": server.pid} | workers

    return named


async def _measured(
    herald: Callable[[], dict[str, int]], url: str, work: Callable[[], Awaitable[int]]
) -> tuple[Usage, dict[str, float], int]:
    postmaster, database = await _postmaster(url)
    cpu = ProcessCpu(herald, postmaster, database)
    cpu.start()
    events = await work()
    usage, shares = cpu.stop()
    return usage, shares, events


async def _publish(server: Server, url: str, workers: int, sizes: Sizes) -> Measurement:
    await create_agent(server, "bench")
    body = json.dumps({"to": "bench", **SINGLE_EVENT}).encode()
    publish = encode_request(
        "POST", "/v1/events", server.address, token=server.admin_key, body=body
    )
    connections = await open_connections(server.address, sizes.http_connections)
    try:
        await closed_loop(
            connections, publish, max_requests=10**9, max_seconds=sizes.warmup_seconds
        )
        spread = _connections_of(_children(server.pid) or [server.pid], server.address.port)
        result = None

        async def load() -> int:
            nonlocal result
            result = await closed_loop(
                connections, publish, max_requests=sizes.http_requests,
                max_seconds=sizes.http_seconds,
            )  # fmt: skip
            return answered(result)

        usage, shares, events = await _measured(_workers_of(server), url, load)
    finally:
        await close_connections(connections)
    assert result is not None
    label = f"POST /v1/events, --workers {workers}"
    measurement = closed_rate(label, result, usage, sizes.http_connections)
    measurement.details |= _cpu_details(usage, shares, events)
    measurement.details["connections_per_process"] = "/".join(map(str, spread))
    measurement.details["rss_mb_per_process"] = _rss_mb([server.pid, *_children(server.pid)])
    if len(spread) > 1 and max(spread) > UNEVEN * sum(spread):
        busiest = spread.index(max(spread)) + 1
        measurement.details["bottleneck"] += (
            f"; worker {busiest} accepted {max(spread)} of the {sum(spread)} connections (the"
            " first worker to wake accepts every connection waiting), so it does most of the work"
        )
    return measurement


async def _drain(server: Server, url: str, workers: int, sizes: Sizes) -> Measurement:
    handles = [f"drain-{index}" for index in range(sizes.drainers)]
    share = DRAIN_BACKLOG // len(handles)
    keys = [await create_agent(server, handle) for handle in handles]
    await prefill(server, dict.fromkeys(handles, share), sizes.batch_size)
    counts: list[tuple[int, int]] = []

    async def load() -> int:
        deadline = time.perf_counter() + sizes.drain_seconds
        drains = (drain_one(server, key, sizes.drain_limit, deadline) for key in keys)
        counts.extend(await asyncio.gather(*drains))
        return sum(count[0] for count in counts)

    usage, shares, events = await _measured(_workers_of(server), url, load)
    details: dict[str, Any] = {
        "events": events,
        "heartbeats": sum(count[1] for count in counts),
        "backlog": share * len(handles),
    }
    details |= _cpu_details(usage, shares, events)
    rate = events / usage.wall_s if usage.wall_s else 0.0
    label = f"heartbeat drain, {len(handles)} agents at once, --workers {workers}"
    return Measurement(label, rate, "events/s", usage=usage, details=details)


async def _point(admin_url: str, workdir: Path, workers: int, sizes: Sizes) -> Point:
    async with raw_postgres.scratch_database(admin_url) as url:
        name = f"workers-{workers}"
        extra = ("--workers", str(workers))
        async with herald_server(workdir, name, store=url, extra=extra) as server:
            publish = await _publish(server, url, workers, sizes)
            drain = await _drain(server, url, workers, sizes)
    return Point(publish, drain)


def _merged(results: list[ClosedLoopResult]) -> ClosedLoopResult:
    """Closed loops run side by side, as one: their answers over the longest one's time."""
    merged = ClosedLoopResult(wall_s=max(result.wall_s for result in results))
    for result in results:
        merged.requests += result.requests
        merged.statuses.update(result.statuses)
        merged.latencies_s += result.latencies_s
        merged.failures |= result.failures
    return merged


ADMIN_KEY_WAIT_S = 10.0
"""Far longer than a process keeps its copy of the admin key (a second)."""


async def _until_admin(server: Server, admin_key: str) -> None:
    """Wait (bounded) until ``server`` takes ``admin_key``."""
    request = encode_request("GET", "/v1/agents", server.address, token=admin_key)
    deadline = time.perf_counter() + ADMIN_KEY_WAIT_S
    connection = await Connection.open(server.address)
    try:
        while (status := (await connection.call(request))[0]) != 200:
            if time.perf_counter() > deadline:
                raise ServerFailure(f"the last admin key is still refused ({status})")
            await asyncio.sleep(0.1)
    finally:
        await connection.close()


async def _separate_publish(admin_url: str, workdir: Path, count: int, sizes: Sizes) -> Measurement:
    """Figure 2's load split evenly over ``count`` plain ``herald serve`` processes on one
    database, each on its own port: how herald scales when every process has its share of the
    connections (as behind a load balancer, or on several hosts)."""
    async with (
        raw_postgres.scratch_database(admin_url) as url,
        contextlib.AsyncExitStack() as stack,
    ):
        servers = [
            await stack.enter_async_context(herald_server(workdir, f"apart-{count}-{i}", url))
            for i in range(count)
        ]
        # Each started with an admin key of its own, and the last one's replaced the others'
        # in the store: every process takes it once its copy of the key has been read again.
        admin_key = servers[-1].admin_key
        for server in servers:
            await _until_admin(server, admin_key)
        await create_agent(servers[-1], "bench")
        body = json.dumps({"to": "bench", **SINGLE_EVENT}).encode()
        groups = []
        for server in servers:
            request = encode_request(
                "POST", "/v1/events", server.address, token=admin_key, body=body
            )
            connections = await open_connections(server.address, sizes.http_connections // count)
            stack.push_async_callback(close_connections, connections)
            groups.append((connections, request))
        await asyncio.gather(
            *(closed_loop(c, r, max_requests=10**9, max_seconds=sizes.warmup_seconds)
              for c, r in groups)
        )  # fmt: skip
        results: list[ClosedLoopResult] = []

        async def load() -> int:
            per_process = sizes.http_requests // count
            loops = (
                closed_loop(c, r, max_requests=per_process, max_seconds=sizes.http_seconds)
                for c, r in groups
            )
            results.extend(await asyncio.gather(*loops))
            return sum(answered(result) for result in results)

        def named() -> dict[str, int]:
            return {f"process {i + 1}": server.pid for i, server in enumerate(servers)}

        usage, shares, events = await _measured(named, url, load)
        rss = _rss_mb([server.pid for server in servers])
    label = f"POST /v1/events, {count} separate processes, each its own port"
    measurement = closed_rate(label, _merged(results), usage, sizes.http_connections)
    measurement.details |= _cpu_details(usage, shares, events)
    measurement.details["rss_mb_per_process"] = rss
    return measurement


def _curve_note(points: dict[int, Point], apart: list[Measurement]) -> str:
    one = points[WORKER_COUNTS[0]].publish.value
    steps = ", ".join(
        f"{n}: {p.publish.value:,.0f}/s ({p.publish.value / one:.2f}x)" for n, p in points.items()
    )
    separate = ", ".join(
        f"{n}: {m.value:,.0f}/s ({m.value / one:.2f}x)"
        for n, m in zip(WORKER_COUNTS[1:], apart, strict=True)
    )
    return (
        f"Publish curve, processes: rate (over --workers 1). --workers: {steps}; separate"
        f" processes on their own ports: {separate}."
    )


async def workers_figure(sizes: Sizes, workdir: Path, admin_url: str) -> Figure:
    points: dict[int, Point] = {}
    apart: list[Measurement] = []
    try:
        for workers in WORKER_COUNTS:
            points[workers] = await _point(admin_url, workdir, workers, sizes)
        for count in WORKER_COUNTS[1:]:
            apart.append(await _separate_publish(admin_url, workdir, count, sizes))
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        nothing = Measurement("--workers 1", float("nan"), "events/s", text="not measured")
        return Figure(
            "16", TITLE, nothing, TARGET, skipped=f"PostgreSQL at {admin_url} unavailable: {exc}"
        )
    first, last = points[WORKER_COUNTS[0]], points[WORKER_COUNTS[-1]]
    middle = [points[n].publish for n in WORKER_COUNTS[1:-1]]
    drains = [p.drain for p in points.values() if p.drain is not None]
    return Figure(
        "16",
        TITLE,
        first.publish,
        TARGET,
        herald=last.publish,
        diagnostics=[*middle, *drains, *apart],
        method=[
            "Server: `herald serve --store postgresql://... --workers N --port 0` as a"
            f" subprocess, N = {', '.join(map(str, WORKER_COUNTS))}, each on a fresh scratch"
            " database; with N > 1 the first process binds the port and forks N workers that"
            " serve it (the kernel hands each connection to one of them).",
            f"The machine has {CORES} cores, and PostgreSQL (on the same machine) and the load"
            " generator share them with herald's processes: this is the curve on one small"
            " host, not what more hosts would give.",
            f"Publish: figure 2's load, {sizes.http_connections} connections in a closed loop,"
            f" one event per POST /v1/events, a {sizes.warmup_seconds:g} s warm-up, then up to"
            f" {sizes.http_requests:,} requests or {sizes.http_seconds:g} s.",
            f"Drain: then {DRAIN_BACKLOG:,} events published in batches (not timed) to"
            f" {sizes.drainers} agents, drained at once, one connection each, by POST"
            f" /channel/heartbeat {{cursor, limit: {sizes.drain_limit}}} until empty or"
            f" {sizes.drain_seconds:g} s.",
            f"Separate processes: the publish load split evenly over N = "
            f"{', '.join(map(str, WORKER_COUNTS[1:]))} plain `herald serve` processes on one"
            " fresh database, each on its own port (as behind a load balancer, or on N hosts):"
            " the same work with every process given its share of the connections.",
            "CPU: each process's utime + stime from /proc over the measured window, as a share"
            " of one core: herald's first process, each worker, PostgreSQL's server processes"
            " (the postmaster, its own workers and the backends of this database), the"
            " generator. 'server CPU' below is herald's processes together; CPU µs per event"
            " are herald's and PostgreSQL's over the events answered.",
            "Bottleneck: with the CPU each process spent per event as measured, what the load"
            " would fill first alone on the machine: one process's core (Python runs on about"
            f" one), or the {CORES} cores (herald's processes, PostgreSQL's and the generator"
            " together), and the rate at which it would; other work on the machine is shown"
            f" beside it. When neither the machine nor any process was {BUSY:.0%} busy, the"
            " rate was bound by waiting (commits, round trips).",
        ],
        notes=[_curve_note(points, apart)],
    )
