"""The live sessions: the events this process commits are handed to its sessions as they are
stored, and a session's worker reads the store only when it may hold events it was not handed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from herald import Hub
from herald.capabilities import DeliveryCapabilities, detect
from herald.delivery.engine import Notifier
from herald.delivery.sessions import HANDED_MAX, LiveSession, SessionRegistry
from herald.inputs.events import parse_new_event
from herald.models import Agent, Event, NewEvent
from herald.testing import ManualClock, RecordingPeer

pytestmark = pytest.mark.anyio


@pytest.fixture
async def hub(tmp_path: Path, clock: ManualClock) -> AsyncIterator[Hub]:
    async with Hub.from_url(f"sqlite:///{tmp_path / 'h.db'}", clock=clock) as opened:
        yield opened


def caps() -> DeliveryCapabilities:
    return detect(
        transport="memory",
        protocol_version="2025-11-25",
        client_info={"name": "claude-code", "version": "1"},
        client_capabilities={},
    )


async def idle(session: LiveSession) -> None:
    """A session's work that does nothing: the test plays its worker."""


async def published(hub: Hub, handle: str, count: int) -> list[Event]:
    return [(await hub.publish(handle, "t", f"event {n}")).event for n in range(count)]


def batch(to: str, count: int) -> list[NewEvent]:
    return [parse_new_event({"to": to, "type": "t", "text": f"{n}"}) for n in range(count)]


async def caught_up(hub: Hub, peer: RecordingPeer | None = None) -> tuple[LiveSession, Agent]:
    """A session (no worker) that has read the store and found nothing more."""
    alice, _ = await hub.create_agent("alice")
    registry = SessionRegistry(hub.clock, idle)
    session = registry.connect("s1", alice, caps(), peer or RecordingPeer())
    hub.add_commit_listener(registry.hand)
    hub.add_listener(registry.wake_agents)
    session.must_read = False  # as after a read of the store that found nothing
    return session, alice


async def test_events_committed_here_are_handed_over_and_need_no_read(hub: Hub) -> None:
    session, _ = await caught_up(hub)
    events = await published(hub, "alice", 3)
    assert session.take_handed() == events
    assert session.handed_through == events[-1].seq
    assert not session.must_read and session.wake.is_set()


async def test_events_that_do_not_follow_on_are_read_from_the_store(hub: Hub) -> None:
    session, _ = await caught_up(hub)
    session.handed_through = 5  # the next event committed here (seq 1) does not follow on
    await published(hub, "alice", 1)
    assert session.take_handed() == [] and session.must_read


async def test_a_session_that_cannot_be_reached_is_handed_nothing(hub: Hub) -> None:
    session, _ = await caught_up(hub, RecordingPeer(ready=False))
    await published(hub, "alice", 1)
    assert session.take_handed() == [] and session.must_read


async def test_a_session_that_falls_behind_reads_the_store(hub: Hub) -> None:
    session, _ = await caught_up(hub)
    await hub.publish_many(batch("alice", HANDED_MAX + 1))
    assert session.take_handed() == [] and session.must_read


async def test_a_wake_up_without_a_handover_has_the_store_read(hub: Hub) -> None:
    alice, _ = await hub.create_agent("alice")
    # An event open again, or one committed by another process, is only announced.
    registry = SessionRegistry(hub.clock, idle)
    other = registry.connect("s2", alice, caps(), RecordingPeer())
    other.must_read = False
    registry.wake_agents({alice.id})
    assert other.must_read and other.wake.is_set()


async def test_every_event_published_while_a_session_is_live_is_pushed_once_in_order(
    hub: Hub,
) -> None:
    notifier = Notifier(hub)
    try:
        alice, _ = await hub.create_agent("alice")
        await published(hub, "alice", 5)  # a backlog, read from the store
        peer = RecordingPeer()
        notifier.connect("s1", alice, caps(), peer)
        # Publishes one by one and in batches, concurrently with the worker's reads and pushes.
        singles = [hub.publish("alice", "t", f"single {n}") for n in range(20)]
        batches = [hub.publish_many(batch("alice", 7)) for _ in range(5)]
        await asyncio.gather(*singles, *batches)
        seqs = [int((await peer.next())[1]["meta"]["seq"]) for _ in range(5 + 20 + 35)]
        assert seqs == list(range(1, 61))
        assert peer.received.empty()
    finally:
        await notifier.close()
