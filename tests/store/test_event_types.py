"""The event-type half of the store contract (the catalogue the operator declares), on every
backend; and, on PostgreSQL, the word every process sharing the store gets of a change."""

from __future__ import annotations

import asyncio
import json

import pytest

from herald import open_store
from herald.store import Store
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}


async def test_a_put_type_reads_back_as_put_and_is_new_once(store: Store) -> None:
    declared, created = await store.put_event_type(
        "build.failed", "a build failed", json.dumps(SCHEMA)
    )
    assert created is True
    assert declared.payload_schema == SCHEMA
    assert declared.created_at == declared.updated_at == store.now()
    assert await store.get_event_type("build.failed") == declared
    assert await store.get_event_type("build.passed") is None
    assert declared.to_json() == {
        "name": "build.failed",
        "description": "a build failed",
        "payload_schema": SCHEMA,
        "created_at": "2027-01-15T08:00:00.000Z",
        "updated_at": "2027-01-15T08:00:00.000Z",
    }


async def test_a_put_again_replaces_the_type_and_keeps_when_it_was_made(
    store: Store, clock: ManualClock
) -> None:
    first, _ = await store.put_event_type("build.failed", "a build failed", json.dumps(SCHEMA))
    clock.advance(3)
    again, created = await store.put_event_type("build.failed", "it broke", None)
    assert created is False
    assert (again.description, again.payload_schema) == ("it broke", None)
    assert again.created_at == first.created_at
    assert again.updated_at == first.created_at + 3000
    assert await store.get_event_type("build.failed") == again
    assert await store.list_event_types() == [again]


async def test_types_are_listed_by_name_in_byte_order(store: Store) -> None:
    names = ["b", "B", "a_x", "a.x", "a-x", "a:x", "a"]
    for name in names:
        await store.put_event_type(name, f"the type {name}", None)
    assert [declared.name for declared in await store.list_event_types()] == sorted(names)


async def test_a_deleted_type_is_gone_and_deleting_it_again_says_so(store: Store) -> None:
    await store.put_event_type("build.failed", "a build failed", None)
    await store.put_event_type("build.passed", "a build passed", None)
    assert await store.delete_event_type("build.failed") is True
    assert await store.delete_event_type("build.failed") is False
    assert await store.get_event_type("build.failed") is None
    assert [declared.name for declared in await store.list_event_types()] == ["build.passed"]


async def test_another_store_on_the_same_database_is_told_of_each_change(
    postgres_database_url: str,
) -> None:
    changed = asyncio.Event()
    heard: list[set[str]] = []
    async with (
        await open_store(postgres_database_url) as writer,
        await open_store(postgres_database_url) as reader,
    ):
        await reader.listen(heard.append, changed.set)
        for change in (
            writer.put_event_type("build.failed", "a build failed", None),
            writer.put_event_type("build.failed", "it broke", json.dumps(SCHEMA)),
            writer.delete_event_type("build.failed"),
        ):
            changed.clear()
            await change
            async with asyncio.timeout(10):
                await changed.wait()
    assert heard == []  # no events were published: the catalogue has a channel of its own
