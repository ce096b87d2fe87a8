"""Figure 16: `herald serve --workers 2` beside `--workers 1`, on PostgreSQL.

Figure 2's load (one event per `POST /v1/events`, a closed loop over many connections) against a
hub on a fresh PostgreSQL database, served by two forked processes on one port, beside the same
load against one process on another fresh database, in the same run. No target: the ratio is
reported, as the scale-up one more process gives on this machine (two cores, shared with the
load generator and PostgreSQL itself).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import asyncpg

from benchmarks import raw_postgres
from benchmarks.config import Sizes
from benchmarks.cpu import Probe
from benchmarks.fig_http import SINGLE_EVENT, _closed_rate
from benchmarks.loadgen import close_connections, closed_loop, encode_request, open_connections
from benchmarks.results import Figure, Measurement, Target
from benchmarks.server import create_agent, herald_server

TITLE = "HTTP publish on PostgreSQL, --workers 2"
TARGET = Target("none set (reported)", "none", math.nan)


async def _publish_rate(admin_url: str, workdir: Path, workers: int, sizes: Sizes) -> Measurement:
    async with raw_postgres.scratch_database(admin_url) as url:
        name = f"workers-{workers}"
        async with herald_server(workdir, name, store=url, extra=("--workers", str(workers))) as (
            server
        ):
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
                # The workers are children of the process started: only the machine's and the
                # generator's CPU are measured.
                probe = Probe()
                result = await closed_loop(
                    connections,
                    publish,
                    max_requests=sizes.http_requests,
                    max_seconds=sizes.http_seconds,
                )
                usage = probe.stop()
            finally:
                await close_connections(connections)
    label = f"POST /v1/events, herald serve --workers {workers}"
    return _closed_rate(label, result, usage, sizes.http_connections)


async def workers_figure(sizes: Sizes, workdir: Path, admin_url: str) -> Figure:
    try:
        one = await _publish_rate(admin_url, workdir, 1, sizes)
        two = await _publish_rate(admin_url, workdir, 2, sizes)
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        nothing = Measurement("--workers 1", float("nan"), "events/s", text="not measured")
        return Figure(
            "16", TITLE, nothing, TARGET, skipped=f"PostgreSQL at {admin_url} unavailable: {exc}"
        )
    return Figure(
        "16",
        TITLE,
        one,
        TARGET,
        herald=two,
        method=[
            "Server: `herald serve --store postgresql://... --workers N --port 0` as a"
            " subprocess on a fresh scratch database each side; with N = 2 the parent binds the"
            " port and forks two workers that serve it.",
            f"Figure 2's load: {sizes.http_connections} connections in a closed loop, one event"
            f" per POST /v1/events, a {sizes.warmup_seconds:g} s warm-up, then up to"
            f" {sizes.http_requests:,} requests or {sizes.http_seconds:g} s.",
            "Baseline: the same load against `--workers 1` on its own fresh database, in the same"
            " run. CPU use is the generator's and the machine's only: the workers are children"
            " of the process the probe would watch.",
        ],
    )
