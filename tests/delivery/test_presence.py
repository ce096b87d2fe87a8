"""Live sessions registered in the store: every process sharing it sees them, and those of a
process that died drop out once their expiry passes. Time is the hub's clock, moved by hand."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from herald import Hub
from herald.capabilities import DeliveryCapabilities, detect
from herald.delivery.base import NO_PUSH_PATH
from herald.delivery.engine import Notifier
from herald.hub.presence import Presence
from herald.store import open_store
from herald.testing import ManualClock, RecordingPeer

pytestmark = pytest.mark.anyio

TTL_S = 30.0


@pytest.fixture
async def here(store_url: str, clock: ManualClock) -> AsyncIterator[Hub]:
    async with Hub(await open_store(store_url, clock=clock)) as hub:
        yield hub


@pytest.fixture
async def elsewhere(store_url: str, clock: ManualClock) -> AsyncIterator[Hub]:
    """Another process's hub on the same store."""
    async with Hub(await open_store(store_url, clock=clock)) as hub:
        yield hub


def caps(name: str = "claude-code") -> DeliveryCapabilities:
    return detect(
        transport="streamable-http",
        protocol_version="2025-06-18",
        client_info={"name": name, "version": "2.1"},
        client_capabilities={},
    )


async def test_a_session_is_seen_by_every_process_and_goes_when_it_ends(
    here: Hub, elsewhere: Hub
) -> None:
    agent, _ = await here.create_agent("alice")
    notifier = Notifier(here, presence_ttl_s=TTL_S)
    try:
        notifier.connect("s1", agent, caps(), RecordingPeer())
        await notifier.presence.settled()
        (seen,) = await elsewhere.presence.live(agent.id)
        assert (seen.id, seen.process, seen.can_push) == ("s1", notifier.presence.process, True)
        assert (seen.client_name, seen.era, seen.transport) == (
            "claude-code",
            "legacy",
            "streamable-http",
        )
        notifier.disconnect("s1")
        await notifier.presence.settled()
        assert await elsewhere.presence.live(agent.id) == []
    finally:
        await notifier.close()


async def test_a_session_that_cannot_be_pushed_to_is_registered_as_such(here: Hub) -> None:
    agent, _ = await here.create_agent("alice")
    notifier = Notifier(here)
    try:
        peer = RecordingPeer(push_paths=NO_PUSH_PATH)
        notifier.connect("s1", agent, caps("some-client"), peer)
        await notifier.presence.settled()
        (seen,) = await here.presence.live(agent.id)
        assert seen.can_push is False
        # Nothing is pushed to it, so its webhook need not wait: here as in the store.
        assert notifier.pushable_agents() == set()
        notifier.connect("s2", agent, caps(), RecordingPeer())
        assert notifier.pushable_agents() == {agent.id}
    finally:
        await notifier.close()


async def test_the_sessions_of_a_process_that_stopped_refreshing_expire(
    here: Hub, elsewhere: Hub, clock: ManualClock
) -> None:
    agent, _ = await here.create_agent("alice")
    live = Notifier(here, presence_ttl_s=TTL_S)
    dead = Notifier(here, presence_ttl_s=TTL_S)
    try:
        live.connect("kept", agent, caps(), RecordingPeer())
        dead.connect("lost", agent, caps(), RecordingPeer())
        await live.presence.settled()
        await dead.presence.settled()
        assert {s.id for s in await elsewhere.presence.live(agent.id)} == {"kept", "lost"}

        clock.advance(TTL_S * 2 / 3)
        await live.presence.refresh()  # what the living process's loop does every third
        clock.advance(TTL_S * 2 / 3)  # the dead one never refreshed: past its expiry now
        assert [s.id for s in await elsewhere.presence.live(agent.id)] == ["kept"]
    finally:
        await live.close()
        await dead.close()


async def test_a_session_the_store_lost_is_put_back_at_the_next_refresh(
    here: Hub, elsewhere: Hub, clock: ManualClock
) -> None:
    agent, _ = await here.create_agent("alice")
    notifier = Notifier(here, presence_ttl_s=TTL_S)
    try:
        notifier.connect("s1", agent, caps(), RecordingPeer())
        await notifier.presence.settled()
        clock.advance(TTL_S + 1)  # the process stalled past its expiry...
        await elsewhere.maintain_once()  # ...and another process pruned the record
        assert await elsewhere.presence.live(agent.id) == []
        await notifier.presence.refresh()
        assert [s.id for s in await elsewhere.presence.live(agent.id)] == ["s1"]
    finally:
        await notifier.close()


async def test_the_sessions_of_a_deleted_agent_are_not_kept(here: Hub) -> None:
    agent, _ = await here.create_agent("alice")
    notifier = Notifier(here)
    try:
        notifier.connect("s1", agent, caps(), RecordingPeer())
        await notifier.presence.settled()
        await here.delete_agent(agent.id)
        assert await here.presence.live(agent.id) == []
        await notifier.presence.refresh()  # the put it tries again is refused: not kept
        assert await here.presence.live(agent.id) == []
    finally:
        await notifier.close()


class HeldRemovals:
    """The hub's presence part, whose removals wait until let go (a store that is slow to
    answer): to see what the keeper does with a write still in flight when a refresh falls
    due. Everything else, and the removal once let go, is the real store's."""

    def __init__(self, presence: Presence) -> None:
        self._presence = presence
        self.started = asyncio.Event()
        self.let_go = asyncio.Event()
        self.cut_short = asyncio.Event()

    async def remove(self, session_id: str) -> bool:
        self.started.set()
        try:
            await self.let_go.wait()
        except asyncio.CancelledError:
            self.cut_short.set()
            raise
        return await self._presence.remove(session_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._presence, name)


async def test_a_removal_still_being_written_when_a_refresh_falls_due_is_not_cut_short(
    here: Hub, elsewhere: Hub
) -> None:
    agent, _ = await here.create_agent("alice")
    ttl_s = 0.3  # a refresh every 0.1 s of real time
    notifier = Notifier(here, presence_ttl_s=ttl_s)
    held = HeldRemovals(here.presence)
    try:
        notifier.connect("s1", agent, caps(), RecordingPeer())
        await notifier.presence.settled()
        here.presence = held  # type: ignore[assignment]
        notifier.disconnect("s1")
        async with asyncio.timeout(5):
            await held.started.wait()
        # Three refreshes fall due while the removal is held.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ttl_s):
                await held.cut_short.wait()
        held.let_go.set()
        await notifier.presence.settled()
        assert not held.cut_short.is_set()
        assert await elsewhere.presence.live(agent.id) == []
    finally:
        held.let_go.set()
        await notifier.close()
