"""The hub's record of pushes: written in the background, at once for a cursor that waits for it
(however many pushes keep coming), and before the hub closes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from herald import Hub
from herald.hub import pushes
from herald.hub.pushes import Pushes, PushRecorder
from herald.models import Attempt, EventStatus

pytestmark = pytest.mark.anyio


def pushed(event_id: str) -> list[Attempt]:
    return [Attempt(event_id, 0, "events.stream", "sent", "s")]


class Batches:
    """Where the recorder writes: each batch, in order."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    async def write(self, batch: Pushes) -> None:
        self.batches.append([attempt.event_id for _, attempt in batch])

    @property
    def events(self) -> list[str]:
        return [event_id for batch in self.batches for event_id in batch]


async def test_a_cursor_waits_for_what_was_pushed_before_it_not_for_the_next_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pushes, "RECORD_EVERY_S", 3600.0)  # the next turn would be an hour away
    store = Batches()
    recorder = PushRecorder(store.write)
    recorder.add("agt_a", pushed("evt_1"))
    await recorder.written()
    recorder.add("agt_a", pushed("evt_2"))  # its turn is an hour after the first write
    await asyncio.wait_for(recorder.written(), 10)
    assert store.batches == [["evt_1"], ["evt_2"]]


async def test_a_cursor_waits_for_its_agent_s_pushes_not_another_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pushes, "RECORD_EVERY_S", 3600.0)
    store = Batches()
    recorder = PushRecorder(store.write)
    recorder.add("agt_a", pushed("evt_1"))
    await recorder.written("agt_a")
    recorder.add("agt_b", pushed("evt_2"))  # its turn is an hour away
    await asyncio.wait_for(recorder.written("agt_a"), 10)
    assert store.batches == [["evt_1"]]  # agt_a's cursor did not have agt_b's written
    recorder.add("agt_a", pushed("evt_3"))
    await asyncio.wait_for(recorder.written("agt_a"), 10)
    assert store.batches == [["evt_1"], ["evt_2", "evt_3"]]


async def test_a_cursor_is_not_held_by_pushes_that_keep_coming_after_it() -> None:
    store = Batches()
    recorder = PushRecorder(store.write)
    recorder.add("agt_a", pushed("evt_0"))

    async def keep_pushing() -> None:
        for n in range(1, 1_000_000):
            recorder.add("agt_a", pushed(f"evt_{n}"))
            await asyncio.sleep(0)

    pushing = asyncio.ensure_future(keep_pushing())
    try:
        await asyncio.wait_for(recorder.written(), 10)
        assert "evt_0" in store.events
    finally:
        pushing.cancel()


async def test_a_failed_write_is_logged_and_does_not_hold_a_cursor(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def failing(batch: Pushes) -> None:
        raise OSError("disk gone")

    recorder = PushRecorder(failing)
    recorder.add("agt_a", pushed("evt_1"))
    await asyncio.wait_for(recorder.written(), 10)
    assert "recording 1 pushes failed" in caplog.text


async def test_a_hub_writes_the_pushes_still_waiting_when_it_closes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'herald.db'}"
    async with Hub.from_url(url) as hub:
        await hub.create_agent("alice")
        first = await hub.publish("alice", "t", "first")
        second = await hub.publish("alice", "t", "second")
        alice = first.event.agent_id
        hub.pushes.add(alice, [Attempt(first.event.id, hub.now(), "events.stream", "sent", "s")])
        await hub.pushes.written()
        # Its turn to be written comes later than the hub's close.
        hub.pushes.add(alice, [Attempt(second.event.id, hub.now(), "events.stream", "sent", "s")])
    async with Hub.from_url(url) as again:
        for published in (first, second):
            event, _ = await again.get_event(published.event.id)
            assert event.status is EventStatus.SENT
