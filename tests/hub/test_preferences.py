"""Agents' preferences through the hub (``hub.preferences``): what pushes read is remembered,
read again in the background once a second has passed, and a change made by another process
on the same store is followed without any push waiting on the store for it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from herald import Hub
from herald.models import NO_PREFERENCES
from herald.store import open_store
from herald.testing import ManualClock
from tests.waiting import until

pytestmark = pytest.mark.anyio


@pytest.fixture
async def here(store_url: str, clock: ManualClock) -> AsyncIterator[Hub]:
    async with Hub(await open_store(store_url, clock=clock)) as opened:
        yield opened


@pytest.fixture
async def elsewhere(store_url: str, clock: ManualClock) -> AsyncIterator[Hub]:
    """Another process's hub on the same store."""
    async with Hub(await open_store(store_url, clock=clock)) as opened:
        yield opened


async def test_a_change_elsewhere_is_followed_while_pushes_go_on_with_what_was_known(
    here: Hub, elsewhere: Hub, clock: ManualClock
) -> None:
    agent, _ = await here.create_agent("prefs-alice")
    assert await here.preferences.of(agent.id) == NO_PREFERENCES
    await elsewhere.preferences.put(agent.id, {"muted": ["ci.*"]})
    assert await here.preferences.of(agent.id) == NO_PREFERENCES  # remembered for a second
    clock.advance(1.5)
    # The second has passed: this push goes on with what was known, the store is read again
    # beside it, and the pushes after that read follow the change.
    assert await here.preferences.of(agent.id) == NO_PREFERENCES

    async def followed() -> bool:
        return (await here.preferences.of(agent.id)).muted is not None

    await until(followed, "the change made elsewhere followed")


async def test_remembered_preferences_are_answered_without_a_wait_and_followed_within_a_second(
    here: Hub, elsewhere: Hub, clock: ManualClock
) -> None:
    agent, _ = await here.create_agent("prefs-bob")
    assert here.preferences.remembered(agent.id) is None  # never read: ``of`` reads them
    await here.preferences.of(agent.id)
    assert here.preferences.remembered(agent.id) == NO_PREFERENCES
    await elsewhere.preferences.put(agent.id, {"muted": ["ci.*"]})
    clock.advance(1.5)
    # A second old: still answered at once, and read again beside the caller.
    assert here.preferences.remembered(agent.id) == NO_PREFERENCES

    async def followed() -> bool:
        remembered = here.preferences.remembered(agent.id)
        return remembered is not None and remembered.muted is not None

    await until(followed, "the change made elsewhere followed")
    await here.preferences.put(agent.id, {"muted": []})
    assert here.preferences.remembered(agent.id) is None  # changed here: read again, not guessed
