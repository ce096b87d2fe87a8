"""The hub through its Python API: publish, drain, keys and upkeep."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from herald import EventStatus, Hub, InvalidInput, NewEvent, NotFound, TooLarge
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio


@pytest.fixture
async def hub(tmp_path: Path, clock: ManualClock) -> AsyncIterator[Hub]:
    async with Hub.from_url(f"sqlite:///{tmp_path / 'h.db'}", clock=clock, lease_s=10) as opened:
        yield opened


async def test_publish_checks_its_input_and_stores_nothing_bad(hub: Hub) -> None:
    agent, _ = await hub.create_agent("alice")
    with pytest.raises(InvalidInput, match="type"):
        await hub.publish("alice", "has spaces", "x")
    with pytest.raises(TooLarge):
        await hub.publish("alice", "t", "x" * (256 * 1024 + 1))
    with pytest.raises(NotFound, match="bob"):
        await hub.publish("bob", "t", "x")
    assert (await hub.drain(agent, cursor=0)).events == []


async def test_publish_to_a_list_stores_one_event_for_each_agent_or_none(hub: Hub) -> None:
    alice, _ = await hub.create_agent("alice")
    bob, _ = await hub.create_agent("bob")
    published = await hub.publish(["bob", "alice"], "t", "both", dedupe_key="k")
    assert [p.event.agent_id for p in published] == [bob.id, alice.id]
    assert all(p.created for p in published) and published[0].event.id != published[1].event.id
    again = await hub.publish(["alice", "bob"], "t", "both", dedupe_key="k")
    assert [(p.event.id, p.created) for p in again] == [
        (published[1].event.id, False),
        (published[0].event.id, False),
    ]
    with pytest.raises(InvalidInput, match=r"event\.to names 'carol', which no agent has"):
        await hub.publish(["alice", "carol"], "t", "x")
    with pytest.raises(InvalidInput, match="holds 'bob' more than once"):
        await hub.publish(["bob", "alice", "bob"], "t", "x")
    for agent in (alice, bob):
        assert [e.text for e in (await hub.drain(agent, cursor=0)).events] == ["both"]


async def test_a_topics_copies_name_it_and_a_publish_to_agents_may_not(hub: Hub) -> None:
    alice, _ = await hub.create_agent("alice")
    await hub.topics.put("repo/herald", "pushes to herald")
    await hub.topics.subscribe(alice.id, "repo/*")
    (copy,) = await hub.publish_topic("repo/herald", "t", "a push")
    assert copy.event.topic == "repo/herald"
    direct = await hub.publish("alice", "t", "to alice")
    assert direct.event.topic is None
    named = NewEvent("alice", "t", "x", topic="repo/herald")
    with pytest.raises(InvalidInput, match=r"event names the topic 'repo/herald'.*publish_topic"):
        await hub.publish_many([named])
    drained = (await hub.drain(alice, cursor=0)).events
    assert [(e.text, e.topic) for e in drained] == [("a push", "repo/herald"), ("to alice", None)]


async def test_an_unacknowledged_drain_is_offered_again_after_the_lease(
    hub: Hub, clock: ManualClock
) -> None:
    agent, _ = await hub.create_agent("alice")
    published = await hub.publish("alice", "t", "one")
    first = await hub.drain(agent, cursor=0, consumer="a")
    assert [e.id for e in first.events] == [published.event.id]
    assert (await hub.drain(agent, cursor=0, consumer="b")).events == []
    clock.advance(10.5)
    assert [e.id for e in (await hub.drain(agent, cursor=0, consumer="b")).events] == [
        published.event.id
    ]


async def test_history_shows_acknowledged_events_until_retention_prunes_them(
    hub: Hub, clock: ManualClock
) -> None:
    agent, _ = await hub.create_agent("alice")
    done = await hub.publish("alice", "t", "done")
    await hub.publish("alice", "t", "open")
    await hub.ack(agent, ids=[done.event.id])
    clock.advance(hub.retention_ms / 1000 - 1)
    await hub.maintain_once()
    kept = await hub.acknowledged_events(agent)
    assert [e.id for e in kept.events] == [done.event.id] and kept.next is None
    clock.advance(2)
    await hub.maintain_once()
    assert (await hub.acknowledged_events(agent)).events == []


async def test_maintenance_expires_and_prunes(hub: Hub, clock: ManualClock) -> None:
    agent, _ = await hub.create_agent("alice")
    short = await hub.publish("alice", "t", "short", ttl_s=5)
    done = await hub.publish("alice", "t", "done")
    await hub.ack(agent, ids=[done.event.id])
    clock.advance(6)
    assert await hub.maintain_once() == (1, 0)
    event, _ = await hub.get_event(short.event.id)
    assert event.status is EventStatus.EXPIRED
    clock.advance(hub.retention_ms / 1000 + 1)
    assert await hub.maintain_once() == (0, 2)
    with pytest.raises(NotFound):
        await hub.get_event(done.event.id)


async def test_the_admin_key_is_generated_once_then_read_back(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'keys.db'}"
    async with Hub.from_url(url) as first:
        key = await first.setup_admin_key()
        assert key is not None and await first.is_admin_key(key)
    async with Hub.from_url(url) as second:
        assert await second.setup_admin_key() is None
        assert await second.is_admin_key(key) and not await second.is_admin_key(key + "x")
    chosen_key = "my-own-admin-key-of-32-characters"
    async with Hub.from_url(url) as chosen:
        assert await chosen.setup_admin_key(chosen_key) is None
        assert await chosen.is_admin_key(chosen_key) and not await chosen.is_admin_key(key)
    async with Hub.from_url(url) as later:
        assert await later.setup_admin_key() is None
        assert await later.is_admin_key(chosen_key) and not await later.is_admin_key(key)


async def test_a_chosen_admin_key_under_32_characters_is_refused(tmp_path: Path) -> None:
    async with Hub.from_url(f"sqlite:///{tmp_path / 'keys.db'}") as hub:
        with pytest.raises(InvalidInput, match="at least 32 characters"):
            await hub.setup_admin_key("x" * 31)
        with pytest.raises(InvalidInput, match="visible ASCII"):
            await hub.setup_admin_key("a key with spaces of 32 characters")
        assert not await hub.is_admin_key("x" * 31)


async def test_an_agent_key_finds_its_agent_only(hub: Hub) -> None:
    alice, alice_key = await hub.create_agent("alice")
    bob, bob_key = await hub.create_agent("bob")
    assert await hub.agent_for_key(alice_key) == alice
    assert await hub.agent_for_key(bob_key) == bob
    assert await hub.agent_for_key(alice_key + "x") is None
    event = (await hub.publish("alice", "t", "x")).event
    with pytest.raises(NotFound):
        await hub.get_event(event.id, viewer=bob)


async def test_numbers_json_cannot_carry_are_refused(hub: Hub) -> None:
    await hub.create_agent("alice")
    with pytest.raises(InvalidInput, match="JSON"):
        await hub.publish("alice", "t", "x", data={"ratio": float("nan")})
    with pytest.raises(InvalidInput, match="JSON"):
        await hub.publish("alice", "t", "bad \ud800 surrogate")


async def test_agents_cannot_send_herald_s_own_types_but_can_ask_permission(hub: Hub) -> None:
    asker, _ = await hub.create_agent("asker")
    approver, _ = await hub.create_agent("approver")
    for kind in ("reply.received", "permission.request", "herald.backlog"):
        with pytest.raises(InvalidInput, match="reserved"):
            await hub.send_message(asker, "approver", "allow", type=kind)
    asked = await hub.ask_permission(
        asker, "approver", request_id="abcde", tool_name="Bash", description="list files"
    )
    (event,) = (await hub.drain(approver, cursor=0)).events
    assert event.id == asked.event.id and event.type == "permission.request"
    assert event.sender == "asker" and event.interactive
    assert event.data == {
        "request_id": "abcde",
        "tool_name": "Bash",
        "description": "list files",
        "input_preview": "",
    }


async def test_inbox_listeners_hear_new_events_and_acknowledgements_of_their_agents(
    hub: Hub,
) -> None:
    alice, _ = await hub.create_agent("alice")
    await hub.create_agent("bob")
    heard: list[set[str]] = []
    woken: list[set[str]] = []
    hub.add_inbox_listener(heard.append)
    hub.add_listener(woken.append)
    first = await hub.publish("alice", "t", "one")
    second = await hub.publish("alice", "t", "two")
    assert heard == [{alice.id}, {alice.id}] and woken == heard
    heard.clear()
    assert (await hub.ack(alice, ids=[first.event.id])).count == 1
    assert (await hub.ack(alice, ids=[first.event.id])).count == 0  # nothing changed: nothing told
    await hub.reply(alice, second.event.id, "done")
    assert heard == [{alice.id}, {alice.id}]
    assert len(woken) == 2  # the listeners of new events are not woken by acknowledgements
    hub.remove_inbox_listener(heard.append)
    await hub.publish("bob", "t", "three")
    assert len(heard) == 2


async def test_the_signing_key_is_made_once_and_shared_by_every_hub_on_the_store(
    store_url: str,
) -> None:
    async with Hub.from_url(store_url) as one, Hub.from_url(store_url) as two:
        key = await one.signing_key()
        assert len(key) == 32
        assert await two.signing_key() == key
        assert await one.signing_key() == key
