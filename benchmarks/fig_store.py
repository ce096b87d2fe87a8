"""Figure 1: durable publish through the Python API against plain inserts with the raw driver.

The phases of a figure run interleaved, in rounds (raw, herald, raw, herald, ...), and each side
is reported as the median of its rounds, so a slow spell of the disk or the machine is shared by
both sides instead of landing on one.
"""

from __future__ import annotations

import importlib.util
import itertools
import statistics
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg

from benchmarks import raw_postgres, raw_sqlite
from benchmarks.config import Sizes
from benchmarks.measure import Publish, Run, concurrent, sequential
from benchmarks.results import NOISY, Figure, Measurement, Target, per_event_us
from herald import Hub

HALF = Target("≥ 0.5x raw", "ratio_at_least", 0.5)
PLAIN = Target("≥ 0.7x the same statements run plainly", "ratio_at_least", 0.7)
EVENT: dict[str, Any] = {"type": "bench.tick", "text": "hello from the benchmark", "data": {"n": 1}}
WARMUP = 200
Phase = Callable[[], Awaitable[Run]]


def _median(label: str, runs: list[Run]) -> Measurement:
    """The median rate of the rounds, with every round's rate in the details."""
    wall = sum(run.wall_s for run in runs)
    details = {
        "rounds": " / ".join(f"{run.rate:,.0f}" for run in runs),
        "events": sum(run.events for run in runs),
        "seconds": round(wall, 2),
        "process CPU share": round(sum(run.cpu_s for run in runs) / wall, 2) if wall else None,
        "other processes CPU share": round(_others(runs), 2),
    }
    median = statistics.median(run.rate for run in runs)
    cpu_us = per_event_us(sum(run.cpu_s for run in runs), sum(run.events for run in runs))
    return Measurement(label, median, "events/s", details=details, cpu_us=cpu_us)


def _others(runs: list[Run]) -> float:
    wall = sum(run.wall_s for run in runs)
    return sum(run.others_s for run in runs) / wall if wall else 0.0


def _noise(runs: dict[str, list[Run]]) -> list[str]:
    """A warning when other processes were busy during an in-process SQLite figure."""
    worst = max(_others(phase) for phase in runs.values())
    if worst < NOISY:
        return []
    return [
        f"WARNING: other processes used up to {worst:.0%} of a core during these phases; the"
        " figures may be lower than on a quiet machine."
    ]


async def _interleave(phases: dict[str, Phase], rounds: int) -> dict[str, list[Run]]:
    runs: dict[str, list[Run]] = {name: [] for name in phases}
    for _ in range(rounds):
        for name, phase in phases.items():
            runs[name].append(await phase())
    return runs


def _publisher(hub: Hub, handles: list[str]) -> Publish:
    """``hub.publish`` of the benchmark event, to each handle in turn."""
    turn = itertools.cycle(handles)

    def publish() -> Any:
        return hub.publish(next(turn), **EVENT)

    return publish


async def _open_hub(url: str, handles: list[str]) -> Hub:
    hub = Hub.from_url(url)
    await hub.open()
    for handle in handles:
        await hub.create_agent(handle)
    await sequential(_publisher(hub, handles), WARMUP, 5.0)
    return hub


_SHAPED = (
    "1a's baseline: plain `sqlite3` running the statements herald runs for one publish (the"
    " agent found by handle and its seq taken in one `UPDATE agents ... RETURNING id,"
    " last_seq`, INSERT) with a COMMIT each,"
    " sequentially: what is left between it and herald is herald's own Python (its journal row"
    " and counts included) and the hand-off to its writer thread and back. The plain INSERT +"
    " COMMIT is its diagnostic."
)
_SHAPED_POSTGRES = (
    "1c's baseline: plain `asyncpg` on one connection running the statement herald runs for one"
    " publish (the agent's seq taken from its row, `UPDATE ... RETURNING`, and the INSERT, in"
    " one statement with a CTE, its own commit), one after another, without herald's journal"
    " row, counts, dedupe lookup and publish lock. The plain INSERT is its diagnostic."
)


CPU_METHOD = (
    "CPU µs/event: this process's CPU time over the events of all rounds (herald's writer"
    " thread included; the PostgreSQL server's not)."
)


def _limits(sizes: Sizes) -> str:
    return (
        f"{sizes.store_rounds} interleaved rounds; each phase of a round stops at"
        f" {sizes.store_events:,} events or {sizes.store_seconds:g} s; the median round is shown."
    )


def _sqlite_method(sizes: Sizes) -> list[str]:
    return [
        "Both sides run in this process on uvloop, on fresh files under the same directory, at the"
        " same durability: WAL with synchronous=FULL, each event committed before it counts.",
        "Raw: `sqlite3`, one `BEGIN; INSERT; COMMIT` per event into a table with the columns and"
        " key indexes of herald's events table, sequentially. SQLite has one writer, so this is"
        " also the raw ceiling for concurrent publishers that each wait for their commit.",
        f"herald: `Hub.publish(...)` awaited one at a time, or by {sizes.publishers} concurrent"
        " tasks (herald's writer thread then commits many publishes at once).",
        _limits(sizes),
        CPU_METHOD,
    ]


async def sqlite_figures(sizes: Sizes, workdir: Path) -> list[Figure]:
    count, seconds = sizes.store_events, sizes.store_seconds

    async def raw() -> Run:
        return raw_sqlite.inserts(workdir / "raw-inserts.db", count, seconds)

    async def shaped() -> Run:
        return raw_sqlite.shaped_inserts(workdir / "raw-shaped.db", count, seconds)

    hub = await _open_hub(f"sqlite:///{workdir / 'api.db'}", ["bench"])
    try:
        publish = _publisher(hub, ["bench"])
        runs = await _interleave(
            {
                "raw": raw,
                "shaped": shaped,
                "one": lambda: sequential(publish, count, seconds),
                "many": lambda: concurrent(publish, sizes.publishers, count, seconds),
            },
            sizes.store_rounds,
        )
    finally:
        await hub.close()
    baseline = _median("sqlite3, INSERT + COMMIT per event", runs["raw"])
    method = _sqlite_method(sizes)
    one = _median("Hub.publish, awaited in turn", runs["one"])
    many = _median(f"Hub.publish, {sizes.publishers} tasks", runs["many"])
    statements = _median("sqlite3, herald's statements per publish, COMMIT each", runs["shaped"])
    return [
        Figure(
            "1a",
            "Python API publish, SQLite, sequential",
            statements,
            PLAIN,
            one,
            diagnostics=[baseline],
            method=[*method, _SHAPED],
            notes=_noise(runs),
        ),
        Figure(
            "1b",
            f"Python API publish, SQLite, {sizes.publishers} publishers",
            baseline,
            HALF,
            many,
            method=method,
            notes=_noise(runs),
        ),
    ]


def _postgres_method(sizes: Sizes) -> list[str]:
    return [
        "A scratch database on 127.0.0.1:5432 is created for the run and dropped after it;"
        " durability is the server's (synchronous_commit on): each event committed before it"
        " counts.",
        "Raw: `asyncpg`, one plain `INSERT` per event (its own transaction) into a table like"
        f" herald's events table, on 1 connection (sequential) or {sizes.publishers} connections"
        f" ({sizes.publishers} concurrent publishers).",
        "herald: `Hub.publish(...)` on the PostgreSQL store (its own connection pool), awaited in"
        f" turn or by {sizes.publishers} tasks, all to one agent; a diagnostic spreads the"
        f" {sizes.publishers} tasks over {sizes.publishers} agents.",
        _limits(sizes),
        "The other processes' CPU share includes the PostgreSQL server's.",
        CPU_METHOD,
    ]


def _postgres_missing() -> str | None:
    if importlib.util.find_spec("herald.store.postgres") is None:
        return "herald.store.postgres does not exist yet"
    return None


async def _postgres_runs(sizes: Sizes, url: str, with_herald: bool) -> dict[str, list[Run]]:
    count, seconds, width = sizes.store_events, sizes.store_seconds, sizes.publishers
    phases: dict[str, Phase] = {
        "raw_one": lambda: raw_postgres.inserts(url, 1, count, seconds),
        "shaped": lambda: raw_postgres.shaped_inserts(url, count, seconds),
        "raw_many": lambda: raw_postgres.inserts(url, width, count, seconds),
    }
    if not with_herald:
        return await _interleave(phases, sizes.store_rounds)
    handles = [f"bench-{index}" for index in range(width)]
    hub = await _open_hub(url, handles)
    try:
        one_agent, spread = _publisher(hub, handles[:1]), _publisher(hub, handles)
        phases["one"] = lambda: sequential(one_agent, count, seconds)
        phases["many"] = lambda: concurrent(one_agent, width, count, seconds)
        phases["wide"] = lambda: concurrent(spread, width, count, seconds)
        return await _interleave(phases, sizes.store_rounds)
    finally:
        await hub.close()


async def postgres_figures(sizes: Sizes, admin_url: str) -> list[Figure]:
    method = _postgres_method(sizes)
    missing = _postgres_missing()
    try:
        async with raw_postgres.scratch_database(admin_url) as url:
            runs = await _postgres_runs(sizes, url, with_herald=missing is None)
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        return [_unreachable(admin_url, exc, method)]
    width = sizes.publishers
    one_fig = Figure(
        "1c",
        "Python API publish, PostgreSQL, sequential",
        _median("asyncpg, herald's statement per publish, 1 connection", runs["shaped"]),
        PLAIN,
        diagnostics=[_median("asyncpg, INSERT per event, 1 connection", runs["raw_one"])],
        method=[*method, _SHAPED_POSTGRES],
        skipped=missing,
    )
    many_fig = Figure(
        "1d",
        f"Python API publish, PostgreSQL, {width} publishers",
        _median(f"asyncpg, INSERT per event, {width} connections", runs["raw_many"]),
        HALF,
        method=method,
        skipped=missing,
    )
    if missing is None:
        one_fig.herald = _median("Hub.publish, awaited in turn", runs["one"])
        many_fig.herald = _median(f"Hub.publish, {width} tasks, one agent", runs["many"])
        wide = _median(f"Hub.publish, {width} tasks, each to its own agent", runs["wide"])
        many_fig.diagnostics.append(wide)
    return [one_fig, many_fig]


def _unreachable(admin_url: str, exc: BaseException, method: list[str]) -> Figure:
    reason = f"PostgreSQL at {admin_url} unavailable: {exc}"
    nothing = Measurement("asyncpg", float("nan"), "events/s", text="not measured")
    return Figure(
        "1c", "Python API publish, PostgreSQL", nothing, HALF, method=method, skipped=reason
    )
