"""MCP Events webhook subscriptions through ``herald serve`` (its ``serve()``, in process, its
clock moved by the test) on both backends, to real receivers on loopback: gaps told, never
silent; ``deliveryStatus`` in full on a refresh; a receiver's ``Retry-After`` and the
per-subscription rate holding deliveries back, none lost; suspension over a rolling hour, said
in the log and the metrics, and a refresh that reactivates. Every wait is bounded; time that
must pass is the clock's."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import queue
import re
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from functools import partial
from logging.handlers import QueueHandler
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from herald.addresses import AddressPolicy
from herald.config import (
    HttpConfig,
    HubConfig,
    ServeConfig,
    SubscriptionConfig,
    WebhookConfig,
)
from herald.store.rules import SUSPEND_MIN_ATTEMPTS
from herald.testing import ManualClock
from tests.herald_process import ADMIN_KEY
from tests.http.test_mcp_events import MODERN, answer, meta
from tests.in_process import serving_here
from tests.waiting import until
from tests.webhooks.receiver import Received, Receiver

pytestmark = pytest.mark.anyio

SECRET = "whsec_" + base64.b64encode(b"g" * 32).decode()
WAIT_S = 30.0
RETENTION_S = 600.0


@dataclass
class Served:
    url: str
    clock: ManualClock
    admin: httpx.AsyncClient

    async def agent(self) -> tuple[dict[str, Any], httpx.AsyncClient]:
        made = await self.admin.post("/v1/agents", json={"handle": f"a{time.monotonic_ns()}"})
        assert made.status_code == 201, made.text
        agent = made.json()
        headers = {
            "authorization": f"Bearer {agent['api_key']}",
            "accept": "application/json, text/event-stream",
        }
        return agent, httpx.AsyncClient(base_url=self.url, headers=headers, timeout=WAIT_S)

    async def publish(self, handle: str, count: int = 1, **fields: Any) -> list[str]:
        batch = [{"to": handle, "type": "t", "text": f"e{n}", **fields} for n in range(count)]
        published = await self.admin.post("/v1/events", json=batch)
        assert published.status_code == 202, published.text
        return [e["id"] for e in published.json()["events"]]

    async def given_up(self, event_id: str) -> bool:
        """Whether its subscription's delivery was given up on (an attempt says so)."""
        shown = (await self.admin.get(f"/v1/events/{event_id}")).json()
        return any(a["outcome"] == "undeliverable" for a in shown["attempts"])

    async def status(self, event_id: str) -> str:
        return str((await self.admin.get(f"/v1/events/{event_id}")).json()["status"])

    async def delivered(self, event_id: str) -> int:
        """How many of its deliveries were delivered (an attempt says so)."""
        shown = (await self.admin.get(f"/v1/events/{event_id}")).json()
        return sum(a["outcome"] == "delivered" for a in shown["attempts"])

    async def subscriptions_shown(self, state: str, count: int) -> bool:
        """Whether ``/metrics`` counts ``count`` subscriptions in that state (its store gauges
        are read at most once a second)."""
        text = (await self.admin.get("/metrics")).text
        wanted = f'herald_webhook_endpoints{{kind="subscription",state="{state}"}} '
        (line,) = [line for line in text.splitlines() if line.startswith(wanted)]
        return float(line.removeprefix(wanted)) == count


def config_of(store_url: str, **subscriptions: Any) -> ServeConfig:
    """``herald serve`` on ``store_url`` with loopback webhooks allowed, maintenance every 50 ms
    (what it does is decided by the clock) and the subscription settings given."""
    return ServeConfig(
        store_url=store_url,
        log_level="warning",
        http=HttpConfig(port=0),
        hub=HubConfig(maintenance_interval_s=0.05, retention_s=RETENTION_S),
        webhooks=WebhookConfig(allow=AddressPolicy(allow_loopback=True), poll_interval_s=0.1),
        subscriptions=SubscriptionConfig(**subscriptions),
    )


def real_time_clock() -> ManualClock:
    """Real time as the start: receivers check signature timestamps against their own clock."""
    return ManualClock(start=time.time())


@contextlib.asynccontextmanager
async def serving(store_url: str, **subscriptions: Any) -> AsyncIterator[Served]:
    """``serve()`` of ``config_of(store_url, **subscriptions)``, for one test."""
    clock = real_time_clock()
    async with (
        serving_here(config_of(store_url, **subscriptions), clock) as url,
        admin_of(url) as admin,
    ):
        yield Served(url, clock, admin)


def admin_of(url: str) -> httpx.AsyncClient:
    headers = {"authorization": f"Bearer {ADMIN_KEY}"}
    return httpx.AsyncClient(base_url=url, headers=headers, timeout=WAIT_S)


async def call(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One 2026-07-28 request; its result (an error fails the test)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": meta(), **params}}
    headers = {"mcp-protocol-version": MODERN, "mcp-method": method}
    answered = answer(await http.post("/mcp", json=body, headers=headers))
    assert "result" in answered, answered
    return dict(answered["result"])


def subscription(url: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": "herald.event",
        "arguments": {},
        "delivery": {"mode": "webhook", "url": url, "secret": SECRET},
        **fields,
    }


async def next_arrival(receiver: Receiver, wanted: str | None = None) -> Received:
    """The next request the receiver gets (of that ``type``, if given; None: an event)."""
    while True:
        got = await asyncio.to_thread(receiver.arrived.get, timeout=WAIT_S)
        if got.json.get("type") == wanted:
            return got


def cursor_seq(cursor: str) -> int:
    return int(cursor.rpartition("~")[2])


@pytest.fixture
def receiver() -> AsyncIterator[Receiver]:
    running = Receiver(answers_challenges=True)
    yield running  # type: ignore[misc]
    running.close()


@pytest.fixture
def webhook_log() -> Iterator[queue.Queue[logging.LogRecord]]:
    """What the webhook worker and subscriptions log at INFO and above."""
    records: queue.Queue[logging.LogRecord] = queue.Queue()
    handler = QueueHandler(records)
    logger = logging.getLogger("herald.webhooks")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield records
    finally:
        logger.setLevel(level)
        logger.removeHandler(handler)


def logged(records: queue.Queue[logging.LogRecord], kept: list[str]) -> list[str]:
    """The lines logged so far (``kept``, with those that came since)."""
    while not records.empty():
        kept.append(records.get_nowait().getMessage())
    return kept


def sent_at(received: Received) -> int:
    """When herald signed it, by its clock (seconds)."""
    return int(received.headers["webhook-timestamp"])


async def test_a_gap_given_up_while_the_receiver_was_down_is_told_signed_once_it_is_back(
    own_store_url: str, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="herald")
    async with serving(own_store_url, schedule_s=(0,)) as served:
        agent, http = await served.agent()
        async with http:
            receiver.script.append((200, {"connection": "close"}))  # none kept alive
            url = receiver.url + "/hooks/tok_in_the_path"  # a callback's path may hold a token
            await call(http, "events/subscribe", subscription(url))
            port = receiver.port
            receiver.close()  # down: connections are refused
            (lost,) = await served.publish(agent["handle"])
            await until(lambda: served.given_up(lost), "the one try to be spent")
            back = Receiver(answers_challenges=True, bind_port=port)
            try:
                # A gap that could not be told is tried again a while later, by the clock.
                served.clock.advance(60)
                gap = await next_arrival(back, "gap")
                body = Webhook(SECRET).verify(gap.body, gap.headers)
                assert gap.headers["webhook-id"].startswith("msg_gap_")
                assert cursor_seq(body["cursor"]) == 1  # past the event given up on
                later = await served.publish(agent["handle"])
                delivered = await next_arrival(back)
                assert delivered.json["eventId"] == later[0]
                assert [r for r in back.requests if r.json.get("type") == "gap"] == [gap]
            finally:
                back.close()
    untold = [r.getMessage() for r in caplog.records if "was not told of a gap" in r.getMessage()]
    assert untold and all("tok_in_the_path" not in line for line in untold), untold


async def test_every_control_envelope_carries_a_webhook_id_of_its_type_and_a_random_part(
    own_store_url: str, receiver: Receiver
) -> None:
    async with serving(own_store_url) as served:
        agent, http = await served.agent()
        async with http:
            await call(http, "events/subscribe", subscription(receiver.url))
        challenge = await next_arrival(receiver, "verification")
        deleted = await served.admin.delete(f"/v1/agents/{agent['id']}")
        assert deleted.status_code == 204, deleted.text
        terminated = await next_arrival(receiver, "terminated")
    ids = []
    for envelope in (challenge, terminated):
        Webhook(SECRET).verify(envelope.body, envelope.headers)
        kind = envelope.json["type"]
        ids.append(envelope.headers["webhook-id"])
        assert re.fullmatch(f"msg_{kind}_[0-9a-f]{{24}}", ids[-1]), ids[-1]
    assert terminated.json["error"]["code"] == -32024


async def test_a_poll_whose_cursor_passes_expired_and_pruned_events_says_truncated(
    own_store_url: str,
) -> None:
    async with serving(own_store_url) as served:
        agent, http = await served.agent()
        async with http:
            start = await call(http, "events/poll", {"name": "herald.event", "cursor": None})
            (gone,) = await served.publish(agent["handle"], ttl_s=60)
            served.clock.advance(61)
            await until(lambda: _is(served.status(gone), "expired"), "maintenance to expire it")
            served.clock.advance(RETENTION_S + 1)
            await until(lambda: _is_gone(served, gone), "maintenance to prune it")
            kept = await served.publish(agent["handle"])
            page = await call(
                http, "events/poll", {"name": "herald.event", "cursor": start["cursor"]}
            )
            assert [e["eventId"] for e in page["events"]] == kept
            assert page["truncated"] is True
            after = await call(
                http, "events/poll", {"name": "herald.event", "cursor": page["cursor"]}
            )
            assert after["truncated"] is False


async def test_a_refresh_reports_a_receiver_that_asked_to_wait_as_throttled(
    own_store_url: str, receiver: Receiver
) -> None:
    async with serving(own_store_url) as served:
        agent, http = await served.agent()
        async with http:
            await call(http, "events/subscribe", subscription(receiver.url))
            receiver.script.append((429, {"retry-after": "120", "x-secret": "never shown"}))
            (held,) = await served.publish(agent["handle"])
            await next_arrival(receiver)

            async def status() -> dict[str, Any]:
                refreshed = await call(http, "events/subscribe", subscription(receiver.url))
                return dict(refreshed["deliveryStatus"])

            shown = await until(status_once_recorded(status), "the 429 to be recorded")
            assert shown["throttled"] is True and shown["retryAfterMs"] == 120_000
            assert shown["active"] is True and shown["lastError"] == "http_4xx"
            assert "never shown" not in str(shown)
            served.clock.advance(121)
            assert (await next_arrival(receiver)).json["eventId"] == held
            assert (await status())["throttled"] is False


async def test_a_receivers_retry_after_holds_the_whole_subscription_until_then(
    own_store_url: str, receiver: Receiver
) -> None:
    other = Receiver(answers_challenges=True)
    try:
        async with serving(own_store_url) as served:
            agent, http = await served.agent()
            async with http:
                await call(http, "events/subscribe", subscription(receiver.url))
                await call(http, "events/subscribe", subscription(other.url))
                receiver.script.append((429, {"retry-after": "120"}))
                (asked,) = await served.publish(agent["handle"])
                asked_at = sent_at(await next_arrival(receiver))
                await next_arrival(other)

                async def status() -> dict[str, Any]:
                    refreshed = await call(http, "events/subscribe", subscription(receiver.url))
                    return dict(refreshed["deliveryStatus"])

                await until(status_once_recorded(status), "the 429 to be recorded")
                (later,) = await served.publish(agent["handle"])
                # The other subscription is not held: the event reaches it, and is recorded.
                assert (await next_arrival(other)).json["eventId"] == later
                await until(partial(served.delivered, later), "its delivery to be recorded")
                served.clock.advance(121)
                arrivals = {}
                for _ in range(2):
                    got = await next_arrival(receiver)
                    arrivals[got.json["eventId"]] = sent_at(got)
        # Neither was sent before the wait the receiver asked for was over; none was lost.
        assert set(arrivals) == {asked, later}
        assert all(at >= asked_at + 120 for at in arrivals.values()), arrivals
    finally:
        other.close()


async def test_a_subscription_at_its_rate_is_throttled_and_its_deliveries_go_later(
    own_store_url: str, receiver: Receiver
) -> None:
    async with serving(own_store_url, rate=1.0) as served:
        agent, http = await served.agent()
        async with http:
            await call(http, "events/subscribe", subscription(receiver.url))
            published = await served.publish(agent["handle"], 3)
            arrivals = [await next_arrival(receiver)]
            refreshed = await call(http, "events/subscribe", subscription(receiver.url))
            shown = refreshed["deliveryStatus"]
            assert shown["throttled"] is True and shown["retryAfterMs"] == 1000
            assert shown["active"] is True
            for _ in published[1:]:  # one a second, by the clock
                served.clock.advance(1)
                arrivals.append(await next_arrival(receiver))
            assert [a.json["eventId"] for a in arrivals] == published
            first = sent_at(arrivals[0])
            assert [sent_at(a) for a in arrivals] == [first, first + 1, first + 2]
            served.clock.advance(1)
            again = await call(http, "events/subscribe", subscription(receiver.url))
            assert again["deliveryStatus"]["throttled"] is False


async def test_deliveries_failing_past_the_threshold_suspend_until_a_refresh_reactivates(
    own_store_url: str, webhook_log: queue.Queue[logging.LogRecord]
) -> None:
    receiver = Receiver(answers_challenges=True, controls_ok=True)
    try:
        async with serving(own_store_url, schedule_s=(0,)) as served:
            agent, http = await served.agent()
            async with http:
                await suspend_then_reactivate(served, agent, http, receiver, webhook_log)
    finally:
        receiver.close()


async def suspend_then_reactivate(
    served: Served,
    agent: dict[str, Any],
    http: httpx.AsyncClient,
    receiver: Receiver,
    records: queue.Queue[logging.LogRecord],
) -> None:
    subscribed = await call(http, "events/subscribe", subscription(receiver.url))
    sub_id = subscribed["id"]
    receiver.script.extend([(500, {"x-leak": "raw header"})] * SUSPEND_MIN_ATTEMPTS)
    failing = await served.publish(agent["handle"], SUSPEND_MIN_ATTEMPTS)
    for event_id in failing:  # each tried once (the schedule's one try), and given up on
        await until(partial(served.given_up, event_id), "its one try to be spent")
    # Said once, by the subscription's id and why, never its URL; counted among the disabled.
    lines: list[str] = []

    async def suspended_line() -> list[str]:
        return [line for line in logged(records, lines) if "suspended:" in line]

    (suspended,) = await until(suspended_line, "the suspension to be logged")
    assert sub_id in suspended and "100 of its 100 deliveries" in suspended
    await until(partial(served.subscriptions_shown, "disabled", 1), "the gauge to count it")
    # Suspended now: what is published meanwhile stays owed, or expires (a gap).
    (expiring,) = await served.publish(agent["handle"], ttl_s=60)
    (owed,) = await served.publish(agent["handle"])
    served.clock.advance(61)
    await until(lambda: _is(served.status(expiring), "expired"), "maintenance to expire it")
    assert owed not in [r.json.get("eventId") for r in receiver.requests]
    while not receiver.arrived.empty():
        receiver.arrived.get_nowait()  # what came before the refresh

    refreshed = await call(http, "events/subscribe", subscription(receiver.url))
    assert refreshed["id"] == subscribed["id"]
    status = refreshed["deliveryStatus"]
    assert status["active"] is False and status["lastError"] == "http_5xx"
    assert "failedSince" in status and status["lastDeliveryAt"] is None
    assert status["throttled"] is False and "raw header" not in str(status)
    assert (await next_arrival(receiver)).json["eventId"] == owed
    gap = await next_arrival(receiver, "gap")
    assert gap.headers["webhook-id"].startswith("msg_gap_")
    told = Webhook(SECRET).verify(gap.body, gap.headers)["cursor"]
    assert cursor_seq(told) >= SUSPEND_MIN_ATTEMPTS + 1  # past the expired event
    again = await call(http, "events/subscribe", subscription(receiver.url))
    assert again["deliveryStatus"]["active"] is True
    (reactivated,) = [line for line in logged(records, lines) if "reactivated" in line]
    assert sub_id in reactivated and reactivated.endswith("it was suspended")
    assert receiver.url not in suspended + reactivated
    await until(partial(served.subscriptions_shown, "disabled", 0), "the gauge to let it go")


async def _is(status: Any, wanted: str) -> bool:
    return bool(await status == wanted)


async def _is_gone(served: Served, event_id: str) -> bool:
    return (await served.admin.get(f"/v1/events/{event_id}")).status_code == 404


def status_once_recorded(status: Any) -> Any:
    async def check() -> dict[str, Any] | None:
        shown: dict[str, Any] = await status()
        return shown if shown["lastError"] is not None else None

    return check
