"""Claims that live as long as their process, on PostgreSQL: a webhook worker's claims are freed
by another process once the first is gone (its connection, and the advisory lock on it, ended)
for the grace period, and not before; a connection lost and made again is no death."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import pytest

from herald import open_store
from herald.store import Store
from tests.store.test_endpoints import publish, setup

pytestmark = pytest.mark.anyio

GRACE_MS = 3_000
LEASE_MS = 3_600_000
"""An hour: no claim here runs out of its own."""
WAIT_S = 20.0


@pytest.fixture
async def stores(postgres_database_url: str) -> AsyncIterator[Callable[[], Awaitable[Store]]]:
    """Opens stores on one database, each as a process of its own would (listening)."""
    opened: list[Store] = []

    async def open_one() -> Store:
        store = await open_store(postgres_database_url)
        await store.listen(lambda agents: None)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        await store.close()


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    async with asyncio.timeout(WAIT_S):
        while not await check():
            await asyncio.sleep(0.05)
    assert await check(), what


async def missing_since(url: str, claimant: str) -> int | None:
    conn = await asyncpg.connect(url)
    try:
        value = await conn.fetchval("SELECT missing_since FROM claimants WHERE id = $1", claimant)
        return int(value) if value is not None else None
    finally:
        await conn.close()


async def advisory_locks(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
        )
    finally:
        await conn.close()


async def test_a_killed_processs_claims_are_freed_after_the_grace_and_a_live_ones_never(
    stores: Callable[[], Awaitable[Store]], postgres_database_url: str
) -> None:
    killed, survivor = await stores(), await stores()
    await setup(survivor)
    first, second = await publish(survivor, "alice", 2)
    await survivor.schedule_deliveries(survivor.now(), 10)
    await killed.hold_claims_for("w-killed")
    await survivor.hold_claims_for("w-survivor")
    ((held_by_killed, *_),) = await killed.claim_deliveries("w-killed", 1, LEASE_MS)
    ((held_by_survivor, *_),) = await survivor.claim_deliveries("w-survivor", 1, LEASE_MS)
    assert (held_by_killed.event_id, held_by_survivor.event_id) == (first, second)
    assert await survivor.free_claims_of_the_gone(0) == 0  # both alive: nothing to free
    await killed.close()  # its connection ends, as at SIGKILL: nothing frees its claims

    async def seen_gone() -> bool:
        await survivor.free_claims_of_the_gone(GRACE_MS)
        return await missing_since(postgres_database_url, "w-killed") is not None

    await until(seen_gone, "the killed process's lock is seen gone")
    assert await survivor.free_claims_of_the_gone(GRACE_MS) == 0  # within the grace
    assert await survivor.claim_deliveries("w-survivor", 10, LEASE_MS) == []
    freed: list[int] = []

    async def grace_over() -> bool:
        freed.append(await survivor.free_claims_of_the_gone(GRACE_MS))
        return sum(freed) > 0

    await until(grace_over, "the killed process's claims are freed once the grace is over")
    assert sum(freed) == 1
    ((taken, *_),) = await survivor.claim_deliveries("w-survivor", 10, LEASE_MS)
    assert taken.event_id == first  # the survivor's own claim, older, was never freed
    assert await survivor.free_claims_of_the_gone(0) == 0  # forgotten with its claims


async def test_a_connection_lost_and_made_again_is_no_death(
    stores: Callable[[], Awaitable[Store]], postgres_database_url: str
) -> None:
    worker, looker = await stores(), await stores()
    await setup(looker)
    await publish(looker, "alice", 1)
    await looker.schedule_deliveries(looker.now(), 10)
    await worker.hold_claims_for("w1")
    before = worker.holding("w1")
    assert before is not None
    assert len(await worker.claim_deliveries("w1", 10, LEASE_MS)) == 1
    assert await advisory_locks(postgres_database_url) == 1

    admin = await asyncpg.connect(postgres_database_url)
    try:  # every listening connection is cut (a network blip, a proxy restarting)
        await admin.execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
            " WHERE application_name = 'herald-listen' AND datname = current_database()"
        )
    finally:
        await admin.close()
    await looker.free_claims_of_the_gone(GRACE_MS)  # may see it gone: the grace starts

    async def locked_again() -> bool:
        return await advisory_locks(postgres_database_url) == 1

    await until(locked_again, "the worker's listener connects again and takes its lock")
    after = worker.holding("w1")
    assert after is not None and after != before  # claims made before may have been freed
    assert await looker.free_claims_of_the_gone(0) == 0  # its lock is back: not gone
    assert await missing_since(postgres_database_url, "w1") is None
    assert await looker.claim_deliveries("w2", 10, LEASE_MS) == []  # still w1's


async def test_a_worker_that_lets_go_is_forgotten_and_its_lock_released(
    stores: Callable[[], Awaitable[Store]], postgres_database_url: str
) -> None:
    store = await stores()
    await store.hold_claims_for("w1")
    assert await advisory_locks(postgres_database_url) == 1
    await store.let_go_of_claimant("w1")
    assert await advisory_locks(postgres_database_url) == 0
    assert await missing_since(postgres_database_url, "w1") is None
    conn = await asyncpg.connect(postgres_database_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM claimants") == 0
    finally:
        await conn.close()
