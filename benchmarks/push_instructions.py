"""Instructions per pushed event: a ``herald serve`` under callgrind, repeatable on a busy machine
where CPU time is not (figures 6-8's notes in README.md).

    python -m benchmarks.push_instructions --python OTHER/.venv/bin/python --out DIR

The server (any checkout's interpreter, so that two versions can run at once) is instrumented only
while a phase is measured. Each phase publishes one event at a time and the next once the last
arrived everywhere, so that no commit groups publishes and both versions do the same work: an MCP
push to one session, one SSE stream, and a fan-out to many streams of one agent. An idle phase of
a few seconds gives the instructions that timers cost per second; each phase is shown with and
without that share of its own length. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.fig_stream import Arrivals, SseProtocol
from benchmarks.loadgen import Address, Connection, encode_request
from benchmarks.mcp_client import Inbox, StreamProtocol, open_sessions

IDLE_S = 5.0
WARM_UP = 3
START_TIMEOUT_S = 600.0
PAD = "x" * 40


class Measured:
    """The server under callgrind, and the phases dumped so far."""

    def __init__(self, pid: int, address: Address, admin_key: str) -> None:
        self.pid = pid
        self.address = address
        self.admin_key = admin_key
        self.walls: dict[str, float] = {}
        self._connection: Connection | None = None

    def control(self, *args: str) -> None:
        subprocess.run(["callgrind_control", *args, str(self.pid)], check=True, capture_output=True)

    async def call(self, path: str, body: dict[str, Any], token: str | None = None) -> Any:
        """POST ``body``; a connection closed while idle is opened again."""
        request = encode_request(
            "POST",
            path,
            self.address,
            token=token or self.admin_key,
            body=json.dumps(body).encode(),
        )
        for attempt in range(2):
            if self._connection is None:
                self._connection = await Connection.open(self.address)
            try:
                status, answer = await self._connection.call(request)
            except Exception:
                self._connection = None
                if attempt:
                    raise
                continue
            if status not in (200, 201, 202):
                raise RuntimeError(f"POST {path} answered {status}: {answer[:300]!r}")
            return json.loads(answer)
        raise AssertionError("unreachable")

    async def phase(self, name: str, count: int, step: Callable[[], Awaitable[None]]) -> None:
        self.control("--zero")
        started = time.perf_counter()
        for _ in range(count):
            await step()
        self.walls[name] = time.perf_counter() - started
        self.control("--dump=" + name)


async def _serve(python: str, out: Path) -> tuple[asyncio.subprocess.Process, Measured]:
    admin_key = "herald_admin_instructions_" + secrets.token_urlsafe(24)
    command = [
        "valgrind", "--tool=callgrind", "--instr-atstart=no",
        f"--callgrind-out-file={out}/callgrind.%p.out",
        python, "-m", "herald.cli", "serve", "--store", f"sqlite:///{out / 'herald.db'}",
        "--host", "127.0.0.1", "--port", "0", "--log-level", "warning", "--publish-rate", "0",
        "--streams-per-key", "0", "--requests-per-key", "0", "--sessions-per-key", "0",
    ]  # fmt: skip
    with (out / "server.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            env={**os.environ, "HERALD_ADMIN_KEY": admin_key},
        )
    assert process.stdout is not None
    while True:
        line = (await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S)).decode()
        if not line:
            raise RuntimeError(f"herald serve ended: see {out / 'server.log'}")
        found = re.search(r"listening on http://([\d.]+):(\d+)", line)
        if found:
            address = Address(found.group(1), int(found.group(2)))
            return process, Measured(process.pid, address, admin_key)


async def _open_streams(
    server: Measured, key: str, count: int, inbox: Inbox
) -> list[StreamProtocol]:
    address = server.address
    request = (
        f"GET /channel/stream HTTP/1.1\r\nHost: {address.host}:{address.port}\r\n"
        f"Authorization: Bearer {key}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    loop = asyncio.get_running_loop()
    streams = []
    for _ in range(count):
        _, stream = await loop.create_connection(
            lambda: SseProtocol(request, inbox), address.host, address.port
        )
        await asyncio.wait_for(asyncio.shield(stream.answered), START_TIMEOUT_S)
        streams.append(stream)
    return streams


async def measure(python: str, out: Path, events: int, fan_events: int, streams: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    process, server = await _serve(python, out)
    assert process.stdout is not None
    drainer = asyncio.create_task(process.stdout.read())
    keys = {}
    for handle in ("session", "stream", "fanout"):
        keys[handle] = (await server.call("/v1/agents", {"handle": handle}))["api_key"]
    pushes = Inbox()
    await open_sessions(server.address, [keys["session"]], pushes, parallel=1)
    arrivals = Arrivals()
    streamed = Inbox()
    streamed.receipts = arrivals
    opened = await _open_streams(server, keys["stream"], 1, streamed)
    opened += await _open_streams(server, keys["fanout"], streams, streamed)
    published = 0

    async def push() -> None:
        nonlocal published
        published += 1
        body = {"to": "session", "type": "bench.mcp", "text": f"M{published}", "data": {"pad": PAD}}
        event_id = (await server.call("/v1/events", body))["id"]
        while event_id not in pushes.receipts.at:
            await asyncio.sleep(0.002)

    async def stream(handle: str, reaching: int) -> None:
        nonlocal published
        published += 1
        tag = f"{published:06d}"
        body = {"to": handle, "type": "bench.stream", "text": f"K{tag}", "data": {"pad": PAD}}
        await server.call("/v1/events", body)
        while arrivals.count.get(tag, 0) < reaching:
            await asyncio.sleep(0.002)

    for _ in range(WARM_UP):
        await push()
        await stream("stream", 1)
        await stream("fanout", streams)
    server.control("--instr=on")
    await server.phase("idle", 1, lambda: asyncio.sleep(IDLE_S))
    await server.phase("mcp_push", events, push)
    await server.phase("one_stream", events, lambda: stream("stream", 1))
    await server.phase("fanout", fan_events, lambda: stream("fanout", streams))
    server.control("--instr=off")
    for opened_stream in opened:
        opened_stream.close()
    process.send_signal(2)
    await asyncio.wait_for(process.wait(), START_TIMEOUT_S)
    drainer.cancel()
    counts = {"mcp_push": events, "one_stream": events, "fanout": fan_events}
    print(json.dumps(_summary(out, server.walls, counts, streams)))


def _summary(
    out: Path, walls: dict[str, float], counts: dict[str, int], streams: int
) -> dict[str, Any]:
    totals: dict[str, int] = {}
    for dump in out.glob("callgrind.*.out.*"):
        text = dump.read_text(errors="replace")
        phase = re.search(r"^desc: Trigger: dump (\S+)", text, re.M)
        total = re.search(r"^totals: (\d+)", text, re.M)
        if phase and total:
            totals[phase.group(1)] = int(total.group(1))
    idle_per_s = totals["idle"] / walls["idle"]
    summary: dict[str, Any] = {"idle_instructions_per_s": round(idle_per_s), "streams": streams}
    for phase, count in counts.items():
        summary[phase] = {
            "per_event": round(totals[phase] / count),
            "per_event_less_idle": round((totals[phase] - idle_per_s * walls[phase]) / count),
            "wall_s": round(walls[phase], 1),
        }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="the server's interpreter")
    parser.add_argument("--out", type=Path, required=True, help="a directory for the dumps")
    parser.add_argument("--events", type=int, default=60, help="events of each one-way phase")
    parser.add_argument("--fan-events", type=int, default=10, help="events of the fan-out")
    parser.add_argument("--streams", type=int, default=100, help="streams of the fan-out")
    args = parser.parse_args()
    asyncio.run(measure(args.python, args.out, args.events, args.fan_events, args.streams))


if __name__ == "__main__":
    main()
