"""Streams end once their key stops working (``hub.key_watch``): at once after a rotation in
the same hub, and at the end of a grace or after a rotation elsewhere at the next check."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from herald import Hub
from herald.hub.key_watch import KEY_ROTATED_OUT
from herald.keys import hash_key
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio


@pytest.fixture
async def hubs(store_url: str, clock: ManualClock) -> AsyncIterator[tuple[Hub, Hub]]:
    """Two hubs on one store, as two processes would be (on each backend)."""
    async with (
        Hub.from_url(store_url, clock=clock) as one,
        Hub.from_url(store_url, clock=clock) as two,
    ):
        yield one, two


async def test_a_rotation_without_a_grace_ends_the_streams_of_the_old_key_at_once(
    hubs: tuple[Hub, Hub],
) -> None:
    one, _ = hubs
    _, old_key = await one.create_agent("alice")
    _, other_key = await one.create_agent("bob")
    reasons: asyncio.Queue[str] = asyncio.Queue()
    one.key_watch.watch(hash_key(old_key), reasons.put_nowait)
    kept: asyncio.Queue[str] = asyncio.Queue()
    one.key_watch.watch(hash_key(other_key), kept.put_nowait)
    _, new_key, _ = await one.rotate_agent_key("alice")
    async with asyncio.timeout(30):
        assert await reasons.get() == KEY_ROTATED_OUT
    one.key_watch.watch(hash_key(new_key), kept.put_nowait)
    await one.key_watch.check()
    assert kept.empty()  # bob's key and alice's new one work


async def test_the_old_keys_streams_end_with_its_grace_and_on_every_hub(
    hubs: tuple[Hub, Hub], clock: ManualClock
) -> None:
    one, two = hubs
    _, old_key = await one.create_agent("carol")
    on_one: asyncio.Queue[str] = asyncio.Queue()
    on_two: asyncio.Queue[str] = asyncio.Queue()
    one.key_watch.watch(hash_key(old_key), on_one.put_nowait)
    two.key_watch.watch(hash_key(old_key), on_two.put_nowait)
    await one.rotate_agent_key("carol", grace_s=30)
    for hub in hubs:
        await hub.key_watch.check()
    assert on_one.empty() and on_two.empty()  # the grace lasts
    clock.advance(31)
    await two.key_watch.check()  # what the other process does at its next period
    assert on_two.get_nowait() == KEY_ROTATED_OUT


async def test_a_stream_no_longer_watched_is_not_told(hubs: tuple[Hub, Hub]) -> None:
    one, _ = hubs
    _, key = await one.create_agent("dave")
    told: asyncio.Queue[str] = asyncio.Queue()
    unwatch = one.key_watch.watch(hash_key(key), told.put_nowait)
    unwatch()
    await one.rotate_agent_key("dave")
    await one.key_watch.check()
    assert told.empty()
