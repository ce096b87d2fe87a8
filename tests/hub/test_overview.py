"""The operator's view of loop guard trips through the hub (``hub.overview``), on each backend
with the injected clock: the newest trips the journal keeps, newest first, and how many in the
last 24 hours."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from herald import Hub
from herald.errors import LoopGuardTripped
from herald.models import Agent
from herald.store import open_store
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio


@pytest.fixture
async def hub(store_url: str, clock: ManualClock) -> AsyncIterator[Hub]:
    async with Hub(await open_store(store_url, clock=clock)) as opened:
        yield opened


async def trip(hub: Hub, sender: Agent, to: Agent) -> str:
    """Send two messages where one a minute is allowed: the second trips the guard."""
    await hub.send_message(sender, to.handle, "one")
    with pytest.raises(LoopGuardTripped) as tripped:
        await hub.send_message(sender, to.handle, "two")
    return tripped.value.thread


async def test_trips_are_listed_newest_first_and_counted_over_the_last_day(
    hub: Hub, clock: ManualClock
) -> None:
    alice, _ = await hub.create_agent(f"trip-a-{uuid.uuid4().hex[:6]}")
    bob, _ = await hub.create_agent(f"trip-b-{uuid.uuid4().hex[:6]}")
    assert await hub.overview.loop_guard_trips(10) == (0, [])
    await hub.set_loop_limits(alice, None, None, 1)
    await hub.set_loop_limits(bob, None, None, 1)
    first = await trip(hub, alice, bob)
    clock.advance(25 * 3600)  # the first trip is over a day old now
    second = await trip(hub, bob, alice)
    last_day, trips = await hub.overview.loop_guard_trips(10)
    assert last_day == 1
    assert [(t["agent"]["handle"], t["to"], t["thread"]) for t in trips] == [
        (bob.handle, alice.handle, second),
        (alice.handle, bob.handle, first),
    ]
    assert (trips[0]["kind"], trips[0]["limit"], trips[0]["maximum"]) == (
        "loop_guard",
        "per_minute",
        1,
    )
    assert (await hub.overview.loop_guard_trips(1))[1] == trips[:1]
    await hub.delete_agent(bob.id)  # a deleted sender's trips are left out, as the feed does
    assert [t["thread"] for t in (await hub.overview.loop_guard_trips(10))[1]] == [first]
