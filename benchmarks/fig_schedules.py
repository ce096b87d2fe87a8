"""Figure 20: 1,000 schedules falling due in the same second.

An agent follows its stream (``GET /channel/stream``); 1,000 events are published for it with
one ``deliver_at`` a few seconds ahead (one batch), and the figure is how long after that time
the stream has all of them: due, made pending (``Hub.release_due``) and pushed. The baseline is
the same 1,000 published at once (one batch, no ``deliver_at``): how long after the publish was
sent the stream has them all. Rounds alternate the two on one server, each with an agent of its
own; each side shows its median round.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from benchmarks import raw_postgres
from benchmarks.config import Sizes
from benchmarks.results import Figure, Measurement, Target
from benchmarks.server import Server, create_agent, herald_server
from herald.sse import SSEDecoder
from herald.times import iso_ms

EVENTS = 1_000
AHEAD_S = 3.0
"""How far ahead the schedule's time is: the publish is committed well before it."""
ROUNDS = 3
POLL_S = 0.01
WAIT_S = 60.0


@contextlib.asynccontextmanager
async def _stream(server: Server, key: str) -> AsyncIterator[asyncio.Future[float]]:
    """The agent's stream, read in the background; the future is when (``time.time()``) its
    ``EVENTS``-th event arrived."""
    base = f"http://{server.address.host}:{server.address.port}"
    done: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    opened = asyncio.Event()

    async def read() -> None:
        headers = {"authorization": f"Bearer {key}"}
        timeout = httpx.Timeout(10, read=None)
        async with (
            httpx.AsyncClient(base_url=base, headers=headers, timeout=timeout) as client,
            client.stream("GET", "/channel/stream") as answer,
        ):
            opened.set()
            decoder, seen = SSEDecoder(), 0
            async for chunk in answer.aiter_bytes():
                seen += sum(1 for event in decoder.feed(chunk) if event.type == "message")
                if seen >= EVENTS:
                    done.set_result(time.time())
                    return

    task = asyncio.create_task(read())
    try:
        async with asyncio.timeout(10):
            await opened.wait()
        yield done
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _publish(server: Server, handle: str, deliver_at: str | None) -> None:
    fields = {} if deliver_at is None else {"deliver_at": deliver_at}
    batch = [{"to": handle, "type": "bench.due", "text": f"e{n}", **fields} for n in range(EVENTS)]
    base = f"http://{server.address.host}:{server.address.port}"
    headers = {"authorization": f"Bearer {server.admin_key}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=WAIT_S) as admin:
        answer = await admin.post("/v1/events", json=batch)
    if answer.status_code != 202:
        raise RuntimeError(f"POST /v1/events answered {answer.status_code}: {answer.text[:300]}")


async def _all_pending(server: Server, handle: str) -> float:
    """When (``time.time()``) none of the agent's events is scheduled any more: read every
    ``POLL_S`` (GET /v1/events?status=scheduled)."""
    base = f"http://{server.address.host}:{server.address.port}"
    headers = {"authorization": f"Bearer {server.admin_key}"}
    params = {"agent": handle, "status": "scheduled", "limit": "1"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=WAIT_S) as admin:
        while (await admin.get("/v1/events", params=params)).json()["events"]:
            await asyncio.sleep(POLL_S)
    return time.time()


async def _round(server: Server, handle: str, scheduled: bool) -> tuple[float, float | None]:
    """Milliseconds from the events' time (their deliver_at, or the publish) to the last one
    on the stream, and (scheduled) to none of them scheduled any more."""
    key = await create_agent(server, handle)
    pending = None
    async with _stream(server, key) as done:
        if scheduled:
            due_ms = int((time.time() + AHEAD_S) * 1000)
            await _publish(server, handle, iso_ms(due_ms))
            start = due_ms / 1000
            await asyncio.sleep(max(start - time.time() - 0.05, 0))  # the look starts at due
            async with asyncio.timeout(WAIT_S):
                pending = (await _all_pending(server, handle) - start) * 1000
        else:
            start = time.time()
            await _publish(server, handle, None)
        async with asyncio.timeout(WAIT_S):
            last = await done
    return (last - start) * 1000, pending


async def schedules_figures(sizes: Sizes, workdir: Path, postgres_url: str | None) -> list[Figure]:
    """The figure on SQLite, and on PostgreSQL (a scratch database) unless ``postgres_url`` is
    None."""
    figures = [await schedules_figure(sizes, workdir)]
    if postgres_url is not None:
        async with raw_postgres.scratch_database(postgres_url) as url:
            figures.append(await schedules_figure(sizes, workdir, url))
    return figures


async def schedules_figure(sizes: Sizes, workdir: Path, store: str | None = None) -> Figure:
    measured: dict[bool, list[float]] = {False: [], True: []}
    pending: list[float] = []
    name = "schedules" if store is None else "schedules-pg"
    async with herald_server(workdir, name, store) as server:
        for index in range(ROUNDS):
            order = [False, True] if index % 2 == 0 else [True, False]
            for scheduled in order:
                handle = f"due-{index}-{'s' if scheduled else 'n'}"
                streamed, made_pending = await _round(server, handle, scheduled)
                measured[scheduled].append(streamed)
                if made_pending is not None:
                    pending.append(made_pending)
    backend = "SQLite" if store is None else "PostgreSQL"

    def median(values: list[float], label: str) -> Measurement:
        middle = Measurement(label, statistics.median(values), "ms")
        middle.details["rounds (ms)"] = [f"{v:,.0f}" for v in values]
        return middle

    baseline = median(measured[False], f"{EVENTS:,} published at once, publish to all streamed")
    herald = median(measured[True], f"{EVENTS:,} scheduled for one time, that time to all streamed")
    made_pending = median(pending, f"{EVENTS:,} scheduled for one time, that time to all pending")
    return Figure(
        "20a" if store is None else "20b",
        f"{EVENTS:,} schedules falling due in the same second ({backend})",
        baseline,
        Target("all deliverable within 1 s of their time", "at_most", 1000.0),
        herald,
        method=[
            f"One herald serve on {backend}; for each round a new agent follows its"
            " GET /channel/stream.",
            f"Scheduled: one batch of {EVENTS:,} events with one deliver_at {AHEAD_S:g} s"
            " ahead; the figure is the time from that deliver_at to the last of them on the"
            " stream (due, made pending, pushed).",
            f"Baseline: the same {EVENTS:,} published at once (one batch, no deliver_at): the"
            " time from sending the publish to the last of them on the stream.",
            f"Diagnostic: from that deliver_at to none of them scheduled any more (all"
            f" pending, deliverable by every way), GET /v1/events?status=scheduled read every"
            f" {POLL_S * 1000:g} ms: the schedule's own part, without the stream's.",
            f"{ROUNDS} rounds, the order of the two alternating; each side shows its median"
            f" round (sizes unused: {sizes.batch_size} is figure 3's batch).",
        ],
        diagnostics=[made_pending],
    )
