"""Figure 14: ``herald send --file``, the operator's bulk publish, against figure 3's batch publish.

A JSON lines file of events shaped like figure 3's (one agent) is written once. In each round,
each side gets a fresh ``herald serve`` on SQLite (figure 3's server) with one agent and the
same unmeasured warm-up (figure 3's batches on one connection), then publishes the same number
of events:

- herald: ``python -m herald.cli send --file events.jsonl --url ... --key <admin key> --json``
  as a subprocess, timed from its spawn to its exit: the interpreter's start, the imports,
  reading the file and giving each event its dedupe key, every batch checked first by a dry run
  (two on their way at once, on two connections: a dry run stores nothing), then one
  keep-alive ``httpx2`` connection posting 1,000 events per request, in turn (never a second
  publish in flight: the command stops at the first batch that fails with every line before
  it stored and none after it sent, and keeps the file's order).
- baseline: figure 3's measure on one connection: a JSON array of 1,000 events per
  ``POST /v1/events``, each sent when the last is answered. One connection, not figure 3's
  four, because the command sends its batches one at a time on one connection: the baseline is
  what that way of sending can reach when the client costs nothing.
- diagnostic: the command's own requests (its events, dedupe keys included) sent by the same
  raw client on one connection: how much of a gap is the dedupe keys, how much the command.

The command's start-up is estimated as the median time of the same command on an empty file
(interpreter, imports, no request); the rate without it is in the details. Rounds are
interleaved with the order alternating; each side shows its median round.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import resource
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.config import Sizes
from benchmarks.cpu import Probe, Usage
from benchmarks.fig_http import OK, SERVER_METHOD, batch_body, bench_event
from benchmarks.loadgen import Connection, closed_loop, encode_request, send_all
from benchmarks.measure import median_round, round_orders
from benchmarks.results import (
    Figure,
    Measurement,
    Target,
    noise_note,
    per_event_us,
    saturation_note,
)
from benchmarks.server import Server, ServerFailure, create_agent, herald_server
from herald.operator.send import BATCH, in_batches, read_lines

STARTUP_RUNS = 3


@dataclass(frozen=True)
class Sent:
    """``events`` stored in ``wall_s`` seconds; ``client_cpu_s`` is the sender's CPU time."""

    events: int
    wall_s: float
    usage: Usage
    client_cpu_s: float

    @property
    def rate(self) -> float:
        return self.events / self.wall_s if self.wall_s else 0.0


def _write_file(path: Path, count: int) -> Path:
    lines = (json.dumps(bench_event("bench", index)) for index in range(count))
    path.write_text("\n".join(lines) + "\n")
    return path


def _children_cpu_s() -> float:
    """CPU time of the child processes that have exited and been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def _run_cli(path: Path, server: Server | None, seconds: float) -> tuple[float, float, str]:
    """Run ``herald send --file path``; returns (wall seconds, its CPU seconds, its stdout)."""
    url = f"http://{server.address.host}:{server.address.port}" if server else "http://127.0.0.1:9"
    key = server.admin_key if server else "herald_admin_unused"
    command = [
        sys.executable, "-m", "herald.cli", "send", "--file", str(path),
        "--url", url, "--key", key, "--json",
    ]  # fmt: skip
    cpu_before = _children_cpu_s()
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), seconds)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise ServerFailure(f"herald send --file did not finish within {seconds:g} s") from None
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise ServerFailure(f"herald send --file exited {process.returncode}: {err[-500:]!r}")
    return wall, _children_cpu_s() - cpu_before, out.decode()


async def _startup_s(workdir: Path, seconds: float) -> float:
    """The command's own cost before its first request: the median of runs on an empty file."""
    empty = workdir / "send-empty.jsonl"
    empty.write_text("")
    walls = [(await _run_cli(empty, None, seconds))[0] for _ in range(STARTUP_RUNS)]
    return statistics.median(walls)


async def _warm_up(server: Server, sizes: Sizes) -> None:
    """Figure 3's batches on one connection for the warm-up time, on every side alike."""
    request = _batch_request(server, batch_body("bench", sizes.batch_size))
    connection = await Connection.open(server.address)
    try:
        await closed_loop(
            [connection], request, max_requests=10**9, max_seconds=sizes.warmup_seconds
        )
    finally:
        await connection.close()


def _batch_request(server: Server, body: bytes) -> bytes:
    return encode_request("POST", "/v1/events", server.address, token=server.admin_key, body=body)


async def _cli_side(server: Server, path: Path, sizes: Sizes) -> Sent:
    probe = Probe(server.pid)
    wall, cpu, out = await _run_cli(path, server, sizes.send_file_seconds)
    measured = probe.stop()
    # The command is this figure's load generator: its CPU counts as the generator's, not as
    # another process's (which would read as a noisy machine).
    usage = dataclasses.replace(measured, generator_s=measured.generator_s + cpu)
    stored = int(json.loads(out.strip().splitlines()[-1])["stored"])
    if stored != sizes.send_file_events:
        raise ServerFailure(f"herald send --file stored {stored} of {sizes.send_file_events}")
    return Sent(stored, wall, usage, cpu)


async def _raw_side(server: Server, requests: list[bytes], per_request: int) -> Sent:
    """Each request once, in turn, on one connection (the raw client's CPU is this process's)."""
    connection = await Connection.open(server.address)
    try:
        probe = Probe(server.pid)
        statuses = await send_all([connection], requests)
        usage = probe.stop()
    finally:
        await connection.close()
    if set(statuses) - OK:
        raise ServerFailure(f"POST /v1/events answered {dict(statuses)}")
    return Sent(len(requests) * per_request, usage.wall_s, usage, usage.generator_s)


async def _side(side: str, workdir: Path, name: str, sizes: Sizes, work: dict[str, Any]) -> Sent:
    async with herald_server(workdir, name) as server:
        await create_agent(server, "bench")
        await _warm_up(server, sizes)
        if side == "cli":
            return await _cli_side(server, work["path"], sizes)
        if side == "keyed":
            bodies = work["keyed"]
            return await _raw_side(server, [_batch_request(server, b) for b in bodies], BATCH)
        body = batch_body("bench", sizes.batch_size)
        count = sizes.send_file_events // sizes.batch_size
        return await _raw_side(server, [_batch_request(server, body)] * count, sizes.batch_size)


def _keyed_bodies(path: Path) -> list[bytes]:
    """The bodies ``herald send --file`` posts for this file: its events with their dedupe keys."""
    return [batch.body for batch in in_batches(read_lines(path))]


async def _rounds(sizes: Sizes, workdir: Path) -> dict[str, list[Sent]]:
    path = _write_file(workdir / "send-events.jsonl", sizes.send_file_events)
    work = {"path": path, "keyed": _keyed_bodies(path)}
    sides: dict[str, list[Sent]] = {"cli": [], "batch": [], "keyed": []}
    names = {"old": "batch", "new": "cli"}
    for index, (first, second) in enumerate(round_orders(sizes.send_file_rounds)):
        for side in (names[first], names[second], "keyed"):
            sent = await _side(side, workdir, f"send-{side}-{index}", sizes, work)
            sides[side].append(sent)
    return sides


def _measurement(label: str, rounds: list[Sent], client: str) -> Measurement:
    shown = median_round(rounds, key=lambda sent: sent.rate)
    details: dict[str, Any] = {
        "events": shown.events,
        "seconds": round(shown.wall_s, 2),
        "rounds": " / ".join(f"{sent.rate:,.0f}" for sent in rounds),
        f"{client} CPU share": round(shown.client_cpu_s / shown.wall_s, 2),
    }
    server_s = [sent.usage.server_s for sent in rounds]
    cpu_us = None
    if None not in server_s:
        cpu_us = per_event_us(sum(s for s in server_s if s), sum(sent.events for sent in rounds))
    return Measurement(
        label, shown.rate, "events/s", usage=shown.usage, details=details, cpu_us=cpu_us
    )


async def send_file_figure(sizes: Sizes, workdir: Path) -> Figure:
    count, size = sizes.send_file_events, sizes.batch_size
    startup = await _startup_s(workdir, sizes.send_file_seconds)
    sides = await _rounds(sizes, workdir)
    cli = _measurement(f"herald send --file, {count:,} events", sides["cli"], "command")
    sending_s = cli.details["seconds"] - startup
    without_startup = count / sending_s if sending_s > 0 else math.nan
    cli.details["start-up (empty file)"] = f"{startup:.2f} s"
    cli.details["rate without start-up"] = f"{without_startup:,.0f} events/s"
    figure = Figure(
        "14",
        f"herald send --file, {count:,} events",
        _measurement(
            f"POST /v1/events, JSON array of {size}, 1 connection", sides["batch"], "generator"
        ),
        Target("≥ 0.8x", "ratio_at_least", 0.8),
        cli,
        diagnostics=[
            _measurement(
                "the command's requests (dedupe keys), raw client, 1 connection",
                sides["keyed"],
                "generator",
            ),
        ],
        method=[
            SERVER_METHOD,
            f"A file of {count:,} events shaped like figure 3's (one agent), written once. Each"
            " side of each round gets a fresh server, one agent and the same warm-up (figure 3's"
            f" batches on one connection for {sizes.warmup_seconds:g} s), then publishes the"
            f" {count:,} events.",
            "herald: `python -m herald.cli send --file events.jsonl --url ... --key <admin key>"
            " --json` as a subprocess, timed from its spawn to its exit: the interpreter's"
            " start-up and imports, reading the file and adding each event's dedupe key, a dry"
            " run of every batch first (two on their way at once, on two connections: a dry run"
            " stores nothing), then one keep-alive httpx2 connection posting"
            f" {BATCH:,} events per request in turn (one publish in flight at a time). The"
            " start-up alone is estimated as the median of"
            f" {STARTUP_RUNS} runs of the same command on an empty file.",
            f"Baseline: figure 3's measure, JSON arrays of {size} events to POST /v1/events"
            f" ({count // size} requests), re-measured in the same run, on one connection rather"
            " than figure 3's four: the command sends one batch at a time on one connection, so"
            " the fair ceiling is that way of sending with a client that costs nothing.",
            "Diagnostic: the command's own request bodies (its events with their dedupe keys),"
            " sent by the same raw client on one connection: what the dedupe keys cost the"
            " server, apart from the command's client.",
            "CPU µs/event: the server's CPU time over the events of all its rounds (the"
            " command's own CPU is the generator's).",
            f"Rounds: {sizes.send_file_rounds}, the order of herald and the baseline alternating;"
            " each side shows its median round.",
        ],
    )
    usages = [sent.usage for side in sides.values() for sent in side]
    figure.notes += _notes(usages, cli, without_startup / (figure.baseline.value or math.nan))
    return figure


def _notes(usages: list[Usage], cli: Measurement, ratio_without_startup: float) -> list[str]:
    notes = [
        f"The command used {cli.details['command CPU share']:.0%} of a core in its median round"
        " (its own process: start-up, JSON, httpx2; shown as the generator's CPU); the server's"
        " share is beside it.",
        "The command's server CPU per event includes its dry run of every batch (each line is"
        " checked before any is sent), which neither the baseline nor the diagnostic makes; the"
        " publish of a batch a dry run passed is not checked field by field again.",
        f"Without its start-up (the empty file's run subtracted) the command reached"
        f" {cli.details['rate without start-up']}, {ratio_without_startup:.2f}x the baseline.",
    ]
    noise = noise_note(usages)
    if noise:
        notes.append(noise)
    saturation = saturation_note(cli.usage)
    if saturation:
        notes.append(saturation)
    return notes
