"""A PostgreSQL store in a schema of its own (``?schema=NAME``): herald's tables land there,
not in ``public``, and two schemas of one database are two separate hubs."""

from __future__ import annotations

import asyncpg
import pytest

from herald import Hub
from herald.errors import InvalidInput
from herald.store import store_from_url

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
