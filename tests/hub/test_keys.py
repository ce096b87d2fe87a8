"""Keys through the hub's Python API: an agent's key rotated with a grace, and the admin key
replaced in one hub and refused by another on the same store, with time moved by the store's
clock. (Across real processes: tests/test_key_processes.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from herald import Hub, InvalidInput, NotFound
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio

ADMIN_KEY = "an-admin-key-chosen-for-these-tests-0123"


@pytest.fixture
async def hubs(store_url: str, clock: ManualClock) -> AsyncIterator[tuple[Hub, Hub]]:
    """Two hubs on one store, as two processes would be (on each backend)."""
    async with (
        Hub.from_url(store_url, clock=clock) as one,
        Hub.from_url(store_url, clock=clock) as two,
    ):
        yield one, two


async def test_a_rotated_agent_key_works_on_every_hub_until_its_grace_ends(
    hubs: tuple[Hub, Hub], clock: ManualClock
) -> None:
    one, two = hubs
    alice, old_key = await one.create_agent("alice")
    assert await two.agent_for_key(old_key) == alice  # remembered by the other hub
    rotated, new_key, until = await one.rotate_agent_key("alice", grace_s=30)
    assert rotated.id == alice.id and new_key != old_key
    assert until == one.now() + 30_000
    clock.advance(29.9)
    for hub in hubs:
        assert await hub.agent_for_key(new_key) == rotated
        assert await hub.agent_for_key(old_key) == rotated
    clock.advance(0.1)
    for hub in hubs:
        assert await hub.agent_for_key(old_key) is None
        assert await hub.agent_for_key(new_key) == rotated


async def test_a_rotation_without_grace_stops_the_old_key_at_once(hubs: tuple[Hub, Hub]) -> None:
    one, _ = hubs
    alice, old_key = await one.create_agent("alice")
    assert await one.agent_for_key(old_key) == alice
    _, new_key, until = await one.rotate_agent_key(alice.id)
    assert until is None
    assert await one.agent_for_key(old_key) is None
    assert (await one.agent_for_key(new_key)) is not None


async def test_a_rotation_during_a_grace_ends_the_key_it_replaced_first(
    hubs: tuple[Hub, Hub],
) -> None:
    one, _ = hubs
    alice, first = await one.create_agent("alice")
    _, second, _ = await one.rotate_agent_key(alice.id, grace_s=60)
    _, third, _ = await one.rotate_agent_key("alice", grace_s=60)
    assert await one.agent_for_key(first) is None
    assert await one.agent_for_key(second) is not None
    assert await one.agent_for_key(third) is not None


@pytest.mark.parametrize("grace_s", [-1, 7 * 86400 + 1, float("nan"), "60", True, None])
async def test_a_bad_grace_is_refused_and_changes_nothing(
    hubs: tuple[Hub, Hub], grace_s: object
) -> None:
    one, _ = hubs
    alice, key = await one.create_agent("alice")
    with pytest.raises(InvalidInput, match="grace_s must be a number of seconds from 0"):
        await one.rotate_agent_key(alice.id, grace_s=grace_s)  # type: ignore[arg-type]
    assert await one.agent_for_key(key) == alice
    assert (await one.get_agent(alice.id)).key_hash == alice.key_hash


async def test_an_unknown_agent_is_named_in_the_refusal(hubs: tuple[Hub, Hub]) -> None:
    one, _ = hubs
    with pytest.raises(NotFound, match="'carol'"):
        await one.rotate_agent_key("carol")
    with pytest.raises(NotFound, match="agt_"):
        await one.agent_by_id_or_handle("agt_000000000000000000000000")


async def test_an_admin_key_replaced_in_one_hub_is_refused_by_the_other_within_a_second(
    hubs: tuple[Hub, Hub], clock: ManualClock
) -> None:
    one, two = hubs
    await one.setup_admin_key(ADMIN_KEY)
    await two.setup_admin_key()
    assert await two.is_admin_key(ADMIN_KEY)
    new_key = await one.rotate_admin_key()
    assert await one.is_admin_key(new_key) and not await one.is_admin_key(ADMIN_KEY)
    clock.advance(1.0)
    assert not await two.is_admin_key(ADMIN_KEY)
    assert await two.is_admin_key(new_key)


async def test_the_right_admin_key_is_checked_without_asking_the_store_each_time(
    hubs: tuple[Hub, Hub], clock: ManualClock
) -> None:
    one, two = hubs
    await one.setup_admin_key(ADMIN_KEY)
    await two.setup_admin_key()
    await one.rotate_admin_key()
    clock.advance(0.999)
    # Its copy is not yet a second old: the other hub has not read the store again.
    assert await two.is_admin_key(ADMIN_KEY)
