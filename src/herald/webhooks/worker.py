"""The webhook worker: schedules each open event's deliveries to its agent's endpoints, claims
the due ones (so that one process sends each attempt) and retries on a schedule kept in the
store.

Each endpoint has a few lanes, each sending one request at a time from the endpoint's queue of
claimed deliveries, so a slow or dead endpoint never holds up the others. The queue is refilled
ahead of need, by a claim once half of it is sent (so each claim takes many deliveries), and
results are recorded in batches in the background: the store is off the path from one request
to the next.

Time is the hub's (``hub.now()``, milliseconds by its clock), the one the store keeps every
schedule and claim in: when to schedule again, whether a claim still outlasts a request, when
to try again. A test moves that clock instead of waiting; only the waits for a wake-up are
real time, and what is done after one is decided by the clock."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import time
from collections import Counter, defaultdict, deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from herald import cursors
from herald.addresses import AddressRefused, Unresolvable
from herald.capabilities import delivery_webhook_id
from herald.config import DEFAULTS
from herald.errors import InvalidInput
from herald.hub import Hub
from herald.hub.subscriptions import AGENT_DELETED, TYPE_DELETED
from herald.ids import new_id
from herald.logs import log_attempt, log_endpoint_state, webhook_deliveries
from herald.models import (
    Agent,
    Attempt,
    Delivery,
    Endpoint,
    Event,
    Finished,
    Kind,
    OneClaim,
    WebhookSubscription,
)
from herald.pace import pace_ms
from herald.subscriptions import catalogue
from herald.subscriptions.codes import FORBIDDEN, NOT_FOUND
from herald.urls import password_free
from herald.webhooks.sender import Sender, SendOutcome
from herald.webhooks.watermarks import Watermarks

log = logging.getLogger("herald.webhooks")

CLAIM_LIMIT = 100
LEASE_MARGIN_S = 30.0
HOLD = 6
"""Deliveries held per request slot of an endpoint: the one in flight and those queued behind it.
Enough for the lanes to go on while the next claim is answered: a claim shares its transaction
with the results being recorded, and under load that takes tens of milliseconds, in which a
healthy local endpoint takes a few requests per lane."""
SCHEDULE_EVERY_S = 1.0
JITTER = 0.1
GONE_CHECK_EVERY_S = 2.0
"""How often a worker looks for the claims of workers whose process was killed."""
GONE_AFTER_S = 6.0
"""How long a worker's process must have been gone before its claims are freed: a connection to
the store lost and made again within it is not a death (its requests may still be in flight)."""

GAP_RETRY_S = 30.0
"""How long after a gap could not be told it is tried again (a receiver that is down is not
called every few seconds)."""

PresentAgents = Callable[[], set[str]]
"""The agents whose live sessions herald can push to: their webhooks wait for the ack timeout."""


MAX_KNOWN_NAMES = 10_000
"""The entries of at most this many subscriptions are kept in memory (then forgotten at once)."""


class WebhookWorker:
    """Args:
    hub: the store and its publishes (which wake the worker).
    sender: what makes the HTTP calls (on the hub's clock: ``Sender(..., clock=hub.clock)``).
    schedule_s: delays before each try; its length is the number of tries.
    disable_after_s: an endpoint failing for this long is disabled; its events stay in the
        store for the drain.
    grace_s: how long an agent with a live session has to acknowledge a push before the
        webhook is used too (agents without one get the webhook at once).
    present: who has such a session in this process (``Notifier.pushable_agents``), known
        before the store's presence has it; the store's presence counts every process.
    per_endpoint: how many requests may be in flight to one endpoint.
    lease_s: how long a claim keeps other workers away; by default long enough for a claimed
        delivery to wait for the requests queued ahead of it and then make its own.
    subscription_schedule_s: the delays of an MCP Events webhook subscription's tries (its
        client asked for them: no hold-back, and a 410 or 413 ends only the one delivery).
    subscription_rate: deliveries per second to one subscription at most, in every process
        together (0: no limit); a second's worth may go at once (``herald.pace``).
    stop_grace_s: when the worker stops, how long the requests in flight may take to finish
        (no other is started meanwhile); those still unanswered are then cut off.
    """

    def __init__(
        self,
        hub: Hub,
        sender: Sender,
        *,
        schedule_s: Sequence[float] = DEFAULTS.webhooks.schedule_s,
        disable_after_s: float = DEFAULTS.webhooks.disable_after_s,
        grace_s: float = DEFAULTS.delivery.ack_timeout_s,
        present: PresentAgents | None = None,
        per_endpoint: int = DEFAULTS.webhooks.per_endpoint,
        poll_interval_s: float = DEFAULTS.webhooks.poll_interval_s,
        min_interval_s: float = DEFAULTS.webhooks.min_interval_s,
        lease_s: float | None = None,
        subscription_schedule_s: Sequence[float] = DEFAULTS.subscriptions.schedule_s,
        subscription_rate: float = DEFAULTS.subscriptions.rate,
        stop_grace_s: float = DEFAULTS.webhooks.stop_grace_s,
    ) -> None:
        self.hub = hub
        self.sender = sender
        self.schedule_s = tuple(schedule_s)
        self.subscription_schedule_s = tuple(subscription_schedule_s)
        self.pace_ms = pace_ms(subscription_rate)
        self.disable_after_ms = int(disable_after_s * 1000)
        self.grace_ms = int(grace_s * 1000)
        self.present: PresentAgents = present or set
        if per_endpoint < 1:
            raise InvalidInput(
                "the webhook concurrency (requests in flight to one endpoint) must be 1 or more"
            )
        self.per_endpoint = per_endpoint
        self.poll_interval_s = poll_interval_s
        self.min_interval_s = min_interval_s
        self.stop_grace_s = stop_grace_s
        self._stop_by: int | None = None
        """Once the worker stops (``stop_soon``): when the requests in flight are cut off, by the
        hub's clock (ms). A lane then finishes its request and starts no other."""
        # A claimed delivery may wait in its endpoint's queue for the requests ahead of it.
        self.lease_s = lease_s if lease_s is not None else HOLD * sender.timeout_s + LEASE_MARGIN_S
        if self.lease_s <= sender.timeout_s:
            raise InvalidInput("lease_s must be longer than the sender's timeout_s")
        self.claimant = new_id("wrk_")
        """Whom this worker's claims are held for."""
        # Claimed here and not yet sent, per endpoint: the requests in flight and those queued
        # behind them, at most ``HOLD * per_endpoint``. The queue lets a lane go on as soon as
        # its request is answered, without waiting for the store.
        self._held: Counter[str] = Counter()
        self._entry_names: dict[str, tuple[str, str]] = {}
        self._telling_gaps: asyncio.Task[None] | None = None
        self._gap_tried: dict[str, int] = {}
        """When a gap that could not be told is tried again, per subscription (hub's clock)."""
        self._asked_to_wait: dict[str, int] = {}
        """Until when each subscription whose receiver asked to wait (``Retry-After``) gets no
        claim of this worker (hub's clock): the store passes it over too once its batch is
        recorded, and this covers the moments before."""
        self._watermarks = Watermarks(hub.subscriptions.owed)
        self._queues: dict[str, deque[_Claimed]] = defaultdict(deque)
        self._lanes: Counter[str] = Counter()
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._published = True
        self._freed = False
        self._scheduled_at: int | None = None
        """When the last round scheduled, by the hub's clock."""
        self._claims_paused = False
        """Whether claims wait for this process's hold on them (``EndpointBook.holding``)."""
        self._results = _Batches(self._record, self._track)
        hub.add_listener(self._on_publish)
        hub.subscriptions.on_ended(self._on_ended)
        hub.subscriptions.on_deleted(self._on_deleted)
        hub.event_types.add_listener(self._on_catalogue)
        self._catalogue_changed = True
        """Subscriptions to a type deleted meanwhile are ended at the next round (and the
        first: a type may have been deleted while herald was down)."""

    def _on_publish(self, _agents: set[str]) -> None:
        self.wake()

    def _on_catalogue(self) -> None:
        self._catalogue_changed = True
        self.wake()

    def _on_ended(self, ended: list[tuple[Endpoint, WebhookSubscription]], why: str) -> None:
        for endpoint, subscription in ended:
            self._track(self._terminate(endpoint, _termination(why, subscription)))

    def _on_deleted(self, subscription_id: str) -> None:
        """Its deliveries went with it: those in hand are not sent (those in flight finish)."""
        self._watermarks.forget(subscription_id)
        queue = self._queues.get(subscription_id)
        if queue:
            self._held[subscription_id] -= len(queue)
            queue.clear()

    async def _terminate(self, endpoint: Endpoint, error: dict[str, Any]) -> None:
        """Tell a subscription's endpoint herald ended it (best effort: it no longer exists)."""
        payload = {"type": "terminated", "error": error}
        message_id = f"msg_terminated_{secrets.token_hex(12)}"
        shown = password_free(endpoint.url)
        try:
            outcome = await self.sender.send_signed(endpoint, message_id, payload, self.hub.now())
        except Exception:  # a background task's top level: log, nothing to retry
            log.exception("telling %s its subscription %s ended failed", shown, endpoint.id)
            return
        if not outcome.ok:
            log.info("%s was not told its subscription %s ended: %s", shown, endpoint.id,
                     outcome.error)  # fmt: skip

    async def end_removed_entries(self) -> int:
        """End the subscriptions to event types no longer declared (SEP-3415: NotFound, kind
        event), telling their endpoints. Returns how many this process ended."""
        self._catalogue_changed = False
        declared = {t.name for t in await self.hub.event_types.list()} | {catalogue.HERALD_EVENT}
        gone: dict[str, list[tuple[Endpoint, WebhookSubscription]]] = defaultdict(list)
        for endpoint, subscription in await self.hub.subscriptions.every():
            if subscription.name not in declared:
                gone[subscription.name].append((endpoint, subscription))
        ended = 0
        for name, found in gone.items():
            if await self.hub.event_types.declared_now(name):
                continue  # this process has not heard of it yet
            ended += len(await self.hub.subscriptions.end(found, TYPE_DELETED))
        return ended

    def wake(self) -> None:
        """Schedule and claim now (a subscription was made: its waiting events are due)."""
        self._published = True
        self._wake.set()

    async def run(self) -> None:
        """Work until cancelled; a failing round is logged and tried again. Endpoints disabled
        for their address come back first if the policy now allows them."""
        self._track(self._reenable_logged())
        checked_gone_at = time.monotonic()
        try:
            await self._hold_claims()
            while self._stop_by is None:
                if (
                    time.monotonic() - checked_gone_at >= GONE_CHECK_EVERY_S
                    and await self._may_be_owed()
                ):
                    checked_gone_at = time.monotonic()
                    try:
                        await self.free_claims_of_the_gone()
                    except Exception:  # the loop's top level: log, look again next time
                        log.exception("looking for webhook claims of gone processes failed")
                    if self._telling_gaps is None or self._telling_gaps.done():
                        # In the background: an endpoint that hangs holds up no round.
                        self._telling_gaps = self._track(self._tell_gaps_logged())
                try:
                    await self._round(self._schedule_due())
                except Exception:  # the loop's top level: log, keep going
                    log.exception("webhook round failed")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_interval_s):
                        await self._wake.wait()
                if not self._freed:
                    # Woken by publishes, which come in bursts: one round a little later serves
                    # them all, and leaves the store to the publishers meanwhile.
                    await asyncio.sleep(self.min_interval_s)
                self._wake.clear()
                self._freed = False
            # Stopping (``stop_soon``): nothing more is claimed. The requests in flight go on
            # until the worker is cancelled, which then waits for what is left of the grace.
            await asyncio.Event().wait()
        finally:
            with contextlib.suppress(asyncio.CancelledError):  # told again: cut off at once
                await self._finish_in_flight()
            # What is still in flight is dropped; results already in hand are written first.
            for task in self._tasks:
                if task is not self._results.writer:
                    task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._let_go_of_claims()
            await self.sender.close()

    def stop_soon(self) -> None:
        """herald begins to stop: start no new request, and give those in flight
        ``stop_grace_s`` from now to be answered, so that a restart or a deploy does not send
        them all again. The grace runs while the HTTP server waits for its own open requests,
        not after; the worker ends when cancelled, waiting for what is left of it. What is
        queued behind them is not started: it is freed for the next claim with what is still
        unanswered then."""
        if self._stop_by is not None:
            return
        self._stop_by = self.hub.now() + int(self.stop_grace_s * 1000)
        self._wake.set()
        if self._in_flight() and self.stop_grace_s > 0:
            log.info("stopping: the webhook requests in flight have %g s to be answered",
                     self.stop_grace_s)  # fmt: skip

    def _in_flight(self) -> list[asyncio.Task[None]]:
        return [task for task in self._tasks if task is not self._results.writer]

    async def _finish_in_flight(self) -> None:
        """Cancelled: wait for the requests in flight until the grace that ``stop_soon`` gave
        them is over (it is called now if it was not)."""
        self.stop_soon()
        assert self._stop_by is not None
        in_flight = self._in_flight()
        left_s = (self._stop_by - self.hub.now()) / 1000
        if in_flight and left_s > 0:
            await asyncio.wait(in_flight, timeout=left_s)

    async def _hold_claims(self) -> None:
        """Tie this worker's claims to its process's life in the store, so that other processes
        free them if it is killed (PostgreSQL; without it they run out, ``lease_s``)."""
        try:
            await self.hub.endpoints.hold_claims_for(self.claimant)
        except Exception:  # its claims run out instead
            log.exception("tying this worker's webhook claims to its process failed")

    async def free_claims_of_the_gone(self) -> int:
        """Free the claims of workers whose process has been gone ``GONE_AFTER_S`` (killed:
        nothing of it lived to free them), for this worker to take at once; returns how many."""
        freed = await self.hub.endpoints.free_claims_of_the_gone(int(GONE_AFTER_S * 1000))
        if freed:
            log.warning("%s claimed by a herald process that is gone: sent again",
                        webhook_deliveries(freed))  # fmt: skip
        return freed

    async def _let_go_of_claims(self) -> None:
        """What this worker claimed and did not finish (dropped in flight, or still queued) is
        freed for the next claim, here or in another process, instead of waiting for its claim
        to run out (``lease_s``: 120 s by default). A request dropped in flight may have reached
        its endpoint: it is sent again with the same ``webhook-id``, as after any timeout."""
        try:
            freed = await self.hub.endpoints.release_claims(self.claimant)
            await self.hub.endpoints.let_go_of_claimant(self.claimant)
        except Exception:  # stopping: the claims run out instead
            log.exception("freeing the webhook deliveries this worker held failed")
            return
        if freed:
            log.info("stopping: %s in flight or queued: freed for the next claim",
                     webhook_deliveries(freed))  # fmt: skip

    async def reenable_allowed(self) -> list[Endpoint]:
        """Re-enable the endpoints disabled because their address was refused, if the policy
        allows it now (``herald serve`` restarted with a wider ``--webhook-allow``); their
        secrets and waiting deliveries are kept. A host that does not resolve now is
        re-enabled too: its deliveries check it again. Returns the endpoints re-enabled."""
        enabled = []
        for endpoint in await self.hub.endpoints.refused():
            try:
                await self.sender.guard.addresses(endpoint.url)
            except AddressRefused:
                continue
            except Unresolvable:
                pass  # its deliveries check it again
            if await self.hub.endpoints.enable(endpoint.id, endpoint.disabled_reason or ""):
                log.info(
                    "%s %s of agent %s (%s) re-enabled: --webhook-allow allows its address now",
                    endpoint.kind.value,
                    endpoint.id,
                    endpoint.agent_id,
                    password_free(endpoint.url),
                )
                enabled.append(endpoint)
        return enabled

    async def _reenable_logged(self) -> None:
        try:
            if await self.reenable_allowed():
                self._published = True
                self._wake.set()
        except Exception:  # a background task's top level: log; the next start tries again
            log.exception("re-enabling endpoints allowed now failed")

    def _schedule_due(self) -> bool:
        """Publishes ask for scheduling; otherwise it runs now and then by the clock, for agents
        whose sessions went away or did not acknowledge in time."""
        if self._published or self._scheduled_at is None:
            return True
        since_ms = self.hub.now() - self._scheduled_at
        every_ms = max(self.poll_interval_s, SCHEDULE_EVERY_S) * 1000
        # A clock set back counts as due: waiting for it to catch up could take hours.
        return not 0 <= since_ms < every_ms

    async def run_once(self) -> int:
        """Schedule, claim and start the due deliveries; returns how many were claimed."""
        return await self._round(schedule=True)

    async def wait_idle(self) -> None:
        """Wait for the attempts started so far, sent and recorded (for tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _may_be_owed(self) -> bool:
        """Whether any delivery may be owed: not while no endpoint exists (``hub.endpoints.any``,
        mostly known without the store). Then a round leaves the store alone: under a publish
        load it would be a few transactions several times a second on the store's writer, each
        holding up the publishes queued behind it. What it would have done waits for an
        endpoint: events stay open, and are scheduled at the first round after one is made."""
        try:
            return await self.hub.endpoints.any()
        except Exception:  # the store is away: the round finds it so, and says so
            return True

    async def _round(self, schedule: bool) -> int:
        if not await self._may_be_owed():
            return 0  # what asked for this round (a publish, say) still does, for later
        if self._catalogue_changed:
            await self.end_removed_entries()
        claimed = 0
        if schedule:
            if self._held:
                # Deliveries are under way: their lanes are refilled first, so that they do not
                # run dry while a schedule of many events is written.
                claimed += await self._claim()
            await self._schedule()
        return claimed + await self._claim()

    async def _claim(self) -> int:
        """Claim due deliveries, up to what each endpoint may hold, and start their lanes;
        returns how many were claimed."""
        holding = await self._holding()
        if holding is None:
            # Claims this process may not keep (its connection to the store is lost): none.
            if not self._claims_paused:
                self._claims_paused = True
                log.warning("webhook deliveries wait: the connection that ties this process's"
                            " claims to it is lost (it is made again every second)")  # fmt: skip
            return 0
        if self._claims_paused:
            self._claims_paused = False
            log.warning("webhook deliveries go on: the connection is back")
        lease_ms = int(self.lease_s * 1000)
        # Read before claiming: the store's lease starts no earlier, so this one ends no later.
        claimed_until = self.hub.now() + lease_ms
        claimed = await self.hub.endpoints.claim(
            self.claimant,
            CLAIM_LIMIT,
            lease_ms,
            per_endpoint=HOLD * self.per_endpoint,
            in_flight=self._busy(),
            pace_ms=self.pace_ms,
        )
        # Read after claiming: the store's lease ran from no later, and a claim made in a later
        # round runs out after it.
        latest_until = self.hub.now() + lease_ms
        for delivery, endpoint, event, agent in claimed:
            self._held[endpoint.id] += 1
            self._queues[endpoint.id].append(
                _Claimed(delivery, endpoint, event, agent, claimed_until, latest_until, holding)
            )
        for endpoint_id in {endpoint.id for _, endpoint, _, _ in claimed}:
            # At most ``per_endpoint`` lanes to one endpoint, each sending one request at a
            # time: a slow endpoint holds up only its own lanes.
            while self._lanes[endpoint_id] < min(self.per_endpoint, len(self._queues[endpoint_id])):
                self._lanes[endpoint_id] += 1
                self._track(self._lane(endpoint_id))
        return len(claimed)

    def _busy(self) -> Mapping[str, int]:
        """The deliveries held per endpoint (in flight or queued); a subscription whose receiver
        asked to wait counts as full until then."""
        if not self._asked_to_wait:
            return self._held
        now = self.hub.now()
        for subscription_id, until in list(self._asked_to_wait.items()):
            if until <= now:
                del self._asked_to_wait[subscription_id]
        return {**self._held, **dict.fromkeys(self._asked_to_wait, HOLD * self.per_endpoint)}

    async def _schedule(self) -> None:
        """Give open events their deliveries. The events of an agent with a live session that
        can be pushed to, in any process (the store's presence), or here (``present``), are held
        back until they have gone ``grace_s`` unacknowledged: its session may still confirm
        them."""
        self._published = False
        self._scheduled_at = now = self.hub.now()
        present = sorted(self.present())
        limit = CLAIM_LIMIT * 10
        endpoints = self.hub.endpoints
        scheduled = await endpoints.schedule(
            now, limit, not_agents=present, push_grace_ms=self.grace_ms
        )
        if present:
            scheduled += await endpoints.schedule(now - self.grace_ms, limit, agents=present)
        scheduled += await self.hub.subscriptions.schedule(limit)
        if scheduled >= limit:
            self._published = True  # more to schedule: next round again

    def _track(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _lane(self, endpoint_id: str) -> None:
        """Send the endpoint's claimed deliveries one after another, until none is left."""
        queue = self._queues[endpoint_id]
        try:
            while queue and self._stop_by is None:
                claimed = queue.popleft()
                try:
                    # Sent only while the claim is surely this worker's: it outlasts the request
                    # (once it runs out, another worker may send it), and this process has held
                    # it without a break (else another may have taken it for dead and freed
                    # it: then it is freed, if still this worker's, for the next claim).
                    # Otherwise it is left to whoever claims it next.
                    if self.hub.endpoints.holding(self.claimant) != claimed.holding:
                        await self._let_go_of(claimed)
                    elif claimed.until - self.hub.now() > self.sender.timeout_s * 1000:
                        outcome = await self._deliver(claimed)
                        if outcome is not None and outcome.disable:
                            # The endpoint refuses for good: what is queued for it stays in
                            # the store, for the drain.
                            self._held[endpoint_id] -= len(queue)
                            queue.clear()
                finally:
                    self._held[endpoint_id] -= 1
                    if self._held[endpoint_id] <= HOLD * self.per_endpoint // 2:
                        # Half of what it may hold is left: time to claim for it again. The
                        # rest keeps its lanes going meanwhile, and a claim fills half of it.
                        self._freed = True
                        self._wake.set()
        finally:
            self._lanes[endpoint_id] -= 1
            if self._lanes[endpoint_id] <= 0:
                self._lanes.pop(endpoint_id, None)
                if not queue:
                    self._queues.pop(endpoint_id, None)
            if self._held[endpoint_id] <= 0:
                self._held.pop(endpoint_id, None)

    async def _holding(self) -> int | None:
        """``EndpointBook.holding`` for this worker, after making it known again if its
        connection was made again; None if its claims cannot be held now."""
        holding = self.hub.endpoints.holding(self.claimant)
        if holding is not None:
            return holding
        try:
            await self.hub.endpoints.hold_claims_for(self.claimant)
        except Exception:  # the store is away too: claims wait, and it is tried again
            log.debug("making this worker's claims known again failed", exc_info=True)
            return None
        return self.hub.endpoints.holding(self.claimant)

    async def _let_go_of(self, claimed: _Claimed) -> None:
        """Free one claim this worker may no longer send on, if it is still that claim: one of
        the same delivery made since (it was freed and claimed again) is left alone."""
        one = OneClaim(claimed.endpoint.id, claimed.event.id, claimed.latest_until)
        try:
            await self.hub.endpoints.release_claims(self.claimant, one)
        except Exception:  # its claim runs out instead
            log.exception("freeing the claim of %s to %s failed", claimed.event.id,
                          password_free(claimed.endpoint.url))  # fmt: skip

    async def _deliver(self, claimed: _Claimed) -> SendOutcome | None:
        delivery, endpoint, event = claimed.delivery, claimed.endpoint, claimed.event
        try:
            if endpoint.kind is Kind.SUBSCRIPTION:
                outcome = await self._send_occurrence(claimed)
                if outcome is None:
                    return None  # unsubscribed meanwhile: its deliveries went with it
            else:
                outcome = await self.sender.send(endpoint, claimed.agent, event, self.hub.now())
            finished = self._finished(delivery, endpoint, outcome)
            self._count(endpoint, event, outcome, finished.attempt)
            if log.isEnabledFor(logging.INFO):
                _log_finished(finished, endpoint)
            # Recorded in the background, in batches: the lane goes on to the next request.
            written = self._results.add(finished)
            if finished.held_until is not None:
                self._wait_out(endpoint.id, finished.held_until, written)
            if endpoint.kind is Kind.SUBSCRIPTION and finished.next_at is None:
                self._watermarks.done(endpoint, event.id)
                if not outcome.ok:
                    await self._send_gap(claimed)
            return outcome
        except Exception:  # keep the lane alive; the claim runs out and it is tried again
            log.exception("delivering %s to %s failed", event.id, password_free(endpoint.url))
            return None

    def _wait_out(self, subscription_id: str, until: int, written: asyncio.Event) -> None:
        """The receiver asked to wait (``Retry-After``): SEP-3415 means the whole subscription,
        not only the delivery it answered. What is queued for it is not sent: it goes back to
        the store once the wait is recorded there (``written``), so that no claim, here or in
        another process, takes it before then."""
        if len(self._asked_to_wait) >= MAX_KNOWN_NAMES:
            self._asked_to_wait.clear()
        self._asked_to_wait[subscription_id] = max(
            until, self._asked_to_wait.get(subscription_id, 0)
        )
        queue = self._queues.get(subscription_id)
        if queue:
            queued = list(queue)
            self._held[subscription_id] -= len(queue)
            queue.clear()
            self._track(self._give_back(queued, written))

    async def _give_back(self, queued: list[_Claimed], written: asyncio.Event) -> None:
        await written.wait()
        for claimed in queued:
            await self._let_go_of(claimed)

    async def _record(self, batch: list[Finished]) -> None:
        """Record a batch of results; a subscription it suspended is said, loudly (by its id:
        its URL may carry a token; ``herald_webhook_endpoints`` counts it as disabled)."""
        for subscription_id, reason in await self.hub.endpoints.finish(batch):
            # Its reason begins "suspended: ...".
            log.warning("subscription %s %s", subscription_id, reason,
                        extra={"subscription": subscription_id, "state": "suspended",
                               "why": reason})  # fmt: skip

    async def _send_occurrence(self, claimed: _Claimed) -> SendOutcome | None:
        """Send an event to a subscription: the occurrence of its entry, with the cursor that
        is safe to keep once it is received. None: the subscription is gone."""
        endpoint, event = claimed.endpoint, claimed.event
        if endpoint.expires_at is not None and endpoint.expires_at <= self.hub.now():
            return None  # expired: it is reclaimed with its deliveries
        known = self._entry_names.get(endpoint.id)
        if known is None:
            found = await self.hub.subscriptions.get(endpoint.id)
            if found is None:
                return None
            if len(self._entry_names) >= MAX_KNOWN_NAMES:
                self._entry_names.clear()
            # A subscription's entry is part of its identity, and its kind of webhook-id is kept
            # by every refresh: neither changes under its id.
            known = self._entry_names[endpoint.id] = (found[1].name, found[1].webhook_id)
        name, webhook_id = known
        cursor = await self._watermarks.cursor(endpoint, event.id, self._held[endpoint.id])
        if cursor is None:
            self._entry_names.pop(endpoint.id, None)
            return None
        payload = catalogue.occurrence(event, name)
        payload["cursor"] = cursors.encode(claimed.agent, await self.hub.history(), cursor)
        message_id = delivery_webhook_id(webhook_id, endpoint.id, event.id)
        return await self.sender.send_signed(endpoint, message_id, payload, self.hub.now())

    async def _send_gap(self, claimed: _Claimed) -> None:
        """Tell a subscription's endpoint that herald gave up on one of its events, with a cursor
        past it (SEP-3415's ``gap`` envelope), before anything after it is sent. The event stays
        in the agent's inbox for its other ways. Best effort: the attempt given up on is
        recorded either way."""
        endpoint = claimed.endpoint
        cursor = await self._watermarks.cursor(endpoint, claimed.event.id, self._held[endpoint.id])
        if cursor is None:
            return  # the subscription is gone
        history = await self.hub.history()
        payload = {"type": "gap", "cursor": cursors.encode(claimed.agent, history, cursor)}
        message_id = f"msg_gap_{secrets.token_hex(12)}"
        outcome = await self.sender.send_signed(endpoint, message_id, payload, self.hub.now())
        if not outcome.ok:
            # By id: a callback URL, an agent's, may carry a token in its path.
            log.info("subscription %s was not told of a gap: %s; told later",
                     endpoint.id, outcome.error)  # fmt: skip
            await self.hub.subscriptions.owe_gap(endpoint.id)

    async def _tell_gaps_logged(self) -> None:
        try:
            await self.tell_gaps()
        except Exception:  # a background task's top level: log, tell them next time
            log.exception("telling webhook subscriptions of their gaps failed")

    async def tell_gaps(self) -> int:
        """Tell each live, active subscription owed a ``gap`` (events it was owed expired or
        were pruned before they were delivered, or a gap could not be told when it arose), with
        the cursor past them; one that is not told now stays owed, for the next time. Returns
        how many were told. (Across processes two may tell the same gap: a client takes it
        again as the same cursor.)"""
        told = 0
        history: str | None = None
        now = self.hub.now()
        for endpoint, subscription in await self.hub.subscriptions.gaps():
            if subscription.gap_at is None or self._gap_tried.get(endpoint.id, now) > now:
                continue
            cursor = await self.hub.subscriptions.cursor(endpoint.id)
            if cursor is None:
                continue  # gone meanwhile
            agent = await self.hub.get_agent(endpoint.agent_id)
            history = history or await self.hub.history()
            payload = {"type": "gap", "cursor": cursors.encode(agent, history, cursor)}
            message_id = f"msg_gap_{secrets.token_hex(12)}"
            outcome = await self.sender.send_signed(endpoint, message_id, payload, self.hub.now())
            if outcome.ok:
                await self.hub.subscriptions.gap_told(endpoint.id, subscription.gap_at)
                self._gap_tried.pop(endpoint.id, None)
                told += 1
            else:
                if len(self._gap_tried) >= MAX_KNOWN_NAMES:
                    self._gap_tried.clear()
                self._gap_tried[endpoint.id] = self.hub.now() + int(GAP_RETRY_S * 1000)
                log.info("subscription %s was not told of a gap: %s; told later",
                         endpoint.id, outcome.error)  # fmt: skip
        return told

    def _count(
        self, endpoint: Endpoint, event: Event, outcome: SendOutcome, attempt: Attempt
    ) -> None:
        metrics, way = self.hub.metrics, endpoint.kind.value
        metrics.webhook_attempt(way, outcome.status, refused=outcome.refused)
        metrics.delivered(way, attempt.outcome)
        if outcome.ok:
            metrics.sent(way, [event.created_at], attempt.at)
            if attempt.outcome == "delivered":  # an OpenClaw wake is only sent
                metrics.acknowledged(way, [event.created_at], attempt.at)

    def _finished(self, delivery: Delivery, endpoint: Endpoint, outcome: SendOutcome) -> Finished:
        now = self.hub.now()
        mechanism = endpoint.kind.value
        subscription = endpoint.kind is Kind.SUBSCRIPTION
        if outcome.ok:
            status = "sent" if endpoint.kind is Kind.OPENCLAW else "delivered"
            attempt = Attempt(delivery.event_id, now, mechanism, status, endpoint.id)
            return Finished(
                delivery, attempt, None, status, endpoint_ok=True, subscription=subscription
            )
        if outcome.refused:
            # Nothing was sent: the delivery waits for its endpoint to be allowed again.
            attempt = Attempt(
                delivery.event_id, now, mechanism, "failed", endpoint.id, outcome.error
            )
            return Finished(
                delivery,
                attempt,
                now,
                None,
                False,
                disable_reason=outcome.error,
                subscription=subscription,
            )
        tries = delivery.attempts + 1
        schedule = (
            self.subscription_schedule_s if endpoint.kind is Kind.SUBSCRIPTION else self.schedule_s
        )
        next_at = (
            None
            if outcome.disable or outcome.final or tries >= len(schedule)
            else self._next(now, schedule[tries], outcome)
        )
        outcome_name = "failed" if next_at is not None else "undeliverable"
        attempt = Attempt(
            delivery.event_id, now, mechanism, outcome_name, endpoint.id, outcome.error
        )
        return Finished(
            delivery,
            attempt,
            next_at,
            None,
            endpoint_ok=False,
            disable_reason=outcome.error if outcome.disable else None,
            disable_failing_since=now - self.disable_after_ms,
            subscription=subscription,
            held_until=(
                now + int(outcome.retry_after_s * 1000)
                if subscription and next_at is not None and outcome.retry_after_s is not None
                else None
            ),
        )

    def _next(self, now: int, delay_s: float, outcome: SendOutcome) -> int:
        delay = delay_s * random.uniform(1 - JITTER, 1 + JITTER)
        if outcome.retry_after_s is not None:
            delay = max(delay, outcome.retry_after_s)
        return now + int(delay * 1000)


def _log_finished(finished: Finished, endpoint: Endpoint) -> None:
    """The attempt's outcome, and the endpoint's change of state if it made one (as this
    process saw the endpoint when it claimed the delivery)."""
    attempt, way = finished.attempt, endpoint.kind.value
    log_attempt(log, attempt.event_id, way, endpoint.id, attempt.outcome, finished.next_at,
                attempt.error)  # fmt: skip
    failing_too_long = (
        finished.disable_failing_since is not None
        and endpoint.failing_since is not None
        and endpoint.failing_since <= finished.disable_failing_since
    )
    if finished.disable_reason is not None or (not finished.endpoint_ok and failing_too_long):
        why = finished.disable_reason or f"kept failing for too long; last error: {attempt.error}"
        log_endpoint_state(log, endpoint.id, way, "disabled", why)
    elif finished.endpoint_ok and endpoint.failing_since is not None:
        log_endpoint_state(log, endpoint.id, way, "recovered", "an attempt succeeded")
    elif not finished.endpoint_ok and endpoint.failing_since is None:
        log_endpoint_state(log, endpoint.id, way, "failing", attempt.error or "an attempt failed")


def _termination(why: str, subscription: WebhookSubscription) -> dict[str, Any]:
    """Why herald ended a subscription, as SEP-3415's ``terminated`` envelope says it: its
    event type is gone (NotFound: the client may rediscover), or its agent (Forbidden: stop)."""
    if why == AGENT_DELETED:
        reason = "the agent was deleted from herald"
        return {"code": FORBIDDEN, "message": "Forbidden", "data": {"reason": reason}}
    reason = f"the event type {subscription.name!r} was deleted"
    return {"code": NOT_FOUND, "message": "NotFound", "data": {"kind": "event", "reason": reason}}


@dataclass(frozen=True)
class _Claimed:
    delivery: Delivery
    endpoint: Endpoint
    event: Event
    agent: Agent
    until: int
    """When the claim runs out, by the hub's clock (milliseconds): at the earliest."""
    latest_until: int
    """The latest it runs out: a claim of the same delivery made later runs out after it."""
    holding: int
    """``EndpointBook.holding`` when it was claimed: sent only while it is the same."""


class _Batches:
    """Writes results in batches: one write at a time, each taking every result that arrived
    while the one before it ran. A failed write is logged; its deliveries' claims run out and
    they are tried again."""

    def __init__(
        self,
        write: Callable[[list[Finished]], Awaitable[None]],
        start: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]],
    ) -> None:
        self._write = write
        self._start = start
        self._waiting: list[Finished] = []
        self._written = asyncio.Event()
        """Set once the batch being gathered (``_waiting``) is written."""
        self.writer: asyncio.Task[None] | None = None

    def add(self, result: Finished) -> asyncio.Event:
        """Take a result to write; the answer is set once its batch is written (or failed)."""
        self._waiting.append(result)
        if self.writer is None:
            self.writer = self._start(self._write_all())
        return self._written

    async def _write_all(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                written, self._written = self._written, asyncio.Event()
                try:
                    await self._write(batch)
                except Exception:  # the writer's top level: log, go on with the next batch
                    log.exception("recording %d webhook attempts failed", len(batch))
                finally:
                    written.set()
        finally:
            self.writer = None
