"""Figure 18: what a console tab on the live tail costs the hub.

The console's live tail is one reader of ``GET /v1/stream`` (the admin's feed). The figure is
figure 2's load (single-event ``POST /v1/events`` over many connections, a closed loop) with
such a reader open and reading everything, beside the same load without it, on the same server,
in rounds whose order alternates; each side shows its median round.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks.config import Sizes
from benchmarks.cpu import Usage
from benchmarks.fig_http import SINGLE_EVENT, _closed_rate, _http_notes, _measure_closed
from benchmarks.loadgen import (
    ClosedLoopResult,
    close_connections,
    encode_request,
    open_connections,
)
from benchmarks.results import Figure, Measurement, Target
from benchmarks.server import Server, create_agent, herald_server

ROUNDS = 3
Measured = tuple[ClosedLoopResult, Usage]


@dataclass
class TailReader:
    """How much of the feed the reader took: its bytes, and its ``published`` items."""

    received: int = 0
    published: int = 0


@contextlib.asynccontextmanager
async def _tail(server: Server) -> AsyncIterator[TailReader]:
    """A reader of the whole feed, as the console's live tail is, for as long as inside."""
    reader, writer = await asyncio.open_connection(server.address.host, server.address.port)
    writer.write(encode_request("GET", "/v1/stream", server.address, token=server.admin_key))
    await writer.drain()
    seen = TailReader()
    opened = asyncio.Event()

    async def read() -> None:
        carry = b""
        while chunk := await reader.read(65536):
            opened.set()
            seen.received += len(chunk)
            text = carry + chunk
            seen.published += text.count(b"event: published")
            carry = text[-len(b"event: published") :]

    task = asyncio.create_task(read())
    try:
        async with asyncio.timeout(10):
            await opened.wait()  # the answer's head: the feed is open
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        writer.close()


def _median(rounds: list[Measured], connections: int, label: str) -> Measurement:
    rates = [_closed_rate(label, result, usage, connections) for result, usage in rounds]
    middle = sorted(rates, key=lambda m: m.value)[len(rates) // 2]
    middle.details["rounds"] = [f"{m.value:,.0f}" for m in rates]
    return middle


async def tail_figure(sizes: Sizes, workdir: Path) -> Figure:
    measured: dict[str, list[Measured]] = {"without": [], "with": []}
    readers: list[TailReader] = []
    async with herald_server(workdir, "tail-cost") as server:
        await create_agent(server, "bench")
        body = json.dumps({"to": "bench", **SINGLE_EVENT}).encode()
        publish = encode_request(
            "POST", "/v1/events", server.address, token=server.admin_key, body=body
        )
        connections = await open_connections(server.address, sizes.http_connections)
        try:
            for index in range(ROUNDS):
                order = ("without", "with") if index % 2 == 0 else ("with", "without")
                for side in order:
                    if side == "without":
                        measured[side].append(
                            await _measure_closed(server, connections, publish, sizes)
                        )
                        continue
                    async with _tail(server) as reader:
                        measured[side].append(
                            await _measure_closed(server, connections, publish, sizes)
                        )
                    readers.append(reader)
        finally:
            await close_connections(connections)
    n = sizes.http_connections
    baseline = _median(measured["without"], n, "POST /v1/events, no feed reader")
    herald = _median(measured["with"], n, "POST /v1/events, one GET /v1/stream reader")
    herald.details["feed items read per round"] = [f"{r.published:,}" for r in readers]
    ratios = [
        _closed_rate("", *w, n).value / max(_closed_rate("", *o, n).value, 1.0)
        for w, o in zip(measured["with"], measured["without"], strict=True)
    ]
    figure = Figure(
        "18",
        "Publish rate with a console tab on the live tail (one GET /v1/stream reader)",
        baseline,
        Target("≥ 0.98x (costs the hub under 2%)", "ratio_at_least", 0.98),
        herald,
        method=[
            f"Figure 2's load: a closed loop of single-event POST /v1/events over {n}"
            f" connections, a {sizes.warmup_seconds:g} s warm-up, then up to"
            f" {sizes.http_requests:,} requests or {sizes.http_seconds:g} s.",
            "With: one reader of GET /v1/stream (admin key, no filter: every publish is an item"
            " it reads), opened before the warm-up and reading everything as it comes, as the"
            " console's live tail does. Without: no reader.",
            f"{ROUNDS} rounds on one server, the order alternating; each side shows its median"
            " round.",
        ],
    )
    usages = [usage for _, usage in measured["with"] + measured["without"]]
    figure.notes += _http_notes(usages, measured["with"][0][1])
    shown = ", ".join(f"{ratio:.3f}x" for ratio in ratios)
    figure.notes.append(f"With over without, round by round: {shown}.")
    if statistics.pstdev(ratios) > 0.02:
        figure.notes.append(
            "The rounds differ by more than the 2% the target allows: at this resolution the"
            " verdict is within the run-to-run noise of this machine."
        )
    return figure
