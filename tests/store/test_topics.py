"""The topic half of the store contract, on every backend: topics declared and counted,
subscriptions by name and by glob, and a publish to a topic storing one event for each agent
subscribed, read in its own transaction."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from herald import open_store
from herald.ids import new_id
from herald.models import Agent, NewEvent, Priority
from herald.store import Store
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio

# Its JSON as a publish makes it (compact), not as PostgreSQL's JSONB gives it back.
EVENT = NewEvent("", "build.failed", "red", {"n": 1}, None, None, '{"n":1}')


async def agent_of(store: Store, handle: str) -> Agent:
    agent = Agent(new_id("agt_"), handle, f"hash-{handle}", store.now())
    await store.create_agent(agent)
    return agent


async def test_a_put_topic_reads_back_counted_and_a_put_again_replaces_its_description(
    store: Store, clock: ManualClock
) -> None:
    first, created = await store.put_topic("repo/herald", "pushes to herald")
    assert created is True and first.subscribers == 0
    assert first.to_json()["created_at"] == "2027-01-15T08:00:00.000Z"
    clock.advance(2)
    again, created = await store.put_topic("repo/herald", "every push")
    assert created is False
    assert (again.description, again.created_at) == ("every push", first.created_at)
    assert again.updated_at == first.created_at + 2000
    assert await store.get_topic("repo/herald") == again
    assert await store.get_topic("repo/other") is None


async def test_topics_are_listed_by_name_in_byte_order_each_with_its_subscribers(
    store: Store,
) -> None:
    for name in ["repo/b", "repo/a", "Team/x", "repo/a-b"]:
        await store.put_topic(name, f"the topic {name}")
    alice, bob = await agent_of(store, "alice"), await agent_of(store, "bob")
    assert await store.subscribe_topic(alice.id, "repo/*") is True
    assert await store.subscribe_topic(alice.id, "repo/a") is True  # matched twice: one agent
    assert await store.subscribe_topic(bob.id, "repo/a") is True
    assert await store.subscribe_topic(bob.id, "repo/a") is False
    listed = await store.list_topics()
    assert [(t.name, t.subscribers) for t in listed] == [
        ("Team/x", 0),
        ("repo/a", 2),
        ("repo/a-b", 1),
        ("repo/b", 1),
    ]


async def test_globs_match_as_event_type_globs_do_case_sensitive_with_star_and_question(
    store: Store,
) -> None:
    for name in ["repo/herald", "repo/Herald", "repo/her_ald", "repo/herxald", "rep/o"]:
        await store.put_topic(name, "a topic")
    alice = await agent_of(store, "alice")
    await store.subscribe_topic(alice.id, "repo/her?ald")
    await store.subscribe_topic(alice.id, "repo/h*")
    reached = {t.name for t in await store.list_topics() if t.subscribers}
    assert reached == {"repo/herald", "repo/her_ald", "repo/herxald"}
    # _ is no wildcard (as LIKE's would be): "repo/her_ald" matches no "repo/herXald" glob.
    bob = await agent_of(store, "bob")
    await store.subscribe_topic(bob.id, "repo/her_ald")
    matched = await store.topic_subscriptions(topic="repo/herxald")
    assert [(s.handle, s.pattern) for s in matched] == [
        ("alice", "repo/h*"),
        ("alice", "repo/her?ald"),
    ]


async def test_a_publish_to_a_topic_stores_one_event_for_each_subscriber_only(
    store: Store,
) -> None:
    await store.put_topic("repo/herald", "pushes")
    alice, bob, carol = [await agent_of(store, h) for h in ("alice", "bob", "carol")]
    await store.subscribe_topic(alice.id, "repo/herald")
    await store.subscribe_topic(alice.id, "repo/*")
    await store.subscribe_topic(bob.id, "repo/*")
    await store.subscribe_topic(carol.id, "team/*")
    published = await store.append_to_topic("repo/herald", EVENT)
    assert published is not None
    assert [(p.event.agent_id, p.event.seq, p.created) for p in published] == [
        (alice.id, 1, True),
        (bob.id, 1, True),
    ]
    assert len({p.event.id for p in published}) == 2
    for p in published:
        assert await store.get_event(p.event.id) == p.event
    assert (await store.get_agent(carol.id)).last_seq == 0  # type: ignore[union-attr]


async def test_each_copy_of_a_topic_publish_stores_every_field_as_it_answers_it(
    store: Store,
) -> None:
    # Copies share all their columns but id, agent and seq: each of those others is stored
    # once for all of them (PostgreSQL: one value each), and read back the same in every copy.
    await store.put_topic("repo/herald", "pushes")
    agents = [await agent_of(store, h) for h in ("alice", "bob", "carol")]
    for agent in agents:
        await store.subscribe_topic(agent.id, "repo/*")
    full = NewEvent(
        "", "build.failed", "red", {"b": [1, 2.5], "a": "\u00e9"}, None, 90.0,
        '{"b":[1,2.5],"a":"\u00e9"}', '{"type":"object","properties":{}}', sender="bot",
        priority=Priority.HIGH,
    )  # fmt: skip
    published = await store.append_to_topic("repo/herald", full)
    assert published is not None
    assert [p.event.agent_id for p in published] == [a.id for a in agents]
    for p in published:
        stored = await store.get_event(p.event.id)
        assert stored == p.event
        assert (stored.type, stored.text, stored.sender, stored.priority) == (
            "build.failed", "red", "bot", Priority.HIGH
        )  # fmt: skip
        assert stored.data == {"b": [1, 2.5], "a": "\u00e9"}
        assert stored.reply_schema == {"type": "object", "properties": {}}
        assert stored.expires_at == stored.created_at + 90_000


async def test_a_publish_to_an_undeclared_topic_stores_nothing_and_to_no_subscriber_none(
    store: Store,
) -> None:
    alice = await agent_of(store, "alice")
    await store.subscribe_topic(alice.id, "repo/*")
    assert await store.append_to_topic("repo/herald", EVENT) is None
    await store.put_topic("team/x", "nobody")
    assert await store.append_to_topic("team/x", EVENT) == []
    assert (await store.get_agent(alice.id)).last_seq == 0  # type: ignore[union-attr]


async def test_unsubscribed_agents_and_deleted_topics_and_agents_are_reached_no_more(
    store: Store,
) -> None:
    await store.put_topic("repo/herald", "pushes")
    alice, bob = await agent_of(store, "alice"), await agent_of(store, "bob")
    await store.subscribe_topic(alice.id, "repo/herald")
    await store.subscribe_topic(bob.id, "repo/*")
    assert await store.unsubscribe_topic(bob.id, "repo/*") is True
    assert await store.unsubscribe_topic(bob.id, "repo/*") is False
    assert [s.handle for s in await store.topic_subscriptions(topic="repo/herald")] == ["alice"]
    await store.subscribe_topic(bob.id, "repo/*")
    await store.delete_agent(bob.id)
    assert [s.handle for s in await store.topic_subscriptions()] == ["alice"]
    assert await store.delete_topic("repo/herald") is True
    assert await store.delete_topic("repo/herald") is False
    assert await store.topic_subscriptions(agent_id=alice.id) == []


async def test_a_dedupe_key_holds_for_each_subscriber_on_its_own(store: Store) -> None:
    await store.put_topic("repo/herald", "pushes")
    alice, bob = await agent_of(store, "alice"), await agent_of(store, "bob")
    await store.subscribe_topic(alice.id, "repo/herald")
    keyed = NewEvent("", "t", "x", None, "push-1", None, "null")
    first = await store.append_to_topic("repo/herald", keyed)
    await store.subscribe_topic(bob.id, "repo/herald")
    again = await store.append_to_topic("repo/herald", keyed)
    assert first is not None and again is not None
    assert [(p.event.agent_id, p.created) for p in again] == [(alice.id, False), (bob.id, True)]
    assert again[0].event.id == first[0].event.id


async def test_a_subscription_racing_publishes_gets_each_event_whole_or_not_at_all(
    store: Store,
) -> None:
    """Subscribers join while publishes go on: each publish reaches exactly the agents
    subscribed when it read them, and an agent that joined has every event after its first."""
    await store.put_topic("repo/herald", "pushes")
    agents = [await agent_of(store, f"a{n}") for n in range(20)]

    async def publish_all() -> list[set[str]]:
        reached = []
        for _ in range(20):
            published = await store.append_to_topic("repo/herald", EVENT)
            assert published is not None
            reached.append({p.event.agent_id for p in published})
        return reached

    async def subscribe_all() -> None:
        for agent in agents:
            await store.subscribe_topic(agent.id, "repo/herald")

    reached, _ = await asyncio.gather(publish_all(), subscribe_all())
    for before, after in itertools.pairwise(reached):
        assert before <= after  # a subscriber, once reached, is reached by every later publish
    for agent in agents:
        got = sum(agent.id in each for each in reached)
        assert (await store.get_agent(agent.id)).last_seq == got  # type: ignore[union-attr]


async def test_another_process_hears_of_a_topics_agents_in_few_notifications(
    postgres_database_url: str,
) -> None:
    # One notification names up to 200 agents: a publish to 401 wakes a listening process
    # with three, not 401 (each handled on its own there, and queued in PostgreSQL).
    heard: list[set[str]] = []
    all_heard = asyncio.Event()
    async with (
        await open_store(postgres_database_url) as writer,
        await open_store(postgres_database_url) as reader,
    ):
        await writer.put_topic("repo/herald", "pushes")
        agents = [await agent_of(writer, f"agent-{n:03d}") for n in range(401)]
        for agent in agents:
            await writer.subscribe_topic(agent.id, "repo/herald")
        ids = {agent.id for agent in agents}

        def hear(agent_ids: set[str]) -> None:
            heard.append(agent_ids)
            if set().union(*heard) >= ids:
                all_heard.set()

        await reader.listen(hear)
        assert await writer.append_to_topic("repo/herald", EVENT)
        async with asyncio.timeout(10):
            await all_heard.wait()
    assert set().union(*heard) == ids
    assert len(heard) == 3
