"""Figure 18: what a console tab on the live tail costs the hub.

The console's live tail is one reader of ``GET /v1/stream`` (the admin's feed) that asks for
at most ``TAIL_RATE`` items a second (``?max_rate=``, the console's own constant): when more
happen, the hub sends it the newest and skips the rest. The figure is figure 2's load
(single-event ``POST /v1/events`` over many connections, a closed loop) with such a reader open,
beside the same load without it, on the same server, in rounds whose order alternates; each
side shows its median round. A diagnostic does the same with a reader of every item (no
``max_rate``, as a program reading the whole feed would).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import statistics
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks.config import Sizes
from benchmarks.cpu import Usage
from benchmarks.fig_http import SINGLE_EVENT, answered, closed_rate, measure_closed
from benchmarks.loadgen import (
    ClosedLoopResult,
    close_connections,
    encode_request,
    open_connections,
)
from benchmarks.results import Figure, Measurement, Target, http_notes
from benchmarks.server import Server, create_agent, herald_server

ROUNDS = 5
Measured = tuple[ClosedLoopResult, Usage]
CONSOLE = Path(__file__).parent.parent / "src" / "herald" / "console" / "static" / "app.js"


def console_tail_rate() -> int:
    """The most items a second the console's live tail asks for, read from the console."""
    found = re.search(r"^const TAIL_RATE = (\d+);", CONSOLE.read_text(), re.MULTILINE)
    assert found is not None, "the console no longer says its tail's rate"
    return int(found[1])


@dataclass
class TailReader:
    """How much of the feed the reader took: its bytes, and its ``published`` items."""

    received: int = 0
    published: int = 0


@contextlib.asynccontextmanager
async def _tail(server: Server, path: str) -> AsyncIterator[TailReader]:
    """A reader of the feed at ``path``, reading all it is sent, for as long as inside."""
    reader, writer = await asyncio.open_connection(server.address.host, server.address.port)
    writer.write(encode_request("GET", path, server.address, token=server.admin_key))
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


def _cpu_per_publish_us(rounds: list[Measured]) -> list[float]:
    """The server's CPU time per publish answered, in µs, round by round."""
    return [
        usage.server_s / ok * 1e6
        for result, usage in rounds
        if usage.server_s is not None and (ok := answered(result))
    ]


def _median(rounds: list[Measured], connections: int, label: str) -> Measurement:
    rates = [closed_rate(label, result, usage, connections) for result, usage in rounds]
    middle = sorted(rates, key=lambda m: m.value)[len(rates) // 2]
    middle.details["rounds"] = [f"{m.value:,.0f}" for m in rates]
    return middle


async def tail_figure(sizes: Sizes, workdir: Path) -> Figure:
    rate = console_tail_rate()
    paths = {"with": f"/v1/stream?max_rate={rate}", "every item": "/v1/stream"}
    measured: dict[str, list[Measured]] = {"without": [], "with": [], "every item": []}
    readers: dict[str, list[TailReader]] = {"with": [], "every item": []}
    async with herald_server(workdir, "tail-cost") as server:
        await create_agent(server, "bench")
        body = json.dumps({"to": "bench", **SINGLE_EVENT}).encode()
        publish = encode_request(
            "POST", "/v1/events", server.address, token=server.admin_key, body=body
        )
        connections = await open_connections(server.address, sizes.http_connections)
        try:
            for index in range(ROUNDS):
                order = ["without", "with", "every item"]
                if index % 2:
                    order.reverse()
                for side in order:
                    if side == "without":
                        measured[side].append(
                            await measure_closed(server, connections, publish, sizes)
                        )
                        continue
                    async with _tail(server, paths[side]) as reader:
                        measured[side].append(
                            await measure_closed(server, connections, publish, sizes)
                        )
                    readers[side].append(reader)
        finally:
            await close_connections(connections)
    n = sizes.http_connections
    baseline = _median(measured["without"], n, "POST /v1/events, no feed reader")
    herald = _median(
        measured["with"], n, f"POST /v1/events, the console's tail open (max_rate={rate})"
    )
    everything = _median(
        measured["every item"], n, "POST /v1/events, one reader of every item (no max_rate)"
    )
    for side, measure in (("with", herald), ("every item", everything)):
        measure.details["feed items read per round"] = [f"{r.published:,}" for r in readers[side]]
    ratios = [
        closed_rate("", *w, n).value / max(closed_rate("", *o, n).value, 1.0)
        for w, o in zip(measured["with"], measured["without"], strict=True)
    ]
    figure = Figure(
        "18",
        "Publish rate with a console tab on the live tail (GET /v1/stream?max_rate=)",
        baseline,
        Target("≥ 0.98x (costs the hub under 2%)", "ratio_at_least", 0.98),
        herald,
        method=[
            f"Figure 2's load: a closed loop of single-event POST /v1/events over {n}"
            f" connections, a {sizes.warmup_seconds:g} s warm-up, then up to"
            f" {sizes.http_requests:,} requests or {sizes.http_seconds:g} s.",
            f"With: the console's live tail, one reader of GET /v1/stream?max_rate={rate}"
            f" (admin key, no filter; {rate} items a second at most, the console's TAIL_RATE:"
            " beyond it the hub sends the newest and a skipped item), opened before the"
            " warm-up and reading all it is sent. Without: no reader.",
            "Diagnostic: the same with a reader of every item (GET /v1/stream, no max_rate), as"
            " a program following the whole feed would read it.",
            f"{ROUNDS} rounds on one server, the order of the three alternating; each side"
            " shows its median round.",
        ],
        diagnostics=[everything],
    )
    usages = [usage for side in measured.values() for _, usage in side]
    figure.notes += http_notes(usages, measured["with"][0][1])
    shown = ", ".join(f"{ratio:.3f}x" for ratio in ratios)
    figure.notes.append(f"With over without, round by round: {shown}.")
    every_ratio = everything.value / max(baseline.value, 1.0)
    figure.notes.append(f"A reader of every item: {every_ratio:.2f}x the rate without.")
    cpu = {side: _cpu_per_publish_us(rounds) for side, rounds in measured.items()}
    if all(len(per) == ROUNDS for per in cpu.values()):
        alone, tail, every = (statistics.median(cpu[side]) for side in measured)
        rounds = "; ".join(
            f"{side} {', '.join(f'{us:.0f}' for us in per)}" for side, per in cpu.items()
        )
        figure.notes.append(
            f"The server's CPU time per publish (median round): {alone:.0f} µs without a"
            f" reader, {tail:.0f} µs with the console's tail ({tail / alone - 1:+.1%}),"
            f" {every:.0f} µs with a reader of every item ({every / alone - 1:+.1%}); round by"
            f" round, in µs: {rounds}. What a reader costs the hub in its own time, which"
            " other processes on the machine disturb less than they do the rate."
        )
    if statistics.pstdev(ratios) > 0.02:
        figure.notes.append(
            "The rounds differ by more than the 2% the target allows: at this resolution the"
            " verdict is within the run-to-run noise of this machine."
        )
    return figure
