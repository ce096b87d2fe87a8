"""Figure 1: durable publish through the Python API against plain inserts with the raw driver."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path
from typing import Any

import asyncpg

from benchmarks import raw_postgres, raw_sqlite
from benchmarks.config import Sizes
from benchmarks.measure import Publish, Run, concurrent, sequential
from benchmarks.results import Figure, Measurement, Target
from herald import Hub

HALF = Target("≥ 0.5x raw", "ratio_at_least", 0.5)
EVENT: dict[str, Any] = {"type": "bench.tick", "text": "hello from the benchmark", "data": {"n": 1}}
WARMUP = 200


def _rate(label: str, run: Run, **extra: Any) -> Measurement:
    return Measurement(label, run.rate, "events/s", details={**run.details(), **extra})


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


def _sqlite_method(sizes: Sizes) -> list[str]:
    return [
        "Both sides run in this process on uvloop, on fresh files under the same directory, at the"
        " same durability: WAL with synchronous=FULL, each event committed before it counts.",
        "Raw: `sqlite3`, one `BEGIN; INSERT; COMMIT` per event into a table with the columns and"
        " key indexes of herald's events table, sequentially. SQLite has one writer, so this is"
        " also the raw ceiling for concurrent publishers that each wait for their commit.",
        f"herald: `Hub.publish(...)` awaited one at a time, or by {sizes.publishers} concurrent"
        " tasks (herald's writer thread then commits many publishes at once).",
        f"Each phase stops at {sizes.store_events:,} events or {sizes.store_seconds:g} s.",
    ]


async def sqlite_figures(sizes: Sizes, workdir: Path) -> list[Figure]:
    raw = raw_sqlite.inserts(workdir / "raw-inserts.db", sizes.store_events, sizes.store_seconds)
    baseline = _rate("sqlite3, INSERT + COMMIT per event", raw)
    hub = await _open_hub(f"sqlite:///{workdir / 'api.db'}", ["bench"])
    try:
        publish = _publisher(hub, ["bench"])
        one = await sequential(publish, sizes.store_events, sizes.store_seconds)
        many = await concurrent(publish, sizes.publishers, sizes.store_events, sizes.store_seconds)
    finally:
        await hub.close()
    method = _sqlite_method(sizes)
    return [
        Figure("1a", "Python API publish, SQLite, sequential", baseline, HALF,
               _rate("Hub.publish, awaited in turn", one), method=method),
        Figure("1b", f"Python API publish, SQLite, {sizes.publishers} publishers", baseline, HALF,
               _rate(f"Hub.publish, {sizes.publishers} tasks", many), method=method),
    ]


def _postgres_method(sizes: Sizes) -> list[str]:
    return [
        "A scratch database on 127.0.0.1:5432 is created for the run and dropped after it;"
        " durability is the server's (synchronous_commit on): each event committed before it"
        " counts.",
        "Raw: `asyncpg`, one plain `INSERT` per event (its own transaction) into a table like"
        f" herald's events table, on 1 connection (sequential) or {sizes.publishers} connections"
        f" ({sizes.publishers} concurrent publishers).",
        f"herald: `Hub.publish(...)` on the PostgreSQL store (its pool of connections), awaited in"
        f" turn or by {sizes.publishers} tasks.",
        f"Each phase stops at {sizes.store_events:,} events or {sizes.store_seconds:g} s.",
    ]


def _postgres_missing() -> str | None:
    if importlib.util.find_spec("herald.store.postgres") is None:
        return "herald.store.postgres does not exist yet"
    return None


async def _herald_postgres(sizes: Sizes, url: str) -> tuple[Run, Run, Run]:
    handles = [f"bench-{index}" for index in range(sizes.publishers)]
    hub = await _open_hub(url, handles)
    try:
        one_agent = _publisher(hub, handles[:1])
        one = await sequential(one_agent, sizes.store_events, sizes.store_seconds)
        many = await concurrent(one_agent, sizes.publishers, sizes.store_events, sizes.store_seconds)
        spread = _publisher(hub, handles)
        wide = await concurrent(spread, sizes.publishers, sizes.store_events, sizes.store_seconds)
    finally:
        await hub.close()
    return one, many, wide


async def postgres_figures(sizes: Sizes, admin_url: str) -> list[Figure]:
    method = _postgres_method(sizes)
    try:
        async with raw_postgres.scratch_database(admin_url) as url:
            raw_one = await raw_postgres.inserts(url, 1, sizes.store_events, sizes.store_seconds)
            raw_many = await raw_postgres.inserts(
                url, sizes.publishers, sizes.store_events, sizes.store_seconds
            )
            missing = _postgres_missing()
            runs = None if missing else await _herald_postgres(sizes, url)
    except (OSError, asyncpg.PostgresError) as exc:
        return [_unreachable(admin_url, exc, method)]
    base_one = _rate("asyncpg, INSERT per event, 1 connection", raw_one)
    base_many = _rate(f"asyncpg, INSERT per event, {sizes.publishers} connections", raw_many)
    one_fig = Figure("1c", "Python API publish, PostgreSQL, sequential", base_one, HALF,
                     method=method, skipped=missing)
    many_fig = Figure("1d", f"Python API publish, PostgreSQL, {sizes.publishers} publishers",
                      base_many, HALF, method=method, skipped=missing)
    if runs is not None:
        one, many, wide = runs
        one_fig.herald = _rate("Hub.publish, awaited in turn", one)
        many_fig.herald = _rate(f"Hub.publish, {sizes.publishers} tasks, one agent", many)
        many_fig.diagnostics.append(
            _rate(f"Hub.publish, {sizes.publishers} tasks, each to its own agent", wide)
        )
    return [one_fig, many_fig]


def _unreachable(admin_url: str, exc: BaseException, method: list[str]) -> Figure:
    reason = f"PostgreSQL at {admin_url} unavailable: {exc}"
    nothing = Measurement("asyncpg", float("nan"), "events/s", text="not measured")
    return Figure("1c", "Python API publish, PostgreSQL", nothing, HALF, method=method,
                  skipped=reason)
