"""Claims that live as long as their process, on PostgreSQL: a webhook worker's claims are freed
by another process once the first is gone (its connection, and the advisory lock on it, ended)
for the grace period, and not before; a connection lost and made again is no death."""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import pytest

from herald import open_store
from herald.store import Store
from tests.store.test_endpoints import publish, setup
from tests.waiting import until

pytestmark = pytest.mark.anyio

GRACE_MS = 3_000
LEASE_MS = 3_600_000
"""An hour: no claim here runs out of its own."""


@pytest.fixture
async def stores(postgres_database_url: str) -> AsyncIterator[Callable[..., Awaitable[Store]]]:
    """Opens stores on one database, each as a process of its own would (listening)."""
    opened: list[Store] = []

    async def open_one(url: str = postgres_database_url) -> Store:
        store = await open_store(url)
        await store.listen(lambda agents: None)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        await store.close()


async def due(store: Store, count: int) -> list[str]:
    """``count`` events to a new agent with a webhook endpoint, their deliveries due now."""
    await setup(store)
    published = await publish(store, "alice", count)
    await store.schedule_deliveries(store.now(), 10)
    return published


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
    stores: Callable[..., Awaitable[Store]], postgres_database_url: str
) -> None:
    killed, survivor = await stores(), await stores()
    first, second = await due(survivor, 2)
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
    stores: Callable[..., Awaitable[Store]], postgres_database_url: str
) -> None:
    worker, looker = await stores(), await stores()
    await due(looker, 1)
    await worker.hold_claims_for("w1")
    before = worker.holding("w1")
    assert before is not None
    assert len(await worker.claim_deliveries("w1", 10, LEASE_MS)) == 1
    assert await advisory_locks(postgres_database_url) == 1

    # Every listening connection is cut (a network blip, a proxy restarting).
    await cut_listening_connections(postgres_database_url)
    await looker.free_claims_of_the_gone(GRACE_MS)  # may see it gone: the grace starts

    async def locked_again() -> bool:
        return await advisory_locks(postgres_database_url) == 1

    await until(locked_again, "the worker's listener connects again and takes its lock")
    assert worker.holding("w1") is None  # until it is known again in this connection
    await worker.hold_claims_for("w1")  # as the worker's next round does
    after = worker.holding("w1")
    assert after is not None and after != before  # claims made before may have been freed
    assert await looker.free_claims_of_the_gone(0) == 0  # its lock is back: not gone
    assert await missing_since(postgres_database_url, "w1") is None
    assert await looker.claim_deliveries("w2", 10, LEASE_MS) == []  # still w1's


async def test_a_worker_that_lets_go_is_forgotten_and_its_lock_released(
    stores: Callable[..., Awaitable[Store]], postgres_database_url: str
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


async def test_a_lock_an_earlier_connection_still_holds_is_traded_for_a_new_key(
    stores: Callable[..., Awaitable[Store]], postgres_database_url: str
) -> None:
    store = await stores()
    await due(store, 1)
    await store.hold_claims_for("w1")
    assert len(await store.claim_deliveries("w1", 10, LEASE_MS)) == 1
    old_key = await lock_key(postgres_database_url, "w1")
    squatter = await asyncpg.connect(postgres_database_url)
    try:
        await cut_listening_connections(postgres_database_url)
        # The server still keeps a session of this process that holds the key (one it has not
        # yet seen gone): here, another connection takes it before the listener is back.
        assert await squatter.fetchval("SELECT pg_try_advisory_lock($1)", old_key)

        async def held_again() -> bool:
            await store.hold_claims_for("w1")  # what the worker's round does
            return store.holding("w1") is not None

        await until(held_again, "the claimant holds its claims again, under a new key")
        new_key = await lock_key(postgres_database_url, "w1")
        assert new_key != old_key
        assert await advisory_locks(postgres_database_url) == 2  # the squatter's, and the new
        assert await store.claim_deliveries("w2", 10, LEASE_MS) == []  # still w1's
    finally:
        await squatter.close()


async def test_a_connection_gone_without_a_word_holds_nothing_and_is_made_again(
    stores: Callable[..., Awaitable[Store]], postgres_database_url: str
) -> None:
    proxy = await HidingProxy.start()
    try:
        store = await stores(proxy.url(postgres_database_url))
        await due(store, 1)
        await store.hold_claims_for("w1")
        before = store.holding("w1")
        assert before is not None
        assert len(await store.claim_deliveries("w1", 10, LEASE_MS)) == 1
        assert proxy.listening, "the proxy must see the listening connection to hide its end"
        proxy.hide_the_end_of_listening_connections()
        await cut_listening_connections(postgres_database_url)
        assert store.holding("w1") == before  # the client has not been told
        # The server's session is over and its lock with it; the client has not been told.
        # Its own look at others must not take itself for dead:
        assert await store.free_claims_of_the_gone(0) == 0
        assert await store.claim_deliveries("w2", 10, LEASE_MS) == []

        async def made_again() -> bool:
            await store.hold_claims_for("w1")
            return store.holding("w1") not in (None, before)

        await until(made_again, "the listener finds its connection dead and makes another")
        assert await advisory_locks(postgres_database_url) == 1
    finally:
        await proxy.close()


async def lock_key(url: str, claimant: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT lock_key FROM claimants WHERE id = $1", claimant))
    finally:
        await conn.close()


async def cut_listening_connections(url: str) -> None:
    """Every listening connection of herald on ``url``'s database ends, server side."""
    admin = await asyncpg.connect(url)
    try:
        await admin.execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
            " WHERE application_name = 'herald-listen' AND datname = current_database()"
        )
    finally:
        await admin.close()


class HidingProxy:
    """A TCP proxy to PostgreSQL that can hide, from the listening connections open at that
    moment, that their server side ended: as a failover or a NAT's timeout can. Connections
    made later pass as they are."""

    def __init__(self) -> None:
        self.listening: list[dict[str, bool]] = []
        self.server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self.upstream = ("127.0.0.1", 5432)

    @classmethod
    async def start(cls) -> HidingProxy:
        proxy = cls()
        proxy.server = await asyncio.start_server(proxy._pass, "127.0.0.1", 0)
        return proxy

    def url(self, url: str) -> str:
        """``url`` through this proxy (which then connects where ``url`` says)."""
        assert self.server is not None
        parts = urllib.parse.urlsplit(url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 5432)
        port = self.server.sockets[0].getsockname()[1]
        who = parts.netloc.rpartition("@")[0]
        where = f"{who}@127.0.0.1:{port}" if who else f"127.0.0.1:{port}"
        return urllib.parse.urlunsplit(parts._replace(netloc=where))

    def hide_the_end_of_listening_connections(self) -> None:
        for pair in self.listening:
            pair["hidden"] = True

    async def close(self) -> None:
        for writer in self._writers:
            writer.close()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _pass(
        self, from_client: asyncio.StreamReader, to_client: asyncio.StreamWriter
    ) -> None:
        from_server, to_server = await asyncio.open_connection(*self.upstream)
        self._writers += [to_client, to_server]
        pair = {"hidden": False}

        async def up() -> None:
            opening = 3  # the startup message (after an SSL request, maybe) names the client
            while data := await from_client.read(65536):
                if opening and b"herald-listen" in data:
                    self.listening.append(pair)
                opening = max(opening - 1, 0)
                if not pair["hidden"]:
                    to_server.write(data)
            to_server.close()

        async def down() -> None:
            while data := await from_server.read(65536):
                if not pair["hidden"]:
                    to_client.write(data)
            if not pair["hidden"]:
                to_client.close()  # else the client is never told: the socket stays open

        await asyncio.gather(up(), down(), return_exceptions=True)
