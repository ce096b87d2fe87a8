"""A way of delivering is data: a new one, written here as an application would, is used by the
cascade through the list it is given, with no change to the engine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import ClassVar

import pytest

from herald import EventStatus, Hub
from herald.capabilities import DeliveryCapabilities, detect
from herald.delivery.base import (
    EVERY_PUSH_PATH,
    Backlog,
    Mechanism,
    Notification,
    Peer,
    PushOutcome,
    PushResult,
)
from herald.delivery.cascade import PushReport
from herald.delivery.engine import Notifier
from herald.delivery.mechanisms import default_mechanisms
from herald.models import Agent, Event
from herald.testing import ManualClock, RecordingPeer
from tests.conftest import next_report
from tests.metrics.test_instruments import values

pytestmark = pytest.mark.anyio

PAGER_PATH = "pager"
"""A push path no herald peer offers: a new kind of connection brings it."""
PAGE_METHOD = "notifications/pager/page"


class Pager(Mechanism):
    """A toy way: pages any session whose connection offers a pager, and tells of a backlog."""

    name: ClassVar[str] = "pager"
    needs: ClassVar[frozenset[str]] = frozenset({PAGER_PATH})

    def reaches(self, caps: DeliveryCapabilities) -> bool:
        return True

    async def send(self, peer: Peer, event: Event, cursor: str) -> PushResult:
        await peer.notify(PAGE_METHOD, {"event_id": event.id})
        return PushResult(PushOutcome.SENT)

    def backlog_summary(self, backlog: Backlog) -> Notification:
        return Notification(PAGE_METHOD, {"unread": backlog.unread})


class Poll(Mechanism):
    """A toy way that waits for a person's vote on events of type ``poll``."""

    name: ClassVar[str] = "poll"
    waits_for_answer: ClassVar[bool] = True

    def __init__(self) -> None:
        self.voted = asyncio.Event()

    def reaches(self, caps: DeliveryCapabilities) -> bool:
        return True

    def can_serve(self, caps: DeliveryCapabilities, event: Event) -> bool:
        return event.type == "poll"

    async def send(self, peer: Peer, event: Event, cursor: str) -> PushResult:
        await peer.notify("notifications/poll/open", {"event_id": event.id})
        await self.voted.wait()
        return PushResult(PushOutcome.DELIVERED)


@pytest.fixture
async def hub(tmp_path: Path, clock: ManualClock) -> AsyncIterator[Hub]:
    async with Hub.from_url(f"sqlite:///{tmp_path / 'h.db'}", clock=clock) as opened:
        yield opened


@pytest.fixture
async def notifier(hub: Hub) -> AsyncIterator[Notifier]:
    service = Notifier(hub, mechanisms=[Pager(), Poll(), *default_mechanisms()], backlog_limit=3)
    yield service
    await service.close()


def plain() -> DeliveryCapabilities:
    return detect(
        transport="memory",
        protocol_version="2025-11-25",
        client_info={"name": "plain", "version": "1"},
        client_capabilities={},
    )


async def agent(hub: Hub) -> Agent:
    created, _ = await hub.create_agent("alice")
    return created


async def test_a_new_way_is_used_where_the_connection_offers_its_push_path(
    hub: Hub, notifier: Notifier, reports: asyncio.Queue[PushReport]
) -> None:
    alice = await agent(hub)
    paged = RecordingPeer(push_paths=EVERY_PUSH_PATH | {PAGER_PATH})
    usual = RecordingPeer()
    notifier.connect("paged", alice, plain(), paged)
    notifier.connect("usual", alice, plain(), usual)
    published = await hub.publish("alice", "t", "hello")
    assert await paged.next() == (PAGE_METHOD, {"event_id": published.event.id})
    assert (await usual.next())[0] == "notifications/message"
    ways = {(await next_report(reports)).mechanism for _ in range(2)}
    assert ways == {"pager", "log"}
    event, attempts = await hub.get_event(published.event.id)
    assert event.status is EventStatus.SENT
    assert sorted(a.mechanism for a in attempts) == ["log", "pager"]


async def test_a_new_way_tells_of_a_long_backlog_its_own_way(hub: Hub, notifier: Notifier) -> None:
    alice = await agent(hub)
    for n in range(5):
        await hub.publish("alice", "t", f"old {n}")
    peer = RecordingPeer(push_paths={PAGER_PATH})
    notifier.connect("s1", alice, plain(), peer)
    assert await peer.next() == (PAGE_METHOD, {"unread": 5})


async def test_a_new_way_that_waits_for_an_answer_does_not_hold_up_the_events_behind_it(
    hub: Hub, notifier: Notifier, reports: asyncio.Queue[PushReport]
) -> None:
    alice = await agent(hub)
    peer = RecordingPeer()
    notifier.connect("s1", alice, plain(), peer)
    poll = await hub.publish("alice", "poll", "lunch at noon?")
    assert await peer.next() == ("notifications/poll/open", {"event_id": poll.event.id})
    after = await hub.publish("alice", "t", "behind the poll")
    method, params = await peer.next()
    assert method == "notifications/message" and params["data"]["event_id"] == after.event.id
    assert (await next_report(reports)).mechanism == "log"
    (poll_way,) = [m for m in notifier.mechanisms if isinstance(m, Poll)]
    poll_way.voted.set()
    report = await next_report(reports)
    assert (report.mechanism, report.result.outcome) == ("poll", PushOutcome.DELIVERED)
    assert (await hub.get_event(poll.event.id))[0].status is EventStatus.DELIVERED


async def test_each_push_is_counted_by_its_way_and_timed_from_its_publish(
    hub: Hub, notifier: Notifier, reports: asyncio.Queue[PushReport], clock: ManualClock
) -> None:
    alice = await agent(hub)
    peer = RecordingPeer()
    notifier.connect("s1", alice, plain(), peer)
    poll = await hub.publish("alice", "poll", "lunch at noon?")
    assert await peer.next() == ("notifications/poll/open", {"event_id": poll.event.id})
    clock.advance(3)
    (poll_way,) = [m for m in notifier.mechanisms if isinstance(m, Poll)]
    poll_way.voted.set()
    assert (await next_report(reports)).mechanism == "poll"
    found = values(hub.metrics)
    delivered = (("outcome", "delivered"), ("way", "poll"))
    assert found["herald_deliveries_total", delivered] == 1
    acked = (("outcome", "delivered"), ("way", "ack"))  # the answer confirms it
    assert found["herald_deliveries_total", acked] == 1
    for way, stage in [("poll", "sent"), ("ack", "acknowledged")]:
        labels = (("stage", stage), ("way", way))
        assert found["herald_delivery_latency_seconds_count", labels] == 1
        assert found["herald_delivery_latency_seconds_sum", labels] == 3.0
