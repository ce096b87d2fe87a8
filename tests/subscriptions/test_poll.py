"""``events/poll`` without a transport, on both backends: every answer reads a bounded part of
the backlog, says where to go on, and never passes or acknowledges an event it did not hand out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from herald import Hub
from herald.inputs.events import parse_new_event
from herald.inputs.subscriptions import PollInput
from herald.models import Agent, EventStatus
from herald.subscriptions.poll import poll
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio

SCAN = 10


@pytest.fixture
async def hub(store_url: str, clock: ManualClock) -> AsyncIterator[Hub]:
    """A hub whose narrowed reads look at ``SCAN`` events at most."""
    async with Hub.from_url(store_url, clock=clock, scan_events=SCAN) as opened:
        yield opened


async def publish(hub: Hub, handle: str, type: str, count: int) -> list[str]:
    events = [parse_new_event({"to": handle, "type": type, "text": f"{n}"}) for n in range(count)]
    return [published.event.id for published in await hub.publish_many(events)]


async def polled(
    hub: Hub, agent: Agent, cursor: str | None, types: list[str], **params: Any
) -> dict[str, Any]:
    looked: list[int] = []
    body = {"name": "herald.event", "arguments": {"types": types}, "cursor": cursor, **params}
    answer = await poll(hub, agent, PollInput.model_validate(body), looked=looked.append)
    return {**answer, "looked": looked}


def seq(answer: dict[str, Any]) -> int:
    return int(answer["cursor"].rpartition("~")[2])


async def test_a_poll_whose_types_match_nothing_looks_at_the_bound_and_goes_on_from_there(
    hub: Hub,
) -> None:
    agent, _ = await hub.create_agent("alice")
    others = await publish(hub, "alice", "chat.message", 3 * SCAN + 5)
    await publish(hub, "alice", "build.failed", 1)

    start = await polled(hub, agent, None, ["build.*"])
    assert (seq(start), start["events"], start["hasMore"]) == (SCAN, [], True)
    answers = [start]
    while not answers[-1]["events"]:
        answers.append(await polled(hub, agent, answers[-1]["cursor"], ["build.*"]))
        assert len(answers) <= 5, "each poll must move on"
    walked = answers[1:-1]
    assert [seq(a) for a in walked] == [2 * SCAN, 3 * SCAN]
    assert all(a["hasMore"] and a["nextPollMs"] == 0 and not a["truncated"] for a in walked)
    assert all(a["looked"] == [SCAN] for a in walked)
    (found,) = answers[-1]["events"]
    assert found["data"]["type"] == "build.failed" and found["data"]["seq"] == 3 * SCAN + 6

    after = await polled(hub, agent, answers[-1]["cursor"], ["build.*"])
    assert after["events"] == [] and after["hasMore"] is False
    statuses = {(await hub.get_event(event_id))[0].status for event_id in others}
    assert statuses == {EventStatus.PENDING}, "a cursor acknowledges only what it handed out"
    assert (await hub.get_event(found["eventId"]))[0].status is EventStatus.DELIVERED


async def test_a_bounded_poll_never_passes_a_matching_event_another_subscription_holds(
    hub: Hub, clock: ManualClock
) -> None:
    agent, _ = await hub.create_agent("alice")
    await publish(hub, "alice", "chat.message", 5)
    (held,) = await publish(hub, "alice", "build.failed", 1)
    await publish(hub, "alice", "chat.message", SCAN)
    await publish(hub, "alice", "build.failed", 1)

    other = await polled(hub, agent, None, ["build.failed", "build.*"])
    taken = await polled(hub, agent, other["cursor"], ["build.failed", "build.*"], maxEvents=1)
    assert [e["eventId"] for e in taken["events"]] == [held]

    start = await polled(hub, agent, None, ["build.*"])
    assert seq(start) == 5
    waiting = await polled(hub, agent, start["cursor"], ["build.*"])
    assert waiting["events"] == [] and seq(waiting) == 5, "the held event is not passed"
    assert waiting["hasMore"] is False

    clock.advance(hub.lease_ms / 1000 + 1)  # the other subscription never acknowledged it
    offered = await polled(hub, agent, start["cursor"], ["build.*"])
    assert [e["eventId"] for e in offered["events"]] == [held]


async def test_a_start_with_max_age_passes_old_events_by_their_time_and_says_so(
    hub: Hub, clock: ManualClock
) -> None:
    alice, _ = await hub.create_agent("alice")
    await publish(hub, "alice", "chat.message", SCAN // 2)
    bob, _ = await hub.create_agent("bob")
    await publish(hub, "bob", "chat.message", 3 * SCAN)
    (too_old,) = await publish(hub, "bob", "build.failed", 1)
    clock.advance(60)
    (recent,) = await publish(hub, "alice", "build.failed", 1)
    (bobs_recent,) = await publish(hub, "bob", "build.failed", 1)

    # Fewer old events than the bound: each is looked at, and none matches.
    start = await polled(hub, alice, None, ["build.*"], maxAgeMs=30_000)
    assert (seq(start), start["hasMore"], start["truncated"]) == (SCAN // 2, True, False)
    page = await polled(hub, alice, start["cursor"], ["build.*"])
    assert [e["eventId"] for e in page["events"]] == [recent]

    # More than the bound: passed by the index on their time, unread, and said to be skipped.
    start = await polled(hub, bob, None, ["build.*"], maxAgeMs=30_000)
    assert (seq(start), start["truncated"]) == (3 * SCAN + 1, True)
    page = await polled(hub, bob, start["cursor"], ["build.*"])
    assert [e["eventId"] for e in page["events"]] == [bobs_recent]
    assert (await hub.get_event(too_old))[0].status is EventStatus.PENDING
