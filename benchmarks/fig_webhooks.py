"""Figures 9-10: herald's signed webhook deliveries to a local receiver, in this process.

9: the delivery rate of ``WebhookWorker`` rounds (``run_once`` + ``wait_idle``) beside a plain
unsigned POST loop with the same HTTP client (httpx2) and the same number of requests in flight.
10: the delivery rate of healthy endpoints while one other agent's endpoint hangs (or answers 500),
beside the same endpoints with no failing one, all driven by the worker's own loop (``run``).
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
from standardwebhooks import Webhook

from benchmarks.config import Sizes
from benchmarks.cpu import Probe
from benchmarks.results import Figure, Measurement, Target, median_measurement, per_event_us
from herald import Hub
from herald.addresses import AddressPolicy
from herald.inputs.events import parse_new_event
from herald.models import Agent, Endpoint, Event
from herald.webhooks import manage
from herald.webhooks.sender import Sender, SendOutcome
from herald.webhooks.worker import WebhookWorker

HERE = Path(__file__).resolve().parent
LOOPBACK = AddressPolicy(allow_loopback=True)
ROUNDS = 3


class CountingSender(Sender):
    """herald's sender, counting the successful deliveries per endpoint URL."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ok: Counter[str] = Counter()
        self.changed = asyncio.Event()

    async def send(
        self, endpoint: Endpoint, agent: Agent, event: Event, now_ms: int
    ) -> SendOutcome:
        return self._count(endpoint, await super().send(endpoint, agent, event, now_ms))

    async def send_signed(
        self, endpoint: Endpoint, message_id: str, payload: dict[str, Any], now_ms: int
    ) -> SendOutcome:
        """An MCP Events subscription's delivery (figure 13), counted the same way."""
        outcome = await super().send_signed(endpoint, message_id, payload, now_ms)
        return self._count(endpoint, outcome)

    def _count(self, endpoint: Endpoint, outcome: SendOutcome) -> SendOutcome:
        if outcome.ok:
            self.ok[endpoint.url] += 1
            self.changed.set()
        return outcome


@asynccontextmanager
async def receiver() -> AsyncIterator[tuple[str, int]]:
    """The receiver subprocess: its base URL and pid."""
    process = subprocess.Popen(
        [sys.executable, str(HERE / "webhook_receiver.py")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = int(await asyncio.to_thread(process.stdout.readline))
        yield f"http://127.0.0.1:{port}", process.pid
    finally:
        process.terminate()
        process.wait(timeout=5)


async def _set_webhook(hub: Hub, agent: Agent, url: str) -> None:
    await manage.set_webhook(hub, agent.id, url)


Attach = Callable[[Hub, Agent, str], Awaitable[None]]
"""How an agent gets its URL: a webhook endpoint, or (figure 13) a subscription."""


async def hub_with_endpoints(
    path: Path, agents: list[tuple[str, str]], per_agent: int, attach: Attach = _set_webhook
) -> Hub:
    """A fresh hub with one webhook endpoint per (handle, url) (or what ``attach`` gives the
    agent) and ``per_agent`` events each."""
    path.unlink(missing_ok=True)
    hub = Hub.from_url(f"sqlite:///{path}")
    await hub.__aenter__()
    for handle, url in agents:
        agent, _ = await hub.create_agent(handle)
        await attach(hub, agent, url)
    events = [
        parse_new_event(
            {"to": handle, "type": "bench.tick", "text": f"event {i}", "data": {"i": i}}
        )
        for i in range(per_agent)
        for handle, _ in agents
    ]
    for start in range(0, len(events), 500):
        await hub.publish_many(events[start : start + 500])
    return hub


async def herald_worker(sizes: Sizes, workdir: Path, base: str, pid: int) -> Measurement:
    agents = [(f"a{n}", f"{base}/ok/{n}") for n in range(sizes.webhook_endpoints)]
    per_agent = sizes.webhook_events // sizes.webhook_endpoints
    hub = await hub_with_endpoints(workdir / "webhooks.db", agents, per_agent)
    sender = CountingSender("http://hub.test", LOOPBACK)
    worker = WebhookWorker(hub, sender, per_endpoint=sizes.webhook_per_endpoint)
    total = per_agent * len(agents)
    try:
        probe = Probe(pid)
        started = time.perf_counter()
        done, finished = await run_until(worker, sender, {url for _, url in agents}, total, sizes)
        elapsed = finished - started
        usage = probe.stop()
    finally:
        await hub.__aexit__(None, None, None)
    details = {"delivered": done, "events": total, "seconds": round(elapsed, 3)}
    return Measurement("herald WebhookWorker", done / elapsed, "events/s", usage=usage,
                       details=details, cpu_us=per_event_us(usage.generator_s, done))  # fmt: skip


async def run_until(
    worker: WebhookWorker, sender: CountingSender, urls: set[str], total: int, sizes: Sizes
) -> tuple[int, float]:
    """Run the worker's loop until ``total`` deliveries to ``urls`` succeeded (or time is up);
    returns how many did, and when (``time.perf_counter``): the worker's stop after it, which
    gives a request in flight to a hanging endpoint its grace, is not part of the rate."""
    task = asyncio.create_task(worker.run())
    deadline = time.perf_counter() + sizes.webhook_seconds
    try:
        while (done := sum(sender.ok[url] for url in urls)) < total:
            sender.changed.clear()
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(sender.changed.wait(), remaining)
            except TimeoutError:
                break
        return done, time.perf_counter()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _plain_posts(sizes: Sizes, base: str, pid: int, signed: bool = False) -> Measurement:
    """The same number of POSTs, unsigned, same client, same requests in flight (``signed``:
    each signed with ``standardwebhooks`` as herald's sender does, a diagnostic)."""
    concurrency = sizes.webhook_endpoints * sizes.webhook_per_endpoint
    total = (sizes.webhook_events // sizes.webhook_endpoints) * sizes.webhook_endpoints
    body = b'{"type":"bench.tick","data":{"i":0}}' + b" " * 300
    counter = iter(range(total))
    signer = Webhook("whsec_" + base64.b64encode(b"k" * 24).decode())
    done = 0
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(15.0)) as client:

        async def loop(n: int) -> None:
            nonlocal done
            url = f"{base}/ok/{n % sizes.webhook_endpoints}"
            for index in counter:
                headers = {"content-type": "application/json"}
                if signed:
                    moment = datetime.datetime.now(tz=datetime.UTC)
                    headers["webhook-id"] = f"evt_{index}"
                    headers["webhook-signature"] = signer.sign(
                        f"evt_{index}", moment, body.decode()
                    )
                response = await client.post(url, content=body, headers=headers)
                if response.status_code == 200:
                    done += 1

        probe = Probe(pid)
        started = time.perf_counter()
        await asyncio.wait_for(
            asyncio.gather(*(loop(n) for n in range(concurrency))), sizes.webhook_seconds * 2
        )
        elapsed = time.perf_counter() - started
        usage = probe.stop()
    details = {"delivered": done, "concurrency": concurrency, "seconds": round(elapsed, 3)}
    label = "signed httpx2 POST loop (no store)" if signed else "plain httpx2 POST loop"
    return Measurement(label, done / elapsed, "events/s", usage=usage,
                       details=details, cpu_us=per_event_us(usage.generator_s, done))  # fmt: skip


async def delivery_figure(sizes: Sizes, workdir: Path) -> Figure:
    async with receiver() as (base, pid):
        await _plain_posts(sizes, base, pid)  # warm-up of the receiver and the client
        plain: list[Measurement] = []
        signing: list[Measurement] = []
        worker: list[Measurement] = []
        for _ in range(ROUNDS):  # interleaved; each side shows its median round
            plain.append(await _plain_posts(sizes, base, pid))
            signing.append(await _plain_posts(sizes, base, pid, signed=True))
            worker.append(await herald_worker(sizes, workdir, base, pid))
        baseline, signed, herald = (
            median_measurement(plain),
            median_measurement(signing),
            median_measurement(worker),
        )
    figure = Figure(
        "9",
        "signed webhook deliveries to a local receiver",
        baseline,
        Target("≥ 0.9x the plain POST loop", "ratio_at_least", 0.9),
        herald=herald,
        diagnostics=[signed],
        method=[
            f"{sizes.webhook_events} events for {sizes.webhook_endpoints} agents, each with a"
            f" webhook endpoint on a raw asyncio receiver subprocess answering 200; herald: a"
            f" `Hub` on a temp SQLite file, `WebhookWorker(per_endpoint="
            f"{sizes.webhook_per_endpoint})` running its loop (`run()`, as in `herald serve`)"
            " until all are delivered (signed, recorded, marked delivered); the time includes"
            " scheduling them.",
            "Baseline: the same number of unsigned POSTs of a similar body with one httpx2"
            " `AsyncClient` and the same number of requests in flight, in the same process"
            f" as herald (after a warm-up run): {ROUNDS} rounds of the three, interleaved, each"
            " showing its median round. Diagnostic: the"
            " same loop with each POST signed by `standardwebhooks` (signing without the"
            " store).",
        ],
        notes=[
            'Both sides run in this process ("generator CPU" is the worker or the POST loop'
            ' with its client); "server" is the receiver subprocess. CPU µs/event is this'
            " process's CPU time over the deliveries."
        ],
    )
    return figure


async def _healthy_rate(sizes: Sizes, workdir: Path, base: str, failing: str | None) -> Measurement:
    healthy = [(f"h{n}", f"{base}/ok/{n}") for n in range(sizes.webhook_endpoints)]
    agents = healthy + ([("bad", f"{base}/{failing}/0")] if failing else [])
    per_agent = sizes.webhook_failing_events // sizes.webhook_endpoints
    hub = await hub_with_endpoints(workdir / f"webhooks-{failing}.db", agents, per_agent)
    sender = CountingSender("http://hub.test", LOOPBACK, timeout_s=60.0)
    worker = WebhookWorker(
        hub,
        sender,
        per_endpoint=sizes.webhook_per_endpoint,
        poll_interval_s=0.05,
        min_interval_s=0.0,
    )
    urls = {url for _, url in healthy}
    total = per_agent * len(healthy)
    started, cpu = time.perf_counter(), time.process_time()
    try:
        done, finished = await run_until(worker, sender, urls, total, sizes)
        elapsed, cpu = finished - started, time.process_time() - cpu
    finally:
        await hub.__aexit__(None, None, None)
    label = f"healthy endpoints, one {failing}ing" if failing else "healthy endpoints alone"
    details = {"delivered": done, "events": total, "seconds": round(elapsed, 3)}
    return Measurement(
        label, done / elapsed, "events/s", details=details, cpu_us=per_event_us(cpu, done)
    )


async def failing_endpoint_figure(sizes: Sizes, workdir: Path) -> Figure:
    async with receiver() as (base, _pid):
        alone: list[Measurement] = []
        hung: list[Measurement] = []
        erring: list[Measurement] = []
        for _ in range(ROUNDS):  # interleaved; each side shows its median round
            alone.append(await _healthy_rate(sizes, workdir, base, None))
            hung.append(await _healthy_rate(sizes, workdir, base, "hang"))
            erring.append(await _healthy_rate(sizes, workdir, base, "fail"))
        baseline, hanging, failing = (
            median_measurement(alone),
            median_measurement(hung),
            median_measurement(erring),
        )
    baseline.label = "the same endpoints, no failing one"
    return Figure(
        "10",
        "healthy webhook rate beside one hanging endpoint",
        baseline,
        Target("≥ 0.9x without it (< 10% slower)", "ratio_at_least", 0.9),
        herald=hanging,
        diagnostics=[failing],
        method=[
            f"{sizes.webhook_endpoints} agents with endpoints answering 200,"
            f" {sizes.webhook_failing_events // sizes.webhook_endpoints} events each, delivered"
            f" by `WebhookWorker.run()` (per_endpoint={sizes.webhook_per_endpoint}, poll 50 ms,"
            " min_interval_s=0 so the rate is the worker's capacity, not the 0.2 s pause"
            " between rounds that `herald serve` uses); the rate is the healthy endpoints'"
            " deliveries over the time until the last one.",
            "herald: the same plus one agent, with as many events, whose endpoint never answers"
            " (sender timeout 60 s); the diagnostic has it answer 500 instead. Baseline: no"
            f" failing agent, same run, same receiver subprocess; {ROUNDS} rounds of the three,"
            " interleaved, each side showing its median round.",
            "CPU µs/event: this process's CPU time (the worker and its sender) over the healthy"
            " endpoints' deliveries.",
        ],
    )
