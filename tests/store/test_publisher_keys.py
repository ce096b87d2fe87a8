"""The publisher-key part of the store contract, on every backend: a key is kept with its
scopes and limits, found by its hash, listed oldest first, and gone once revoked."""

from __future__ import annotations

import json

import pytest

from herald.ids import new_id
from herald.keys import PUBLISHER_PREFIX, hash_key, new_key
from herald.models import PublisherKey
from herald.store import Store

pytestmark = pytest.mark.anyio


def publisher_key(
    store: Store, name: str, handles: list[str] | None = None, types: list[str] | None = None
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
    )
    return record, key


async def test_a_key_is_found_by_its_hash_as_it_was_stored(store: Store) -> None:
    narrow, key = publisher_key(store, "ci", ["alice", "bob"], ["build.*", "deploy.?"])
    wide, _ = publisher_key(store, "monitor")
    await store.create_publisher_key(narrow)
    await store.create_publisher_key(wide)
    found = await store.publisher_key_by_hash(hash_key(key))
    assert found == narrow
    assert (found.scopes, found.handles, found.types) == (
        ["publish"],
        ["alice", "bob"],
        ["build.*", "deploy.?"],
    )
    assert await store.publisher_key_by_hash(wide.key_hash) == wide
    assert (wide.handles, wide.types) == (None, None)
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
