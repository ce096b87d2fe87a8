"""Figure 13: MCP Events webhook subscriptions (``events/subscribe``), in this process.

The delivery rate of one ``herald.event`` subscription per agent, subscribed with
``herald.webhooks.subscriptions.subscribe`` (the receiver answers the verification challenge) and
delivered by ``WebhookWorker.run()``, beside herald's own signed webhooks (figure 9's herald
side) re-measured in the same run: the same agents, URLs, events and worker, the same receiver.
"""

from __future__ import annotations

import base64
import dataclasses
import time
from pathlib import Path

from benchmarks.config import Sizes
from benchmarks.cpu import Probe
from benchmarks.fig_webhooks import (
    LOOPBACK,
    CountingSender,
    herald_worker,
    hub_with_endpoints,
    receiver,
    run_until,
)
from benchmarks.results import Figure, Measurement, Target, median_measurement, per_event_us
from herald import Hub
from herald.inputs.refusals import parse
from herald.inputs.subscriptions import SubscribeInput
from herald.models import Agent
from herald.webhooks import subscriptions
from herald.webhooks.worker import WebhookWorker

SECRET = "whsec_" + base64.b64encode(b"b" * 32).decode()
WARM_UP_PER_ENDPOINT = 50
"""Events per agent each side delivers, unmeasured, before the first round."""


async def _subscriptions(sizes: Sizes, workdir: Path, base: str, pid: int) -> Measurement:
    urls = [(f"s{n}", f"{base}/ok/{n}") for n in range(sizes.webhook_endpoints)]
    per_agent = sizes.webhook_events // sizes.webhook_endpoints
    sender = CountingSender("http://hub.test", LOOPBACK)

    async def subscribe(hub: Hub, agent: Agent, url: str) -> None:
        raw = {
            "name": "herald.event",
            "arguments": {"types": ["bench.*"]},
            "delivery": {"mode": "webhook", "url": url, "secret": SECRET},
        }
        await subscriptions.subscribe(hub, sender, agent, parse(SubscribeInput, raw, "params"))

    hub = await hub_with_endpoints(workdir / "subscriptions.db", urls, per_agent, subscribe)
    worker = WebhookWorker(hub, sender, per_endpoint=sizes.webhook_per_endpoint)
    total = per_agent * len(urls)
    try:
        probe = Probe(pid)
        started = time.perf_counter()
        done, finished = await run_until(worker, sender, {url for _, url in urls}, total, sizes)
        elapsed = finished - started
        usage = probe.stop()
    finally:
        await hub.__aexit__(None, None, None)
    details = {"delivered": done, "events": total, "seconds": round(elapsed, 3)}
    return Measurement("herald events/subscribe webhooks", done / elapsed, "events/s",
                       usage=usage, details=details,
                       cpu_us=per_event_us(usage.generator_s, done))  # fmt: skip


async def subscription_figure(sizes: Sizes, workdir: Path) -> Figure:
    rounds = sizes.subscription_rounds
    signed: list[Measurement] = []
    subscribed: list[Measurement] = []
    async with receiver() as (base, pid):
        # Not measured: the first deliveries of a process (imports, connections) are slower.
        warm = dataclasses.replace(
            sizes, webhook_events=WARM_UP_PER_ENDPOINT * sizes.webhook_endpoints
        )
        await herald_worker(warm, workdir, base, pid)
        await _subscriptions(warm, workdir, base, pid)
        for index in range(rounds):  # interleaved, the order alternating
            if index % 2:
                subscribed.append(await _subscriptions(sizes, workdir, base, pid))
                signed.append(await herald_worker(sizes, workdir, base, pid))
            else:
                signed.append(await herald_worker(sizes, workdir, base, pid))
                subscribed.append(await _subscriptions(sizes, workdir, base, pid))
    ratios = ", ".join(
        f"{new.value / old.value:.2f}x" if old.value else "nan"
        for old, new in zip(signed, subscribed, strict=True)
    )
    baseline, herald = median_measurement(signed), median_measurement(subscribed)
    baseline.label = "herald signed webhooks (figure 9's herald side)"
    short = [m for m in signed + subscribed if m.details["delivered"] < m.details["events"]]
    notes = [
        'Both sides run in this process ("generator CPU" is the worker); "server" is the'
        " receiver subprocess.",
        f"Subscriptions over signed webhooks, round by round: {ratios}.",
    ]
    if short:
        notes.append(
            f"{len(short)} round(s) stopped at the {sizes.webhook_seconds:g} s limit before all"
            " were delivered; their rate is over what was."
        )
    return Figure(
        "13",
        "MCP Events webhook subscription deliveries",
        baseline,
        Target("≥ 0.9x herald's signed webhooks", "ratio_at_least", 0.9),
        herald=herald,
        method=[
            f"{sizes.webhook_events} events (type bench.tick) for {sizes.webhook_endpoints}"
            " agents, on a fresh `Hub` on a temp SQLite file each round, delivered by"
            f" `WebhookWorker(per_endpoint={sizes.webhook_per_endpoint})` running its loop"
            " (`run()`, as in `herald serve`) until all are delivered; the time includes"
            " scheduling them. The receiver is figure 9's (`webhook_receiver.py`), answering"
            " 200 (and a verification challenge with its echo).",
            "herald: each agent has one MCP Events webhook subscription, `herald.event`"
            ' {types: ["bench.*"]} with a client secret, subscribed in process with'
            " `herald.webhooks.subscriptions.subscribe` (which verifies the URL) before the"
            " events are published; each delivery is the occurrence with its cursor, signed,"
            " with `X-MCP-Subscription-Id`. Baseline: herald's signed webhooks, one endpoint"
            " per agent (`set_webhook`), figure 9's herald side re-measured here.",
            f"After an unmeasured warm-up of {WARM_UP_PER_ENDPOINT} events per agent each way,"
            f" {rounds} round(s) of the two, interleaved with the order alternating, each side"
            " showing its median round (every round's rate in the details).",
            "CPU µs/event: this process's CPU time (the worker and its sender) over the"
            " deliveries of the median round.",
        ],
        notes=notes,
    )
