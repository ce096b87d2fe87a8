"""A session's backlog as it (re)connects, on each backend: a long one is told in one summary,
which counts only what would have been pushed; low and muted events are counted apart, and a
backlog long only because of them is no summary: what is pushed of it comes one by one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial

import pytest

from herald import EventStatus, Hub
from herald.capabilities import DeliveryCapabilities, detect
from herald.delivery.engine import Notifier
from herald.models import Agent
from herald.store import open_store
from herald.testing import ManualClock, RecordingPeer
from tests.waiting import until

pytestmark = pytest.mark.anyio

BACKLOG_LIMIT = 3


@pytest.fixture
async def hub(store_url: str, clock: ManualClock) -> AsyncIterator[Hub]:
    async with Hub(await open_store(store_url, clock=clock)) as opened:
        yield opened


@pytest.fixture
async def notifier(hub: Hub) -> AsyncIterator[Notifier]:
    service = Notifier(hub, backlog_limit=BACKLOG_LIMIT)
    yield service
    await service.close()


def claude_code() -> DeliveryCapabilities:
    return detect(
        transport="memory",
        protocol_version="2025-11-25",
        client_info={"name": "claude-code", "version": "1"},
        client_capabilities={},
        overrides={},
    )


async def muting_agent(hub: Hub) -> Agent:
    agent, _ = await hub.create_agent("backlogged")
    await hub.preferences.put(agent.id, {"muted": ["ci.*"]})
    return agent


async def test_a_backlog_long_only_with_low_and_muted_events_is_pushed_one_by_one(
    hub: Hub, notifier: Notifier
) -> None:
    agent = await muting_agent(hub)
    for n in range(BACKLOG_LIMIT + 2):
        await hub.publish(agent.handle, "t", f"low {n}", priority="low")
        await hub.publish(agent.handle, "ci.passed", f"muted {n}")
    first = await hub.publish(agent.handle, "t", "first to push")
    second = await hub.publish(agent.handle, "t", "second to push", priority="urgent")
    peer = RecordingPeer()
    notifier.connect("s1", agent, claude_code(), peer)
    pushed = [(await peer.next())[1] for _ in range(2)]
    assert [p["meta"]["type"] for p in pushed] == ["t", "t"]  # no herald.backlog summary
    assert ["first to push" in p["content"] for p in pushed] == [True, False]
    assert "second to push" in pushed[1]["content"]
    after = await hub.publish(agent.handle, "t", "after")
    assert "after" in (await peer.next())[1]["content"]  # nothing low or muted came between
    # A push is recorded after its notification leaves, its row locked until then, and a drain
    # takes no event another holds: drained once the three are recorded.
    for published in (first, second, after):
        await until(partial(is_sent, hub, published.event.id), "the push to be recorded")
    drained: list[str] = []
    cursor = 0
    while batch := await hub.drain(agent, cursor=cursor, limit=50):
        if not batch.events:
            break
        drained += [e.text for e in batch.events]
        cursor = batch.cursor
    assert len(drained) == 2 * (BACKLOG_LIMIT + 2) + 3, drained  # every one kept


async def is_sent(hub: Hub, event_id: str) -> bool:
    event, _ = await hub.get_event(event_id)
    return event.status is EventStatus.SENT


async def test_a_long_backlog_summary_counts_what_is_pushed_and_tells_the_rest_apart(
    hub: Hub, notifier: Notifier
) -> None:
    agent = await muting_agent(hub)
    await hub.publish(agent.handle, "t", "a low one first", priority="low")
    for n in range(BACKLOG_LIMIT + 1):
        await hub.publish(agent.handle, "t", f"to push {n}")
        await hub.publish(agent.handle, "ci.failed", f"muted {n}")
    peer = RecordingPeer()
    notifier.connect("s1", agent, claude_code(), peer)
    method, params = await peer.next()
    assert method == "notifications/claude/channel"
    assert params["meta"] == {
        "type": "herald.backlog",
        "unread": str(BACKLOG_LIMIT + 1),
        "not_pushed": str(BACKLOG_LIMIT + 2),
    }
    assert params["content"].startswith(
        f"{BACKLOG_LIMIT + 1} unread herald events are waiting (and {BACKLOG_LIMIT + 2} never"
        " pushed: low priority, muted or held). The oldest: [t] to push 0"  # not the low one
    )
    await hub.publish(agent.handle, "t", "new")
    assert "new" in (await peer.next())[1]["content"]  # the summary stood for the backlog
    assert peer.received.empty()
