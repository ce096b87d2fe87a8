"""Run every benchmark and write ``benchmarks/REPORT.md`` and ``benchmarks/report.json``."""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import uvloop

from benchmarks import (
    fig_drain,
    fig_events,
    fig_http,
    fig_listing,
    fig_lists,
    fig_mcp,
    fig_schedules,
    fig_send,
    fig_store,
    fig_stream,
    fig_subscriptions,
    fig_tail,
    fig_topics,
    fig_webhooks,
    fig_workers,
)
from benchmarks.config import FULL, QUICK, Sizes
from benchmarks.cpu import Probe
from benchmarks.profiling import Profiler, find_py_spy
from benchmarks.results import NOISY, Figure, failed_figure, write_reports

HERE = Path(__file__).resolve().parent
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
GROUPS = (
    "store",
    "single",
    "batch",
    "list-publish",
    "drain",
    "latency",
    "mcp-latency",
    "mcp-push",
    "stream",
    "webhooks",
    "events-poll",
    "events-stream",
    "webhook-subscriptions",
    "send-file",
    "list-events",
    "workers",
    "tail-cost",
    "schedules",
    "topics",
)
Step = Callable[[], Awaitable[list[Figure]]]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description="herald benchmarks, each beside its baseline."
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument(
        "--only", nargs="+", choices=GROUPS, default=list(GROUPS), help="run only these figures"
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("HERALD_BENCH_POSTGRES_URL", DEFAULT_POSTGRES),
        help=f"a loopback PostgreSQL to create a scratch database in (default {DEFAULT_POSTGRES})",
    )
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="before each figure, wait up to this long for other processes to go idle (default 60)",
    )
    parser.add_argument(
        "--out", type=Path, default=HERE, help="where to write REPORT.md and report.json"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also sample the server with py-spy in an extra run of figures 2-7, 11 and 12"
        " (summaries in benchmarks/profiles/)",
    )
    parser.add_argument("--py-spy", default=None, help="the py-spy executable (default: on PATH)")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="scratch directory (default: a new temp dir)"
    )
    return parser


def _profiler(args: argparse.Namespace) -> Profiler | None:
    if not args.profile:
        return None
    py_spy = find_py_spy(args.py_spy)
    if py_spy is None:
        raise SystemExit("--profile needs py-spy: pip install py-spy, or pass --py-spy PATH")
    return Profiler(py_spy, args.out / "profiles")


def _steps(
    args: argparse.Namespace, sizes: Sizes, workdir: Path, profiler: Profiler | None
) -> list[tuple[str, Step]]:
    async def store() -> list[Figure]:
        figures = await fig_store.sqlite_figures(sizes, workdir)
        if not args.no_postgres:
            figures += await fig_store.postgres_figures(sizes, args.postgres_url)
        return figures

    async def single() -> list[Figure]:
        return [await fig_http.single_publish_figure(sizes, workdir, profiler)]

    async def batch() -> list[Figure]:
        return [await fig_http.batch_publish_figure(sizes, workdir, profiler)]

    async def list_publish() -> list[Figure]:
        return [await fig_lists.list_publish_figure(sizes, workdir, profiler)]

    async def drain() -> list[Figure]:
        postgres = None if args.no_postgres else args.postgres_url
        return await fig_drain.drain_figures(sizes, workdir, profiler, postgres)

    async def latency() -> list[Figure]:
        return [await fig_http.latency_figure(sizes, workdir, profiler)]

    async def mcp_latency() -> list[Figure]:
        return await fig_mcp.latency_figures(sizes, workdir, profiler)

    async def mcp_push() -> list[Figure]:
        return [await fig_mcp.push_figure(sizes, workdir, profiler)]

    async def stream() -> list[Figure]:
        return await fig_stream.stream_figures(sizes, workdir)

    async def webhooks() -> list[Figure]:
        return [
            await fig_webhooks.delivery_figure(sizes, workdir),
            await fig_webhooks.failing_endpoint_figure(sizes, workdir),
        ]

    async def events_poll() -> list[Figure]:
        return [await fig_events.poll_figure(sizes, workdir, profiler)]

    async def events_stream() -> list[Figure]:
        return [await fig_events.stream_figure(sizes, workdir, profiler)]

    async def webhook_subscriptions() -> list[Figure]:
        return [await fig_subscriptions.subscription_figure(sizes, workdir)]

    async def send_file() -> list[Figure]:
        return [await fig_send.send_file_figure(sizes, workdir)]

    async def list_events() -> list[Figure]:
        figures = await fig_listing.sqlite_figures(sizes, workdir)
        if not args.no_postgres:
            figures += await fig_listing.postgres_figures(sizes, workdir, args.postgres_url)
        return figures

    async def workers() -> list[Figure]:
        if args.no_postgres:
            return []
        return [await fig_workers.workers_figure(sizes, workdir, args.postgres_url)]

    async def tail_cost() -> list[Figure]:
        return [await fig_tail.tail_figure(sizes, workdir)]

    async def schedules() -> list[Figure]:
        postgres = None if args.no_postgres else args.postgres_url
        return await fig_schedules.schedules_figures(sizes, workdir, postgres)

    async def topics() -> list[Figure]:
        postgres = None if args.no_postgres else args.postgres_url
        return await fig_topics.topic_figures(sizes, workdir, postgres)

    steps = {
        "store": store, "single": single, "batch": batch, "list-publish": list_publish,
        "drain": drain, "latency": latency,
        "mcp-latency": mcp_latency, "mcp-push": mcp_push, "stream": stream, "webhooks": webhooks,
        "events-poll": events_poll, "events-stream": events_stream,
        "webhook-subscriptions": webhook_subscriptions, "send-file": send_file,
        "list-events": list_events, "workers": workers, "tail-cost": tail_cost,
        "schedules": schedules,
        "topics": topics,
    }  # fmt: skip
    return [(name, steps[name]) for name in GROUPS if name in args.only]


async def _wait_for_quiet(limit_s: float) -> None:
    """Wait, up to ``limit_s``, until other processes leave the machine (nearly) idle."""
    deadline = time.perf_counter() + limit_s
    while True:
        probe = Probe()
        await asyncio.sleep(0.5)
        share = probe.stop().others_share or 0.0
        if share < NOISY:
            return
        if time.perf_counter() >= deadline:
            print(f"benchmarks: the machine is still busy ({share:.0%} of a core); going on")
            return
        print(f"benchmarks: other processes use {share:.0%} of a core; waiting", flush=True)
        await asyncio.sleep(2.0)


async def _run_steps(steps: list[tuple[str, Step]], quiet_s: float) -> list[Figure]:
    figures: list[Figure] = []
    for name, step in steps:
        await _wait_for_quiet(quiet_s)
        # What earlier figures left in this process (the load generator, and the in-process
        # side of some figures) is taken out of the collector's way: a full collection walking
        # it stalled the generator for 100 ms and more in the middle of later figures' rounds.
        gc.collect()
        gc.freeze()
        started = time.perf_counter()
        print(f"benchmarks: {name} ...", flush=True)
        try:
            produced = await step()
        except Exception as exc:  # one broken benchmark must not lose the others' figures
            traceback.print_exc()
            produced = [failed_figure(name, exc)]
        for figure in produced:
            shown = figure.herald.shown() if figure.herald else "skipped"
            print(
                f"  {figure.number} {figure.title}: {shown} vs {figure.baseline.shown()}"
                f" -> {figure.verdict}",
                flush=True,
            )
        print(f"  ({time.perf_counter() - started:.1f} s)", flush=True)
        figures += produced
    return figures


def _git_commit() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=HERE.parent, capture_output=True, text=True, check=False
        )
        return done.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + ("+changes" if git("status", "--porcelain", "--", "src") else "")


def _machine() -> str:
    model = "unknown CPU"
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return (
        f"{os.cpu_count()} cores ({model}), {platform.system()} {platform.release()},"
        f" Python {platform.python_version()}, SQLite {sqlite3.sqlite_version},"
        f" uvloop {importlib.metadata.version('uvloop')}"
    )


LOCAL_OPTIONS = ("--out", "--workdir", "--py-spy", "--postgres-url")
"""Where this machine keeps things (and a URL may hold a password): not what the figures are of,
and not for a committed report."""


def _shown_command(argv: Sequence[str]) -> str:
    """The command as the report shows it: its arguments but the local ones."""
    shown: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in LOCAL_OPTIONS:
            skip = True
        elif not arg.startswith(tuple(f"{option}=" for option in LOCAL_OPTIONS)):
            shown.append(arg)
    return " ".join(["python -m benchmarks", *shown])


def _meta(
    args: argparse.Namespace,
    argv: Sequence[str] | None,
    sizes: Sizes,
    elapsed_s: float,
    profiler: Profiler | None,
) -> dict[str, Any]:
    profiles = [] if profiler is None else profiler.written
    return {
        "command": _shown_command(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": _git_commit(),
        "quick": args.quick,
        "only": args.only,
        "elapsed_s": round(elapsed_s, 1),
        "machine": _machine(),
        "cpus": os.cpu_count(),
        "sizes": sizes.to_json(),
        "profiles": [str(path.relative_to(args.out)) for path in profiles],
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    sizes = QUICK if args.quick else FULL
    profiler = _profiler(args)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="herald-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        figures = uvloop.run(_run_steps(_steps(args, sizes, workdir, profiler), args.quiet_wait))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = _meta(args, argv, sizes, time.perf_counter() - started, profiler)
    write_reports(figures, meta, args.out)
    print(f"benchmarks: wrote {args.out / 'REPORT.md'} and {args.out / 'report.json'}", flush=True)
    missed = [figure.number for figure in figures if figure.verdict == "MISSED"]
    if missed:
        print(f"benchmarks: targets missed: {', '.join(missed)} (see the report)", file=sys.stderr)
    failed = [figure.number for figure in figures if figure.verdict == "ERROR"]
    if failed:
        print(f"benchmarks: FAILED: {', '.join(failed)} (see above)", file=sys.stderr)
        return 1
    return 0
