"""Figure 19: a publish to a list of 100 handles per request, beside figure 3's batch publish on
the same ``herald serve``, their rounds alternating."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.config import Sizes
from benchmarks.cpu import Usage
from benchmarks.fig_http import (
    CPU_METHOD,
    SERVER_METHOD,
    answered,
    batch_body,
    closed_rate,
    closed_round,
    profile_herald,
)
from benchmarks.loadgen import (
    ClosedLoopResult,
    close_connections,
    encode_request,
    open_connections,
)
from benchmarks.measure import alternate, median_round
from benchmarks.profiling import Profiler
from benchmarks.results import Figure, Measurement, Target, http_notes, per_event_us
from benchmarks.server import Server, create_agent, herald_server

LIST_SIZE = 100
"""Handles in each request's ``to``: each request stores this many events, one per agent."""


def _list_body(handles: list[str]) -> bytes:
    event = {"to": handles, "type": "bench.list", "text": "to every agent of a list"}
    return json.dumps({**event, "data": {"n": 1}}).encode()


async def _round(
    server: Server, request: bytes, sizes: Sizes, seconds: float
) -> tuple[ClosedLoopResult, Usage]:
    """A closed loop on figure 3's number of connections, opened for the round: between one
    side's rounds, the other's may outlast the server's keep-alive timeout (uvicorn's 5 s)."""
    connections = await open_connections(server.address, sizes.batch_connections)
    try:
        return await closed_round(server, connections, request, sizes, seconds)
    finally:
        await close_connections(connections)


def _rounds(
    label: str, rounds: list[tuple[ClosedLoopResult, Usage]], sizes: Sizes, per_request: int
) -> Measurement:
    """The median round by rate, every round's rate beside it, the CPU per event of all."""
    n = sizes.batch_connections
    measured = [closed_rate(label, r, usage, n, per_request) for r, usage in rounds]
    shown = median_round(measured, lambda m: m.value)
    shown.details["rounds"] = " / ".join(f"{m.value:,.0f}" for m in measured)
    server_s = sum(usage.server_s or 0.0 for _, usage in rounds)
    shown.cpu_us = per_event_us(server_s, sum(answered(r) for r, _ in rounds) * per_request)
    return shown


async def list_publish_figure(
    sizes: Sizes, workdir: Path, profiler: Profiler | None = None
) -> Figure:
    size, n = sizes.batch_size, sizes.batch_connections
    handles = [f"bench-{index}" for index in range(LIST_SIZE)]
    async with herald_server(workdir, "http-list") as server:
        for handle in handles:
            await create_agent(server, handle)

        def request(body: bytes) -> bytes:
            return encode_request(
                "POST", "/v1/events", server.address, token=server.admin_key, body=body
            )

        listed = request(_list_body(handles))
        batch = request(batch_body(handles[0], size))
        small_batch = request(batch_body(handles[0], LIST_SIZE))
        await _round(server, batch, sizes, sizes.warmup_seconds)
        await _round(server, listed, sizes, sizes.warmup_seconds)
        seconds = sizes.http_seconds / (2 if sizes.http_rounds > 1 else 1)
        rounds = await alternate(
            {
                "batch": lambda: _round(server, batch, sizes, seconds),
                "list": lambda: _round(server, listed, sizes, seconds),
                "small batch": lambda: _round(server, small_batch, sizes, seconds),
            },
            sizes.http_rounds,
        )
        if profiler is not None:
            connections = await open_connections(server.address, n)
            try:
                await profile_herald(
                    profiler, server, "fig19-list-publish",
                    f"POST /v1/events, a list of {LIST_SIZE} handles, {n} connections",
                    lambda: closed_round(server, connections, listed, sizes, sizes.http_seconds),
                )  # fmt: skip
            finally:
                await close_connections(connections)
    figure = Figure(
        "19",
        f"HTTP publish to a list of {LIST_SIZE} handles",
        _rounds(f"POST /v1/events, JSON array of {size} (figure 3)", rounds["batch"], sizes, size),
        Target("≥ 0.5x the batch publish per copy", "ratio_at_least", 0.5),
        _rounds(
            f'POST /v1/events, "to" a list of {LIST_SIZE} handles', rounds["list"], sizes, LIST_SIZE
        ),
        diagnostics=[
            _rounds(
                f"POST /v1/events, JSON array of {LIST_SIZE} for one agent",
                rounds["small batch"],
                sizes,
                LIST_SIZE,
            )
        ],
        method=[
            SERVER_METHOD,
            f"{LIST_SIZE} agents. Closed loop: {n} connections, each request one event for a"
            f" list of {LIST_SIZE} handles (one transaction, {LIST_SIZE} events, one per agent),"
            f" rate in events stored per second. Baseline: figure 3's request (a JSON array of"
            f" {size} events for one agent) on the same server and connections. A"
            f" {sizes.warmup_seconds:g} s warm-up of each, then {sizes.http_rounds} round(s) of"
            f" the two, the order alternating, each up to {sizes.http_requests:,} requests or"
            f" {seconds:g} s a round; each shows its median round (every round's rate in the"
            " details, CPU per event over all rounds).",
            f"Diagnostic: a JSON array of {LIST_SIZE} events for one agent, in the same rounds:"
            " as many events per request and transaction as the list, on one agent's pages of"
            " the store's indexes instead of one page of each for every agent.",
            CPU_METHOD,
        ],
    )
    usages = [usage for side in rounds.values() for _, usage in side]
    figure.notes += http_notes(usages, figure.herald.usage if figure.herald else None)
    return figure
