"""The session half of the store contract (presence across processes), on every backend."""

from __future__ import annotations

import pytest

from herald import open_store
from herald.errors import NotFound
from herald.ids import new_id
from herald.models import Agent, Endpoint, Kind, NewEvent, SessionRecord
from herald.store import Store
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio

TTL_MS = 30_000


async def add_agent(store: Store, handle: str = "alice") -> Agent:
    agent = Agent(new_id("agt_"), handle, f"hash-{handle}", store.now())
    await store.create_agent(agent)
    return agent


def session(
    store: Store, agent: Agent, *, process: str = "prc_1", can_push: bool = True
) -> SessionRecord:
    now = store.now()
    return SessionRecord(
        id=new_id("ses_"),
        agent_id=agent.id,
        process=process,
        transport="streamable-http",
        era="legacy",
        connected_at=now,
        seen_at=now,
        expires_at=now + TTL_MS,
        client_name="claude-code",
        client_version="2.1.0",
        capabilities_json='{"channel": true, "stream": false}',
        can_push=can_push,
    )


async def test_a_put_session_is_live_with_every_field_as_put(store: Store) -> None:
    agent = await add_agent(store)
    record = session(store, agent)
    await store.put_session(record)
    (live,) = await store.live_sessions(agent.id)
    assert live.capabilities == {"channel": True, "stream": False}
    assert live == SessionRecord(**{**vars(record), "capabilities_json": live.capabilities_json})
    assert live.can_push is True
    assert live.to_json()["client"] == {"name": "claude-code", "version": "2.1.0"}


async def test_a_session_with_no_client_info_and_no_push_reads_back_so(store: Store) -> None:
    agent = await add_agent(store)
    now = store.now()
    bare = SessionRecord(new_id("ses_"), agent.id, "prc_1", "sse", "modern", now, now, now + 1)
    await store.put_session(bare)
    assert await store.live_sessions(agent.id) == [bare]


async def test_put_again_replaces_the_record(store: Store, clock: ManualClock) -> None:
    agent = await add_agent(store)
    first = session(store, agent)
    await store.put_session(first)
    clock.advance(5)
    moved = SessionRecord(**{**vars(first), "process": "prc_2", "seen_at": store.now()})
    await store.put_session(moved)
    (live,) = await store.live_sessions(agent.id)
    assert (live.process, live.seen_at) == ("prc_2", store.now())


async def test_expiry_hides_a_session_without_any_wait(store: Store, clock: ManualClock) -> None:
    agent = await add_agent(store)
    await store.put_session(session(store, agent))
    clock.advance(TTL_MS / 1000 - 0.001)
    assert len(await store.live_sessions(agent.id)) == 1
    clock.advance(0.001)
    assert await store.live_sessions(agent.id) == []


async def test_refresh_keeps_the_sessions_of_a_process_live(
    store: Store, clock: ManualClock
) -> None:
    agent = await add_agent(store)
    kept = [session(store, agent), session(store, agent)]
    dropped = session(store, agent, process="prc_dead")
    for record in [*kept, dropped]:
        await store.put_session(record)
    clock.advance(20)
    refreshed = await store.refresh_sessions([s.id for s in kept], store.now() + TTL_MS)
    assert refreshed == 2
    clock.advance(20)
    live = await store.live_sessions(agent.id)
    assert sorted(s.id for s in live) == sorted(s.id for s in kept)
    assert all(s.expires_at == store.now() - 20_000 + TTL_MS for s in live)


async def test_expire_deletes_expired_sessions_and_refresh_then_says_so(
    store: Store, clock: ManualClock
) -> None:
    agent = await add_agent(store)
    record = session(store, agent)
    await store.put_session(record)
    clock.advance(TTL_MS / 1000)
    assert await store.expire() == 0  # sessions are not counted as events
    assert await store.refresh_sessions([record.id], store.now() + TTL_MS) == 0
    assert await store.live_sessions(agent.id) == []
    await store.put_session(record)  # put again: live once more
    await store.refresh_sessions([record.id], store.now() + TTL_MS)
    assert [s.id for s in await store.live_sessions(agent.id)] == [record.id]


async def test_expire_keeps_live_sessions(store: Store, clock: ManualClock) -> None:
    agent = await add_agent(store)
    record = session(store, agent)
    await store.put_session(record)
    clock.advance(1)
    await store.expire()
    assert await store.refresh_sessions([record.id], store.now() + TTL_MS) == 1


async def test_remove_forgets_a_session(store: Store) -> None:
    agent = await add_agent(store)
    gone, kept = session(store, agent), session(store, agent)
    await store.put_session(gone)
    await store.put_session(kept)
    assert await store.remove_session(gone.id) is True
    assert await store.remove_session(gone.id) is False
    assert [s.id for s in await store.live_sessions(agent.id)] == [kept.id]


async def test_live_sessions_are_the_agents_own_oldest_first(
    store: Store, clock: ManualClock
) -> None:
    alice, bob = await add_agent(store, "alice"), await add_agent(store, "bob")
    first = session(store, alice)
    clock.advance(1)
    second = session(store, alice, process="prc_2")
    await store.put_session(second)
    await store.put_session(first)
    await store.put_session(session(store, bob))
    assert [s.id for s in await store.live_sessions(alice.id)] == [first.id, second.id]


async def test_deleting_an_agent_removes_its_sessions(store: Store) -> None:
    agent = await add_agent(store)
    record = session(store, agent)
    await store.put_session(record)
    await store.delete_agent(agent.id)
    assert await store.refresh_sessions([record.id], store.now() + TTL_MS) == 0
    assert await store.live_sessions(agent.id) == []


async def test_a_session_of_an_unknown_agent_is_refused(store: Store) -> None:
    ghost = Agent(new_id("agt_"), "ghost", "hash-ghost", store.now())
    with pytest.raises(NotFound):
        await store.put_session(session(store, ghost))


async def test_another_store_on_the_same_database_sees_the_sessions(
    store_url: str, store: Store, clock: ManualClock
) -> None:
    agent = await add_agent(store)
    record = session(store, agent)
    await store.put_session(record)
    other = await open_store(store_url, clock=clock)
    try:
        assert [s.id for s in await other.live_sessions(agent.id)] == [record.id]
        await store.remove_session(record.id)
        assert await other.live_sessions(agent.id) == []
    finally:
        await other.close()


# Webhook scheduling holds back agents that a live session can push to, in any process.


async def with_webhook(store: Store, handle: str) -> Agent:
    agent = await add_agent(store, handle)
    await store.put_endpoint(
        Endpoint(new_id("end_"), agent.id, Kind.WEBHOOK, "https://example.com/h", "s", store.now())
    )
    await store.append([NewEvent(to=handle, type="t", text="hello")])
    return agent


async def test_scheduling_gives_a_pushable_session_its_grace(
    store: Store, clock: ManualClock
) -> None:
    await with_webhook(store, "absent")
    pushed = await with_webhook(store, "pushed")
    polling = await with_webhook(store, "polling")
    await store.put_session(session(store, pushed))
    await store.put_session(session(store, polling, can_push=False))
    assert await store.schedule_deliveries(store.now(), 100, push_grace_ms=10_000) == 2
    clock.advance(9.999)
    assert await store.schedule_deliveries(store.now(), 100, push_grace_ms=10_000) == 0
    clock.advance(0.001)
    assert await store.schedule_deliveries(store.now(), 100, push_grace_ms=10_000) == 1


async def test_scheduling_ignores_an_expired_pushable_session(
    store: Store, clock: ManualClock
) -> None:
    agent = await with_webhook(store, "alice")
    await store.put_session(session(store, agent))
    clock.advance(TTL_MS / 1000)  # its process stopped refreshing it
    assert await store.schedule_deliveries(store.now(), 100, push_grace_ms=600_000) == 1


async def test_scheduling_without_a_grace_ignores_sessions(store: Store) -> None:
    agent = await with_webhook(store, "alice")
    await store.put_session(session(store, agent))
    assert await store.schedule_deliveries(store.now(), 100) == 1
