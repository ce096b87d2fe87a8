"""Figures 11-12: herald's MCP Events on ``/mcp`` (the 2026-07-28 era, ``events_client``), each
beside the older way herald offers for the same job, measured on the same ``herald serve`` in the
same run, in interleaved rounds (the order alternates; each side shows its median round).

11: ``events/poll`` draining a backlog cursor by cursor, beside ``POST /channel/heartbeat``
draining a backlog of the same size (figure 4's drain). 12: ``events/stream`` push latency at
1,000 events/s over 100 subscriptions, beside ``GET /channel/stream`` (figure 8c's) under the
same open-loop schedule and clients.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.config import Sizes
from benchmarks.cpu import Probe, Usage
from benchmarks.events_client import (
    EVENT_NAME,
    EventStreamProtocol,
    poll,
    poll_request,
    stream_request,
)
from benchmarks.fig_drain import Drain, drain_backlogs, prefill
from benchmarks.fig_http import SERVER_METHOD, bench_event
from benchmarks.fig_stream import Side, open_loop_latency
from benchmarks.loadgen import Connection, percentile
from benchmarks.mcp_client import Inbox, StreamProtocol
from benchmarks.measure import Run, Stopwatch, median_round, round_orders
from benchmarks.paired import ALPHA, compare
from benchmarks.profiling import Profiler
from benchmarks.results import Figure, Measurement, Target, http_notes, per_event_us
from benchmarks.server import Server, create_agents, herald_server
from herald import Hub
from herald.inputs.events import parse_new_event
from herald.models import Agent
from herald.subscriptions import catalogue

WARM_UP_BACKLOG = 1000
"""Events each way drains, unmeasured, before the first round of figure 11."""
WARM_UP_S = 1.0
"""How long each way streams, unmeasured, before the first round of figure 12."""


# Figure 11: events/poll drain


async def _poll_one(server: Server, key: str, limit: int, deadline: float) -> tuple[int, int]:
    """A null-cursor poll for the start cursor, then polls with the cursor of the previous answer
    until an empty answer; returns (events, polls)."""
    address = server.address
    connection = await Connection.open(address)
    events = 0
    try:
        cursor = (await poll(connection, poll_request(address, key, None, limit, 0)))["cursor"]
        polls = 1
        while time.perf_counter() < deadline:
            result = await poll(connection, poll_request(address, key, cursor, limit, polls))
            polls += 1
            if not result["events"]:
                break
            events += len(result["events"])
            cursor = result["cursor"]
    finally:
        await connection.close()
    return events, polls


async def _poll_drain(server: Server, key: str, limit: int, seconds: float) -> Drain:
    probe = Probe(server.pid)
    events, polls = await _poll_one(server, key, limit, time.perf_counter() + seconds)
    usage = probe.stop()
    return Drain(events, polls, usage.wall_s, usage)


async def _poll_rounds(
    sizes: Sizes, workdir: Path, profiler: Profiler | None
) -> tuple[list[Drain], list[Drain]]:
    """Per round, one agent drained by heartbeat and another by events/poll, on one server."""
    limit, seconds, rounds = sizes.drain_limit, sizes.drain_seconds, sizes.events_rounds
    handles = [f"{way}{index}" for index in range(rounds) for way in ("hb", "poll")]
    if profiler is not None:
        handles += ["profiled-hb", "profiled-poll"]
    backlog = dict.fromkeys(handles, sizes.backlog)
    backlog |= dict.fromkeys(["warm-hb", "warm-poll"], min(sizes.backlog, WARM_UP_BACKLOG))
    heartbeats: list[Drain] = []
    polls: list[Drain] = []
    async with herald_server(workdir, "events-poll") as server:
        keys = dict(zip(backlog, await create_agents(server, list(backlog)), strict=True))
        await prefill(server, backlog, sizes.batch_size)
        # Not measured: so that the first round's first side does not meet a cold server.
        await drain_backlogs(server, [keys["warm-hb"]], limit, seconds)
        await _poll_drain(server, keys["warm-poll"], limit, seconds)
        for index, order in enumerate(round_orders(rounds)):
            for way in order:
                if way == "old":
                    heartbeats.append(
                        await drain_backlogs(server, [keys[f"hb{index}"]], limit, seconds)
                    )
                else:
                    polls.append(await _poll_drain(server, keys[f"poll{index}"], limit, seconds))
        if profiler is not None:
            await profiler.run(
                server.pid, "fig11-heartbeat", f"POST /channel/heartbeat, limit={limit} (fig 11)",
                drain_backlogs(server, [keys["profiled-hb"]], limit, seconds),
            )  # fmt: skip
            await profiler.run(
                server.pid, "fig11-events-poll", f"events/poll, maxEvents={limit}",
                _poll_drain(server, keys["profiled-poll"], limit, seconds),
            )  # fmt: skip
    return heartbeats, polls


async def _timed_drain(step: Callable[[int], Any], seconds: float) -> Run:
    """``step(cursor)`` from cursor 0, each time with the last answer's cursor, until empty."""
    watch = Stopwatch()
    deadline = watch.wall + seconds
    events = 0
    drained = await step(0)
    while drained.events and time.perf_counter() < deadline:
        events += len(drained.events)
        drained = await step(drained.cursor)
    return watch.run(events)


async def _api_drains(sizes: Sizes, workdir: Path) -> tuple[Run, Run]:
    """``Hub.drain`` and ``Hub.poll`` (with ``herald.event``'s match) in this process, on one
    store: how much of the gap is the store's."""
    hub = Hub.from_url(f"sqlite:///{workdir / 'api-events-poll.db'}")
    await hub.open()
    limit = sizes.drain_limit
    try:
        agents: list[Agent] = []
        for handle in ("drainer", "poller"):
            agents.append((await hub.create_agent(handle))[0])
            for start in range(0, sizes.backlog, sizes.batch_size):
                count = min(sizes.batch_size, sizes.backlog - start)
                batch = [parse_new_event(bench_event(handle, i)) for i in range(count)]
                await hub.publish_many(batch)
        drainer, poller = agents
        sub = await catalogue.resolve(hub, EVENT_NAME, {})
        drained = await _timed_drain(
            lambda cursor: hub.drain(drainer, cursor=cursor, limit=limit), sizes.drain_seconds
        )
        polled = await _timed_drain(
            lambda cursor: hub.poll(poller, sub.key, sub.match, cursor=cursor, limit=limit),
            sizes.drain_seconds,
        )
        return drained, polled
    finally:
        await hub.close()


def _drain_rounds(label: str, drains: list[Drain], backlog: int, requests: str) -> Measurement:
    """The median round, its requests counted as ``requests``, every round's rate beside."""
    median = median_round(drains, lambda drain: drain.rate)
    details = {
        "events": median.events,
        requests: median.heartbeats,
        "seconds": round(median.wall_s, 2),
        "backlog": backlog,
        "rounds": [f"{drain.rate:,.0f}" for drain in drains],
    }
    server_s = [drain.usage.server_s for drain in drains]
    cpu_us = None
    if None not in server_s:
        cpu_us = per_event_us(sum(s for s in server_s if s), sum(d.events for d in drains))
    return Measurement(
        label, median.rate, "events/s", usage=median.usage, details=details, cpu_us=cpu_us
    )


async def poll_figure(sizes: Sizes, workdir: Path, profiler: Profiler | None = None) -> Figure:
    limit, backlog, rounds = sizes.drain_limit, sizes.backlog, sizes.events_rounds
    heartbeats, polls = await _poll_rounds(sizes, workdir, profiler)
    api_drain, api_poll = await _api_drains(sizes, workdir)
    figure = Figure(
        "11",
        f"events/poll drain, maxEvents={limit}",
        _drain_rounds(f"POST /channel/heartbeat, limit={limit}", heartbeats, backlog, "heartbeats"),
        Target("≥ 0.8x the heartbeat drain", "ratio_at_least", 0.8),
        _drain_rounds(f"POST /mcp events/poll, maxEvents={limit}", polls, backlog, "polls"),
        diagnostics=[
            _run(f"Hub.drain(cursor, limit={limit}) in process", api_drain),
            _run(f"Hub.poll(herald.event's match, cursor, limit={limit}) in process", api_poll),
        ],
        method=[
            SERVER_METHOD + " The server's MCP endpoint `/mcp` on the 2026-07-28 era: each"
            " poll is one POST with its `_meta`, no session.",
            f"A backlog of {backlog:,} events for each of {2 * rounds} agents is published first"
            f" (batches, not timed). In each of {rounds} rounds, one agent is drained by"
            f" POST /channel/heartbeat {{cursor, limit: {limit}}} (figure 4's drain) and another"
            f" by `events/poll` {{name: herald.event, cursor, maxEvents: {limit}}} (one null-cursor"
            " poll for the start cursor, then each poll with the previous answer's cursor, which"
            " acknowledges everything up to it), each on one connection until an empty answer or"
            f" {sizes.drain_seconds:g} s; the order alternates between rounds and each side shows"
            " its median round (every round's rate in the details). The client parses each"
            " answer with json.loads.",
            "Baseline: herald's own heartbeat drain, re-measured here on the same server, after"
            f" an unmeasured warm-up drain of {WARM_UP_BACKLOG:,} events each way.",
            "Diagnostics: Hub.drain and Hub.poll in process on one SQLite file (no HTTP, no"
            " MCP): the store's share of the gap.",
            "CPU µs/event: the server's CPU time over the events of all its rounds; in process,"
            " this process's.",
        ],
    )
    usages = [drain.usage for drain in heartbeats + polls]
    median_poll = median_round(polls, lambda drain: drain.rate)
    figure.notes += http_notes(usages, median_poll.usage)
    ratios = [
        new.rate / old.rate if old.rate else math.nan
        for old, new in zip(heartbeats, polls, strict=True)
    ]
    figure.notes += _round_ratios(ratios)
    short = [drain for drain in heartbeats + polls if drain.events < backlog]
    if short:
        figure.notes.append(
            f"{len(short)} drain(s) stopped at the {sizes.drain_seconds:g} s limit before the"
            " backlog was empty; their rate is over what was drained."
        )
    return figure


def _run(label: str, run: Run) -> Measurement:
    cpu_us = per_event_us(run.cpu_s, run.events)
    return Measurement(label, run.rate, "events/s", details=run.details(), cpu_us=cpu_us)


def _round_ratios(ratios: list[float]) -> list[str]:
    shown = ", ".join(f"{ratio:.2f}x" for ratio in ratios)
    return [f"herald's new way over the baseline, round by round: {shown}."]


# Figure 12: events/stream latency


class EventsSide(Side):
    """Streams are ``events/stream`` subscriptions (one long POST each) instead of
    ``GET /channel/stream``; publishing is the same."""

    def stream_request(self, token: str) -> bytes:
        return stream_request(self.server.address, token, f"bench-{token[-8:]}")

    def protocol(self, request: bytes, inbox: Inbox) -> StreamProtocol:
        return EventStreamProtocol(request, inbox)


Latencies = tuple[list[float], Usage, int]


async def _latency_round(server: Server, way: str, label: str, sizes: Sizes) -> Latencies:
    """One side's open loop, on fresh agents (nothing left over from earlier rounds)."""
    handles = [f"{label}-{index:03d}" for index in range(sizes.stream_agents)]
    tokens = await create_agents(server, handles)
    kind = EventsSide if way == "new" else Side
    return await open_loop_latency(kind(label, server, tokens, handles), sizes)


async def _stream_rounds(
    sizes: Sizes, workdir: Path, profiler: Profiler | None
) -> tuple[list[Latencies], list[Latencies]]:
    measured: dict[str, list[Latencies]] = {"old": [], "new": []}
    async with herald_server(workdir, "events-stream") as server:
        # Not measured: a fresh server's first second of streams is slower on either side.
        warm = dataclasses.replace(sizes, stream_seconds=WARM_UP_S)
        for way in ("old", "new"):
            await _latency_round(server, way, f"warm-{way}", warm)
        for index, order in enumerate(round_orders(sizes.latency_rounds)):
            for way in order:
                label = f"{way}{index}"
                measured[way].append(await _latency_round(server, way, label, sizes))
        if profiler is not None:
            rate = f"{sizes.stream_rate:g}/s over {sizes.stream_agents}"
            await profiler.run(
                server.pid, "fig12-channel-stream", f"GET /channel/stream, {rate} streams",
                _latency_round(server, "old", "profiled-old", sizes),
            )  # fmt: skip
            await profiler.run(
                server.pid, "fig12-events-stream", f"events/stream, {rate} subscriptions",
                _latency_round(server, "new", "profiled-new", sizes),
            )  # fmt: skip
    return measured["old"], measured["new"]


def _p99(measured: Latencies) -> float:
    return percentile(measured[0], 0.99)


def _latency_rounds(label: str, rounds: list[Latencies]) -> Measurement:
    latencies, usage, missing = median_round(rounds, _p99)
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    pooled = [value for measured in rounds for value in measured[0]]
    details: dict[str, Any] = {
        "p50_ms": round(p50, 2),
        "p99_ms": round(p99, 2),
        "p99.9_ms": round(percentile(latencies, 0.999), 2),
        "events": len(latencies),
        "missing": missing,
        "rounds p99_ms": [round(_p99(measured), 2) for measured in rounds],
        "all rounds pooled p99_ms": round(percentile(pooled, 0.99), 2),
    }
    text = f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"
    return Measurement(label, p99, "ms", text=text, usage=usage, details=details)


async def stream_figure(sizes: Sizes, workdir: Path, profiler: Profiler | None = None) -> Figure:
    agents, rate = sizes.stream_agents, sizes.stream_rate
    old, new = await _stream_rounds(sizes, workdir, profiler)
    figure = Figure(
        "12",
        f"events/stream latency p99, {rate:,.0f} events/s over {agents} subscriptions",
        _latency_rounds("herald GET /channel/stream", old),
        Target("p99 no worse than the SSE stream's (paired rounds)", "not_worse", ALPHA),
        _latency_rounds("herald POST /mcp events/stream", new),
        method=[
            SERVER_METHOD,
            f"{agents} subscriptions, one per agent: `events/stream` {{name: herald.event,"
            " cursor: null}, one POST /mcp each on the 2026-07-28 era (its `_meta`, no session),"
            " held open and read as SSE (the chunked body decoded as it arrives with"
            " herald.sse.SSEDecoder, an event matched by a tag in its text); the open loop"
            " starts once every subscription has sent `notifications/events/active`.",
            f"Figure 8c's schedule and clients: an open loop of {rate:,.0f} events/s, event i"
            f" due at start + i / rate and addressed to agent i mod {agents}, one per POST"
            f" /v1/events over {sizes.stream_publishers} connections, for"
            f" {sizes.stream_seconds:g} s after a {sizes.warmup_seconds:g} s warm-up; latency"
            " from the scheduled time to the arrival of the event's bytes at its stream (one"
            " not arrived within 5 s is infinite).",
            f"Baseline: herald's own SSE stream (GET /channel/stream, {agents} streams of"
            f" {agents} agents) under the same schedule and clients, on the same server. In each"
            f" of {sizes.latency_rounds} rounds both sides run on fresh agents, the order"
            " alternating; each side shows its median round by p99 (every round's p99, and the"
            " p99 of all rounds pooled, in the details), after an unmeasured"
            f" {WARM_UP_S:g} s of each way on other agents.",
            "Verdict: the two ways cost about the same per event, so one p99 beside the other"
            " is a coin toss between runs; events/stream misses only if its rounds are"
            " measurably worse than the SSE stream's (a paired test over the rounds: see"
            " the notes).",
        ],
    )
    usages = [measured[1] for measured in old + new]
    figure.notes += http_notes(usages, median_round(new, _p99)[1])
    ratios = [_p99(n) / _p99(o) for o, n in zip(old, new, strict=True)]
    figure.notes += _round_ratios(ratios)
    figure.paired = compare([_p99(n) for n in new], [_p99(o) for o in old])
    figure.notes.append(figure.paired.note())
    return figure
