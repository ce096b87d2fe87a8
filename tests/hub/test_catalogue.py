"""The event-type catalogue through the hub (``hub.event_types``): declaring types, the check of
each published event's data against its type's payload schema, and how every process sharing
the store comes to see a change (at once here; by NOTIFY on PostgreSQL; else within 5 s)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from herald import Hub, InvalidInput, NotFound, TooLarge
from herald.hub.catalogue import Catalogue
from herald.inputs.events import parse_new_event
from herald.store import open_store
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio

ITEMS = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"count": {"type": "integer"}},
                "required": ["count"],
            },
        }
    },
    "required": ["items"],
}
FAILED_AT_COUNT = (
    "event.data.items[0].count: 'x' is not of type 'integer'"
    " (event type build.failed declares a payload_schema)"
)


@pytest.fixture
async def hub(tmp_path: Path, clock: ManualClock) -> AsyncIterator[Hub]:
    async with Hub.from_url(f"sqlite:///{tmp_path / 'h.db'}", clock=clock) as opened:
        yield opened


@pytest.fixture
async def here(store_url: str, clock: ManualClock) -> AsyncIterator[Hub]:
    async with Hub(await open_store(store_url, clock=clock)) as opened:
        yield opened


@pytest.fixture
async def elsewhere(store_url: str, clock: ManualClock) -> AsyncIterator[Hub]:
    """Another process's hub on the same store."""
    async with Hub(await open_store(store_url, clock=clock)) as opened:
        yield opened


def counter(hub: Hub) -> list[int]:
    """A list that grows by one at each call of the hub's catalogue listeners."""
    calls: list[int] = []
    hub.event_types.add_listener(lambda: calls.append(len(calls) + 1))
    return calls


def items(count: Any) -> dict[str, Any]:
    return {"items": [{"count": count}]}


async def last_seq(hub: Hub, handle: str = "alice") -> int:
    (agent,) = [agent for agent in await hub.list_agents() if agent.handle == handle]
    return agent.last_seq


# Declaring types


async def test_a_type_is_declared_read_listed_replaced_and_deleted(
    hub: Hub, clock: ManualClock
) -> None:
    declared, created = await hub.event_types.put("build.failed", "a build failed", ITEMS)
    assert created is True and declared.payload_schema == ITEMS
    assert await hub.event_types.get("build.failed") == declared
    clock.advance(1)
    replaced, created = await hub.event_types.put("build.failed", "it broke", None)
    assert created is False and replaced.payload_schema is None
    assert replaced.created_at == declared.created_at < replaced.updated_at
    await hub.event_types.put("a.first", "sorted before", None)
    assert [t.name for t in await hub.event_types.list()] == ["a.first", "build.failed"]
    await hub.event_types.delete("build.failed")
    with pytest.raises(NotFound, match=r"'build\.failed'"):
        await hub.event_types.get("build.failed")
    with pytest.raises(NotFound, match=r"'build\.failed'"):
        await hub.event_types.delete("build.failed")


@pytest.mark.parametrize("name", ["herald.event", "Herald.anything", "reply.received"])
async def test_herald_s_own_types_cannot_be_declared(hub: Hub, name: str) -> None:
    with pytest.raises(InvalidInput, match=f"event type name '{name}' is reserved"):
        await hub.event_types.put(name, "mine", None)
    assert await hub.event_types.list() == []


@pytest.mark.parametrize(
    ("name", "description", "schema", "fragment"),
    [
        ("has space", "x", None, "event type name 'has space' must be 1-128 characters"),
        ("", "x", None, "event type name '' must be"),
        ("t", "", None, "event_type.description must be a string of 1-2000 characters"),
        ("t", "x" * 2001, None, "event_type.description must be a string of 1-2000"),
        ("t", "nul \x00", None, "event_type.description holds a NUL character"),
        ("t", "x", {"type": "nope"}, "event_type.payload_schema.type is not valid JSON Schema"),
        ("t", "x", {"$ref": "https://example.com/x"}, "points outside it"),
        ("t", "x", True, "event_type.payload_schema must be a JSON Schema (draft 2020-12) object"),
    ],
)
async def test_a_bad_declaration_is_refused_by_name_and_changes_nothing(
    hub: Hub, name: str, description: str, schema: Any, fragment: str
) -> None:
    calls = counter(hub)
    with pytest.raises(InvalidInput) as refused:
        await hub.event_types.put(name, description, schema)
    assert fragment in refused.value.message
    assert await hub.event_types.list() == [] and calls == []


async def test_a_schema_over_64_kib_is_too_large(hub: Hub) -> None:
    with pytest.raises(TooLarge, match="payload_schema is"):
        await hub.event_types.put("t", "x", {"description": "x" * 70_000})


async def test_listeners_are_called_after_each_change_until_removed(hub: Hub) -> None:
    calls: list[str] = []

    def listener() -> None:
        calls.append("changed")

    hub.event_types.add_listener(listener)
    await hub.event_types.put("build.failed", "a build failed", None)
    await hub.event_types.put("build.failed", "it broke", ITEMS)
    await hub.event_types.delete("build.failed")
    assert len(calls) == 3
    hub.event_types.remove_listener(listener)
    await hub.event_types.put("build.failed", "again", None)
    assert len(calls) == 3


# Publishing against the catalogue


async def test_data_not_valid_against_its_types_schema_is_refused_naming_the_path(
    hub: Hub,
) -> None:
    await hub.create_agent("alice")
    await hub.event_types.put("build.failed", "a build failed", ITEMS)
    with pytest.raises(InvalidInput) as refused:
        await hub.publish("alice", "build.failed", "broke", data=items("x"))
    assert refused.value.message == FAILED_AT_COUNT
    with pytest.raises(InvalidInput, match=r"event.data: 'items' is a required property"):
        await hub.publish("alice", "build.failed", "broke", data={})
    with pytest.raises(InvalidInput, match=r"event.data: None is not of type 'object'"):
        await hub.publish("alice", "build.failed", "broke")
    assert await last_seq(hub) == 0
    published = await hub.publish("alice", "build.failed", "broke", data=items(3))
    assert published.created and published.event.data == items(3)


async def test_a_batch_with_one_refused_event_stores_none_and_names_its_index(hub: Hub) -> None:
    await hub.create_agent("alice")
    await hub.event_types.put("build.failed", "a build failed", ITEMS)
    batch = [
        parse_new_event({"to": "alice", "type": "build.failed", "text": "ok", "data": items(1)}),
        parse_new_event({"to": "alice", "type": "note", "text": "free", "data": {"any": 1}}),
        parse_new_event({"to": "alice", "type": "build.failed", "text": "no", "data": items("x")}),
    ]
    with pytest.raises(InvalidInput, match=r"^events\[2\]\.data\.items\[0\]\.count: 'x' is not"):
        await hub.publish_many(batch)
    assert await last_seq(hub) == 0


async def test_an_agents_message_is_checked_too(hub: Hub) -> None:
    sender, _ = await hub.create_agent("bob")
    await hub.create_agent("alice")
    await hub.event_types.put("build.failed", "a build failed", ITEMS)
    with pytest.raises(InvalidInput, match=r"^message\.data\.items\[0\]\.count"):
        await hub.send_message(sender, "alice", "broke", items("x"), type="build.failed")
    assert await last_seq(hub) == 0


async def test_types_undeclared_or_declared_without_a_schema_publish_as_before(hub: Hub) -> None:
    await hub.create_agent("alice")
    await hub.event_types.put("build.failed", "a build failed", ITEMS)
    await hub.event_types.put("build.passed", "a build passed", None)
    for kind in ("build.passed", "deploy.done", "Build.failed"):
        assert (await hub.publish("alice", kind, "x", data=items("not a count"))).created
    assert await last_seq(hub) == 3


async def test_each_change_made_here_applies_to_the_next_publish(hub: Hub) -> None:
    await hub.create_agent("alice")
    await hub.publish("alice", "build.failed", "before", data=items("x"))
    await hub.event_types.put("build.failed", "a build failed", ITEMS)
    with pytest.raises(InvalidInput, match="is not of type 'integer'"):
        await hub.publish("alice", "build.failed", "declared", data=items("x"))
    stricter = {**ITEMS, "properties": {"items": {"type": "array", "maxItems": 0}}}
    await hub.event_types.put("build.failed", "none at all", stricter)
    with pytest.raises(InvalidInput, match=r"event.data.items: .* is expected to be empty"):
        await hub.publish("alice", "build.failed", "replaced", data=items(3))
    await hub.event_types.delete("build.failed")
    assert (await hub.publish("alice", "build.failed", "deleted", data=items("x"))).created


@pytest.mark.parametrize(
    ("schema", "runaway"),
    [
        ({"type": "string", "pattern": "^(a|a)+$"}, "a" * 26 + "!"),
        ({"type": "array", "uniqueItems": True}, [{"n": n} for n in range(3000)]),
    ],
)
async def test_a_check_that_runs_away_is_refused_in_time_while_the_hub_answers_others(
    hub: Hub, schema: dict[str, Any], runaway: Any
) -> None:
    await hub.create_agent("alice")
    catalogue = Catalogue(hub.store, check_timeout_s=0.1)
    await catalogue.open()
    try:
        await catalogue.put("word.said", "a word", {"properties": {"word": schema}})
        batch = [
            parse_new_event({"to": "alice", "type": "word.said", "text": "ok", "data": {}}),
            parse_new_event(
                {"to": "alice", "type": "word.said", "text": "x", "data": {"word": runaway}}
            ),
        ]
        checking = asyncio.create_task(catalogue.check(batch))
        assert (await hub.publish("alice", "note", "meanwhile")).created
        assert not checking.done()
        with pytest.raises(InvalidInput) as refused:
            async with asyncio.timeout(30):
                await checking
        assert refused.value.message == (
            "events[1].data: the event type word.said's payload_schema took over 0.1 s to check"
            " this data: simplify the schema (patterns, uniqueItems) or the data"
        )
        await catalogue.check(batch[:1])
        with pytest.raises(InvalidInput, match=r"^event\.data\.word: 3 is not of type"):
            await catalogue.check(
                [
                    parse_new_event(
                        {"to": "alice", "type": "word.said", "text": "x", "data": {"word": 3}}
                    )
                ]
            )
    finally:
        await catalogue.close()


# Other processes sharing the store


async def test_a_hub_on_the_same_postgres_database_hears_each_change_at_once(
    postgres_database_url: str, clock: ManualClock
) -> None:
    async with (
        Hub(await open_store(postgres_database_url, clock=clock)) as here,
        Hub(await open_store(postgres_database_url, clock=clock)) as elsewhere,
    ):
        changed = asyncio.Event()
        elsewhere.event_types.add_listener(changed.set)
        await here.create_agent("alice")
        await here.event_types.put("build.failed", "a build failed", ITEMS)
        async with asyncio.timeout(10):
            await changed.wait()
        assert [t.name for t in await elsewhere.event_types.list()] == ["build.failed"]
        with pytest.raises(InvalidInput, match="is not of type 'integer'"):
            await elsewhere.publish("alice", "build.failed", "x", data=items("x"))
        changed.clear()
        await here.event_types.delete("build.failed")
        async with asyncio.timeout(10):
            await changed.wait()
        assert await elsewhere.event_types.list() == []
        assert (await elsewhere.publish("alice", "build.failed", "x", data=items("x"))).created


async def silence_the_catalogue_channel(store_url: str) -> None:
    """Make PostgreSQL tell no one of a change (as if the notification were lost)."""
    if store_url.startswith("postgresql"):
        conn = await asyncpg.connect(store_url)
        try:
            await conn.execute("ALTER TABLE event_types DISABLE TRIGGER event_types_notify")
        finally:
            await conn.close()


async def test_a_change_no_one_heard_of_is_read_once_the_copy_is_5_s_old(
    store_url: str, here: Hub, elsewhere: Hub, clock: ManualClock
) -> None:
    await silence_the_catalogue_channel(store_url)
    calls = counter(elsewhere)
    await here.create_agent("alice")
    await here.event_types.put("build.failed", "a build failed", ITEMS)
    # Until its copy is 5 s old, the other hub publishes by what it read before.
    assert (await elsewhere.publish("alice", "build.failed", "x", data=items("x"))).created
    assert calls == []
    clock.advance(5)
    with pytest.raises(InvalidInput, match="is not of type 'integer'"):
        await elsewhere.publish("alice", "build.failed", "x", data=items("x"))
    assert calls == [1]


async def test_the_upkeep_reads_a_copy_5_s_old_again_so_its_listeners_learn_of_a_change(
    store_url: str, here: Hub, elsewhere: Hub, clock: ManualClock
) -> None:
    await silence_the_catalogue_channel(store_url)
    calls = counter(elsewhere)
    await here.event_types.put("build.failed", "a build failed", None)
    await elsewhere.maintain_once()
    assert calls == []
    clock.advance(5)
    await elsewhere.maintain_once()
    assert calls == [1]
    assert [t.name for t in await elsewhere.event_types.list()] == ["build.failed"]


async def test_publishes_are_counted_under_the_classes_of_declared_types_and_heralds_own(
    hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert hub.event_types.type_classes == {"reply", "permission", "herald"}
    await hub.event_types.put("deploy.finished", "a deploy is done", None)
    await hub.event_types.put("page", "someone is paged", None)
    assert hub.event_types.type_classes == {"reply", "permission", "herald", "deploy", "page"}
    monkeypatch.setattr("herald.hub.catalogue.MAX_TYPE_CLASSES", 1)  # a long catalogue is cut
    await hub.event_types.put("zebra.crossed", "z", None)
    assert hub.event_types.type_classes == {"reply", "permission", "herald", "deploy"}
