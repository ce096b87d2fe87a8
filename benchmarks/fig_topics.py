"""Figure 21: one event to a topic of 10,000 subscribers, on SQLite and on PostgreSQL: how long
its publish takes to commit (one transaction stores a copy for each), as copies per second beside
the batch publish (figure 3's request) measured on the same server in the same run."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path

from benchmarks import raw_postgres
from benchmarks.config import Sizes
from benchmarks.cpu import Probe
from benchmarks.loadgen import Connection, closed_loop, encode_request
from benchmarks.results import Figure, Measurement, Target, per_event_us
from benchmarks.server import Server, create_agent, herald_server
from herald import Hub

TOPIC = "repo/herald"
SETUP_TASKS = 32
"""Agents made and subscribed at once while the store is filled (before it is served)."""
COMMIT_LIMIT_S = 0.5
"""What issue 35 asks of one publish to 10,000 subscribers: committed within half a second."""


async def topic_figures(sizes: Sizes, workdir: Path, postgres_url: str | None) -> list[Figure]:
    figures = [await _figure("21a", "SQLite", f"sqlite:///{workdir / 'topics.db'}", sizes, workdir)]
    if postgres_url is not None:
        async with raw_postgres.scratch_database(postgres_url) as url:
            figures.append(await _figure("21b", "PostgreSQL", url, sizes, workdir))
    return figures


async def _subscribed(url: str, count: int) -> None:
    """Fill the store: the topic, and ``count`` agents subscribed to it (through the hub; a
    SQLite file without an fsync per commit, which the figure's server does not share)."""
    filling = url + "?synchronous=NORMAL" if url.startswith("sqlite") else url
    async with Hub.from_url(filling) as hub:
        await hub.topics.put(TOPIC, "every push to herald")
        handles = iter(f"sub-{n:05d}" for n in range(count))

        async def make() -> None:
            for handle in handles:
                agent, _ = await hub.create_agent(handle)
                await hub.topics.subscribe(agent.id, TOPIC)

        await asyncio.gather(*(make() for _ in range(SETUP_TASKS)))


async def _figure(number: str, backend: str, url: str, sizes: Sizes, workdir: Path) -> Figure:
    count = sizes.topic_subscribers
    await _subscribed(url, count)
    async with herald_server(workdir, f"topics-{number}", store=url) as server:
        await create_agent(server, "bench")
        batch = await _batch_rate(server, sizes)
        topic, commits = await _topic_rate(server, sizes, count)
    slowest = max(commits)
    median = statistics.median(commits)
    copies_per_s = count / median
    notes = [
        f"One publish to {count} subscribers committed in {median * 1000:.0f} ms (median of"
        f" {len(commits)}; slowest {slowest * 1000:.0f} ms): {copies_per_s:,.0f} copies/s."
        f" Issue 35 asks for at most {COMMIT_LIMIT_S * 1000:.0f} ms (at least 20,000 copies/s):"
        f" {'met' if slowest <= COMMIT_LIMIT_S else 'MISSED'} by the slowest."
    ]
    return Figure(
        number,
        f"Publish to a topic of {count} subscribers, {backend}",
        batch,
        Target("≥ 0.5x batch publish per copy", "ratio_at_least", 0.5),
        topic,
        diagnostics=[
            Measurement(
                "commit of one topic publish, median",
                median * 1000,
                "ms",
                details={"slowest_ms": round(slowest * 1000, 1), "rounds": len(commits)},
            ),
        ],
        method=[
            f"Server: `herald serve` on {backend} (SQLite: WAL + synchronous=FULL), its store"
            f" filled first through the hub: one topic, {count} agents each subscribed to it.",
            f"Herald: POST /v1/events with topic, one at a time on one connection, after one"
            f" warm-up publish: each stores {count} events in one transaction and answers with"
            " each one's receipt. The rate is copies stored per second of the median publish.",
            f"Baseline: on the same server, just before, figure 3's request (a JSON array of"
            f" {sizes.batch_size} events to one agent) on {sizes.batch_connections} connections"
            f" for {sizes.http_seconds:g} s after a warm-up: events stored per second.",
            "CPU µs/event: the server's CPU time over the copies (or events) it stored.",
        ],
        notes=notes,
    )


async def _batch_rate(server: Server, sizes: Sizes) -> Measurement:
    body = json.dumps(
        [{"to": "bench", "type": "bench.batch", "text": f"#{n}"} for n in range(sizes.batch_size)]
    ).encode()
    request = encode_request(
        "POST", "/v1/events", server.address, token=server.admin_key, body=body
    )
    connections = [await Connection.open(server.address) for _ in range(sizes.batch_connections)]
    try:
        await closed_loop(
            connections, request, max_requests=10**9, max_seconds=sizes.warmup_seconds
        )
        probe = Probe(server.pid)
        result = await closed_loop(
            connections, request, max_requests=10**9, max_seconds=sizes.http_seconds
        )
        usage = probe.stop()
    finally:
        for connection in connections:
            await connection.close()
    events = result.statuses.get(202, 0) * sizes.batch_size
    return Measurement(
        f"POST /v1/events, JSON array of {sizes.batch_size}, {sizes.batch_connections} connections",
        events / result.wall_s if result.wall_s else 0.0,
        "events/s",
        usage=usage,
        details={"requests": result.requests, "statuses": dict(result.statuses)},
        cpu_us=per_event_us(usage.server_s, events),
    )


async def _topic_rate(server: Server, sizes: Sizes, count: int) -> tuple[Measurement, list[float]]:
    body = json.dumps({"topic": TOPIC, "type": "repo.pushed", "text": "a push"}).encode()
    request = encode_request(
        "POST", "/v1/events", server.address, token=server.admin_key, body=body
    )
    connection = await Connection.open(server.address)
    commits: list[float] = []
    try:
        await _publish(connection, request, count)  # warm-up
        probe = Probe(server.pid)
        for _ in range(sizes.topic_rounds):
            started = time.perf_counter()
            await _publish(connection, request, count)
            commits.append(time.perf_counter() - started)
        usage = probe.stop()
    finally:
        await connection.close()
    copies = count * len(commits)
    measured = Measurement(
        f"POST /v1/events with topic, {count} subscribers",
        count / statistics.median(commits),
        "events/s",
        usage=usage,
        details={"commits_ms": [round(c * 1000, 1) for c in commits]},
        cpu_us=per_event_us(usage.server_s, copies),
    )
    return measured, commits


async def _publish(connection: Connection, request: bytes, count: int) -> None:
    status, answer = await connection.call(request)
    if status != 202 or json.loads(answer)["reached"] != count:
        raise RuntimeError(f"a topic publish answered {status}: {answer[:300]!r}")
