"""The webhook worker: schedules each open event's deliveries to its agent's endpoints, claims
the due ones (so that one process sends each attempt) and retries on a schedule kept in the
store. Bounded concurrency per endpoint: a slow or dead endpoint never holds up the others."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import Counter
from collections.abc import Callable, Sequence

from herald.endpoints import DEFAULT_SCHEDULE_S, Delivery, Endpoint, Kind
from herald.events import Agent, Attempt, Event, new_id
from herald.hub import Hub
from herald.webhooks.sender import Outcome, Sender

log = logging.getLogger("herald.webhooks")

CLAIM_LIMIT = 100
JITTER = 0.1


class WebhookWorker:
    """Args:
    hub: the store and its publishes (which wake the worker).
    sender: what makes the HTTP calls.
    schedule_s: delays before each try; its length is the number of tries.
    disable_after_s: an endpoint failing for this long is disabled; its events stay in the
        store for the drain.
    grace_s: how long an agent with a live session here has to acknowledge a push before the
        webhook is used too (agents without one get the webhook at once).
    present: the agent ids with a live session in this process.
    per_endpoint: how many requests may be in flight to one endpoint.
    """

    def __init__(
        self,
        hub: Hub,
        sender: Sender,
        *,
        schedule_s: Sequence[float] = DEFAULT_SCHEDULE_S,
        disable_after_s: float = 5 * 24 * 3600,
        grace_s: float = 300.0,
        present: Callable[[], set[str]] | None = None,
        per_endpoint: int = 4,
        poll_interval_s: float = 1.0,
        min_interval_s: float = 0.2,
        lease_s: float = 60.0,
    ) -> None:
        self.hub = hub
        self.sender = sender
        self.schedule_s = tuple(schedule_s)
        self.disable_after_ms = int(disable_after_s * 1000)
        self.grace_ms = int(grace_s * 1000)
        self.present: Callable[[], set[str]] = present or set
        self.per_endpoint = per_endpoint
        self.poll_interval_s = poll_interval_s
        self.min_interval_s = min_interval_s
        self.lease_ms = int(lease_s * 1000)
        self.worker_id = new_id("wrk_")
        self._in_flight: Counter[str] = Counter()
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        hub.add_listener(lambda _agents: self._wake.set())

    async def run(self) -> None:
        """Work until cancelled; a failing round is logged and tried again."""
        try:
            while True:
                started = 0
                try:
                    started = await self.run_once()
                except Exception:  # the loop's top level: log, keep going
                    log.exception("webhook round failed")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_interval_s):
                        await self._wake.wait()
                if not started:
                    # Woken by publishes, which come in bursts: one round a little later serves
                    # them all, and leaves the store to the publishers meanwhile.
                    await asyncio.sleep(self.min_interval_s)
                self._wake.clear()
        finally:
            for task in self._tasks:
                task.cancel()
            await self.sender.close()

    async def run_once(self) -> int:
        """Schedule, claim and start the due deliveries; returns how many were started."""
        store = self.hub.store
        now = store.now()
        present = sorted(self.present())
        await store.schedule_deliveries(now, CLAIM_LIMIT * 10, not_agents=present)
        if present:
            await store.schedule_deliveries(now - self.grace_ms, CLAIM_LIMIT * 10, agents=present)
        # An endpoint with requests in flight waits for all of them before it gets more: at
        # most ``per_endpoint`` at once, and a slow one never holds up the others.
        busy = list(self._in_flight)
        claimed = await store.claim_deliveries(
            self.worker_id,
            CLAIM_LIMIT,
            self.lease_ms,
            per_endpoint=self.per_endpoint,
            skip_endpoints=busy,
        )
        for delivery, endpoint, event, agent in claimed:
            self._in_flight[endpoint.id] += 1
            task = asyncio.create_task(self._deliver(delivery, endpoint, event, agent))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return len(claimed)

    async def wait_idle(self) -> None:
        """Wait for the attempts started so far (for tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _deliver(
        self, delivery: Delivery, endpoint: Endpoint, event: Event, agent: Agent
    ) -> None:
        try:
            outcome = await self.sender.send(endpoint, agent, event, self.hub.store.now())
            await self._record(delivery, endpoint, outcome)
        except Exception:  # keep the worker alive; the claim runs out and it is tried again
            log.exception("delivering %s to %s failed", event.id, endpoint.url)
        finally:
            self._in_flight[endpoint.id] -= 1
            if self._in_flight[endpoint.id] <= 0:
                del self._in_flight[endpoint.id]
            self._wake.set()

    async def _record(self, delivery: Delivery, endpoint: Endpoint, outcome: Outcome) -> None:
        store = self.hub.store
        now = store.now()
        tries = delivery.attempts + 1
        mechanism = endpoint.kind.value
        if outcome.ok:
            status = "delivered" if endpoint.kind is Kind.WEBHOOK else "sent"
            attempt = Attempt(delivery.event_id, now, mechanism, status, endpoint.id)
            await store.finish_delivery(
                delivery, attempt=attempt, next_at=None, event_status=status, endpoint_ok=True
            )
            return
        next_at = (
            None
            if outcome.disable or tries >= len(self.schedule_s)
            else self._next(now, tries, outcome)
        )
        outcome_name = "failed" if next_at is not None else "undeliverable"
        attempt = Attempt(
            delivery.event_id, now, mechanism, outcome_name, endpoint.id, outcome.error
        )
        await store.finish_delivery(
            delivery,
            attempt=attempt,
            next_at=next_at,
            event_status=None,
            endpoint_ok=False,
            disable_reason=outcome.error if outcome.disable else None,
            disable_failing_since=now - self.disable_after_ms,
        )

    def _next(self, now: int, tries: int, outcome: Outcome) -> int:
        delay = self.schedule_s[tries] * random.uniform(1 - JITTER, 1 + JITTER)
        if outcome.retry_after_s is not None:
            delay = max(delay, outcome.retry_after_s)
        return now + int(delay * 1000)
