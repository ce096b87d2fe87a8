"""A PostgreSQL store in a schema of its own (``?schema=NAME``): herald's tables land there,
not in ``public``, and two schemas of one database are two separate hubs. The connection the
writer keeps is replaced once the server ends it."""

from __future__ import annotations

import asyncpg
import pytest

from herald import Hub
from herald.errors import InvalidInput, StoreUnavailable
from herald.store import store_from_url
from tests.waiting import until

pytestmark = pytest.mark.anyio


def with_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


async def test_herald_makes_and_keeps_its_tables_in_the_schema_named(
    postgres_database_url: str,
) -> None:
    async with Hub.from_url(with_schema(postgres_database_url, "herald_a")) as first:
        await first.create_agent("alice")
        await first.publish("alice", "t", "in schema a")
        async with Hub.from_url(with_schema(postgres_database_url, "herald_b")) as second:
            assert await second.list_agents() == []  # another hub altogether
    conn = await asyncpg.connect(postgres_database_url)
    try:
        schemas = await conn.fetch(
            "SELECT DISTINCT table_schema FROM information_schema.tables"
            " WHERE table_name = 'events'"
        )
        count = await conn.fetchval("SELECT count(*) FROM herald_a.events")
    finally:
        await conn.close()
    assert {row["table_schema"] for row in schemas} == {"herald_a", "herald_b"}
    assert count == 1


@pytest.mark.parametrize("schema", ["1abc", "a-b", "x;drop", "a" * 64, ""])
def test_a_schema_that_is_not_a_plain_name_is_refused(schema: str) -> None:
    with pytest.raises(InvalidInput, match="schema="):
        store_from_url(f"postgresql://postgres@127.0.0.1:5432/postgres?schema={schema}")


async def test_publishing_goes_on_once_the_server_ended_the_writer_s_connection(
    postgres_database_url: str,
) -> None:
    async def ended(pids: list[int]) -> bool:
        # The ended sessions, not every session of herald's: its listener opens a new one soon
        # after, and on a busy machine it may be back before a count of none is ever seen.
        still = await admin.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])", pids
        )
        return int(still) == 0

    async def publish_again() -> bool:
        try:
            await hub.publish("alice", "t", "after")
        except StoreUnavailable:  # the end of its connection was not seen yet: a pooled one's too
            return False
        return True

    admin = await asyncpg.connect(postgres_database_url)
    try:
        async with Hub.from_url(postgres_database_url) as hub:
            alice, _ = await hub.create_agent("alice")
            await hub.publish("alice", "t", "before")  # the writer holds a connection now
            pids = [
                row["pid"]
                for row in await admin.fetch(
                    "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND application_name = 'herald'"
                )
            ]
            assert pids  # the writer's connection among them
            await until(lambda: ended(pids), "herald's sessions to end")
            await until(publish_again, "a publish after its connection ended")
            texts = [e.text for e in (await hub.drain(alice, limit=10)).events]
    finally:
        await admin.close()
    assert texts == ["before", "after"]
