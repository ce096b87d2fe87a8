"""The publisher-key part of the store contract, on every backend: a key is kept with its
scopes and limits, found by its hash, listed oldest first, and gone once revoked; a store made
before keys had senders gives them what they could do before, within their handles."""

from __future__ import annotations

import json
import sqlite3

import asyncpg
import pytest

from herald import open_store
from herald.ids import new_id
from herald.keys import PUBLISHER_PREFIX, hash_key, new_key
from herald.models import PublisherKey
from herald.store import Store, migrations
from herald.store.postgres import schema as postgres_schema
from herald.store.sqlite import schema as sqlite_schema

pytestmark = pytest.mark.anyio


def publisher_key(
    store: Store,
    name: str,
    handles: list[str] | None = None,
    types: list[str] | None = None,
    senders: tuple[str, ...] = (),
) -> tuple[PublisherKey, str]:
    key = new_key(PUBLISHER_PREFIX)
    record = PublisherKey(
        new_id("key_"),
        name,
        hash_key(key),
        json.dumps(["publish"]),
        None if handles is None else json.dumps(handles),
        None if types is None else json.dumps(types),
        store.now(),
        json.dumps(list(senders)),
    )
    return record, key


async def test_a_key_is_found_by_its_hash_as_it_was_stored(store: Store) -> None:
    narrow, key = publisher_key(
        store, "ci", ["alice", "bob"], ["build.*", "deploy.?"], senders=("ci-*", "bot")
    )
    wide, _ = publisher_key(store, "monitor")
    await store.create_publisher_key(narrow)
    await store.create_publisher_key(wide)
    found = await store.publisher_key_by_hash(hash_key(key))
    assert found == narrow
    assert (found.scopes, found.handles, found.types, found.senders) == (
        ["publish"],
        ["alice", "bob"],
        ["build.*", "deploy.?"],
        ["ci-*", "bot"],
    )
    assert await store.publisher_key_by_hash(wide.key_hash) == wide
    assert (wide.handles, wide.types, wide.senders) == (None, None, [])
    assert await store.publisher_key_by_hash(hash_key(new_key(PUBLISHER_PREFIX))) is None


async def test_keys_are_listed_oldest_first(store: Store) -> None:
    made = [publisher_key(store, f"app-{n}")[0] for n in range(3)]
    for key in reversed(made):
        await store.create_publisher_key(key)
    assert await store.list_publisher_keys() == made


async def test_a_revoked_key_is_found_no_more_and_revoking_it_again_says_so(
    store: Store,
) -> None:
    revoked, key = publisher_key(store, "ci")
    kept, _ = publisher_key(store, "monitor")
    await store.create_publisher_key(revoked)
    await store.create_publisher_key(kept)
    assert await store.delete_publisher_key(revoked.id) is True
    assert await store.delete_publisher_key(revoked.id) is False
    assert await store.publisher_key_by_hash(hash_key(key)) is None
    assert await store.list_publisher_keys() == [kept]


async def test_keys_made_before_senders_keep_any_sender_only_if_they_were_for_every_agent(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The store as it was before keys had senders, with a key for every agent and one for alice.
    every = migrations.load
    backend = "sqlite" if store_url.startswith("sqlite") else "postgres"
    cut = next(m.version for m in every(backend) if m.name == "key_senders")
    monkeypatch.setattr(
        migrations, "load", lambda backend: [m for m in every(backend) if m.version < cut]
    )
    insert = (
        "INSERT INTO publisher_keys (id, name, key_hash, scopes, handles, types, created_at)"
        """ VALUES ('key_wide', 'wide', 'h1', '["publish"]', NULL, NULL, 1),"""
        """ ('key_alice', 'alice', 'h2', '["publish"]', '["alice"]', NULL, 2)"""
    )
    if backend == "sqlite":
        conn = sqlite3.connect(store_url.removeprefix("sqlite:///"))
        sqlite_schema.migrate(conn)
        conn.execute(insert)
        conn.commit()
        conn.close()
    else:
        pg = await asyncpg.connect(store_url)
        await postgres_schema.migrate(pg)
        await pg.execute(insert)
        await pg.close()
    monkeypatch.undo()

    opened = await open_store(store_url)
    try:
        keys = {key.id: key for key in await opened.list_publisher_keys()}
    finally:
        await opened.close()
    assert keys["key_wide"].senders == ["*"]
    assert keys["key_alice"].senders == []
