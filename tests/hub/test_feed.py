"""The admin's feed through the hub (``hub.feed``), on each backend: items in commit order,
a page at a time, resumed from any item's cursor, narrowed by agent and type, and a ``gap`` for
a cursor older than the journal keeps. (The route: tests/http/test_feed.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from herald import Hub, InvalidInput, open_store
from herald.feed import FeedCursor, FeedItem, FeedMatch, JournalPosition, feed_id
from herald.hub.feed import FeedReader
from herald.ids import new_id
from herald.inputs.events import parse_new_event
from herald.models import Endpoint, Kind, NewEvent
from herald.testing import ManualClock
from tests.waiting import until

pytestmark = pytest.mark.anyio


@pytest.fixture
async def hub(store_url: str, clock: ManualClock) -> AsyncIterator[Hub]:
    async with Hub.from_url(store_url, clock=clock, retention_s=60) as opened:
        yield opened


def new(to: str, type: str = "note", text: str = "hello") -> NewEvent:
    return parse_new_event({"to": to, "type": type, "text": text})


async def read_all(reader: FeedReader, limit: int = 500) -> list[FeedItem]:
    items: list[FeedItem] = []
    while True:
        items += await reader.read(limit)
        if reader.caught_up:
            return items


def assert_shown(items: list[FeedItem], expected: list[tuple[str, str, object]]) -> None:
    """``shown(items) == expected``; a failure lists the items as read (``as_read``)."""
    assert shown(items) == expected, as_read(items)


def as_read(items: list[FeedItem]) -> str:
    """The items in the order read, each with its cursor (the journal row's position, the item
    in it) and all its data: what an item out of order or missing is told by."""
    return "the items read, in order:\n" + "\n".join(
        f"{item.cursor} {item.kind} {item.data}" for item in items
    )


def shown(items: list[FeedItem]) -> list[tuple[str, str, object]]:
    """Each item's kind, agent handle and event seq (or endpoint state)."""
    return [
        (
            item.kind,
            item.data["agent"]["handle"],
            item.data["event"]["seq"] if "event" in item.data else item.data["state"],
        )
        for item in items
    ]


async def test_a_reader_from_now_sees_what_follows_in_commit_order(hub: Hub) -> None:
    alice, _ = await hub.create_agent("alice")
    await hub.publish("alice", "note", "before")
    reader = await hub.feed.open(None, FeedMatch())
    assert await reader.read() == [] and reader.caught_up
    await hub.publish_many([new("alice"), new("alice")])
    drained = await hub.drain(alice, cursor=0, limit=1)
    await hub.drain(alice, cursor=drained.cursor, limit=1)
    endpoint = Endpoint(new_id("end_"), alice.id, Kind.WEBHOOK, "https://x.test", "s", hub.now())
    await hub.endpoints.put(endpoint)
    items = await read_all(reader)
    assert_shown(
        items,
        [
            ("published", "alice", 2),
            ("published", "alice", 3),
            ("attempt", "alice", 1),  # leased
            ("acked", "alice", 1),
            ("attempt", "alice", 2),
            ("endpoint", "alice", "created"),
        ],
    )
    assert [item.data["outcome"] for item in items if item.kind == "attempt"] == ["leased"] * 2
    assert [item.cursor for item in items] == sorted(
        (item.cursor for item in items), key=lambda c: c.key
    )
    assert "text" not in items[0].data["event"]  # the feed never shows what an event says


async def test_a_cursor_inside_a_batch_resumes_with_exactly_what_followed(hub: Hub) -> None:
    await hub.create_agent("alice")
    start = await hub.feed.open(None, FeedMatch())
    await hub.publish_many([new("alice", text=str(n)) for n in range(1200)])
    await hub.publish("alice", "note", "after")
    pages = [await start.read(), await start.read(), await start.read()]
    assert [len(page) for page in pages] == [500, 500, 201]
    every = [item for page in pages for item in page]
    assert [item.data["event"]["seq"] for item in every] == list(range(1, 1202))
    for index in (0, 499, 1198, 1199):
        resumed = await hub.feed.open(every[index].cursor, FeedMatch())
        assert await read_all(resumed) == every[index + 1 :]
    cursor = FeedCursor.parse(str(every[700].cursor))
    assert cursor == every[700].cursor  # as the client sends it back


async def test_a_match_keeps_one_agents_items_and_one_types(hub: Hub) -> None:
    alice, _ = await hub.create_agent("alice")
    bob, _ = await hub.create_agent("bob")
    start = await hub.feed.open(None, FeedMatch())
    await hub.publish_many([new("alice", "build.failed"), new("bob", "build.ok")])
    await hub.publish("alice", "chat.message", "hi")
    endpoint = Endpoint(new_id("end_"), alice.id, Kind.WEBHOOK, "https://x.test", "s", hub.now())
    await hub.endpoints.put(endpoint)
    of_alice = await hub.feed.open(start.cursor, FeedMatch(agent_id=alice.id))
    assert_shown(
        await read_all(of_alice),
        [
            ("published", "alice", 1),
            ("published", "alice", 2),
            ("endpoint", "alice", "created"),
        ],
    )
    builds = await hub.feed.open(start.cursor, FeedMatch(type_glob="build.*"))
    assert_shown(await read_all(builds), [("published", "alice", 1), ("published", "bob", 1)])
    both = await hub.feed.open(start.cursor, FeedMatch(agent_id=bob.id, type_glob="build.?k"))
    assert_shown(await read_all(both), [("published", "bob", 1)])


async def test_a_deleted_agents_items_are_left_out(hub: Hub) -> None:
    alice, _ = await hub.create_agent("alice")
    await hub.create_agent("bob")
    start = await hub.feed.open(None, FeedMatch())
    await hub.publish_many([new("alice"), new("bob")])
    await hub.delete_agent(alice.id)
    assert_shown(await read_all(start), [("published", "bob", 1)])


async def test_a_cursor_older_than_the_journal_keeps_gets_a_gap_then_the_oldest_kept(
    hub: Hub, clock: ManualClock
) -> None:
    alice, _ = await hub.create_agent("alice")
    reader = await hub.feed.open(None, FeedMatch())
    await hub.publish("alice", "note", "old")
    await hub.publish("alice", "note", "old too")
    (first, second) = await read_all(reader)
    await hub.drain(alice)  # taken: finished, so pruned with them
    clock.advance(120)  # past the retention
    await hub.publish("alice", "note", "kept")
    await hub.maintain_once()
    late = await hub.feed.open(first.cursor, FeedMatch())
    gap, *rest = await read_all(late)
    assert gap.kind == "gap" and gap.data["after"] == late.id_of(first.cursor)
    assert "no longer kept" in gap.data["message"]
    assert gap.cursor.key >= second.cursor.key
    assert_shown(rest, [("published", "alice", 3)])  # the take's row went with the old ones
    resumed = await hub.feed.open(gap.cursor, FeedMatch())  # the gap's id: no gap again
    assert_shown(await read_all(resumed), shown(rest))


async def test_a_cursor_ahead_of_the_journal_is_refused(hub: Hub) -> None:
    await hub.create_agent("alice")
    await hub.publish("alice", "note", "one")
    far = FeedCursor(JournalPosition(2**62, 1))
    with pytest.raises(InvalidInput, match="ahead of anything this herald's stream gave"):
        await hub.feed.open(far, FeedMatch())


async def read_newest(hub: Hub, after: FeedCursor, limit: int, **match: str) -> list[FeedItem]:
    reader = await hub.feed.open(after, FeedMatch(**match))
    items = await reader.read_newest(limit)
    assert reader.caught_up and await reader.read_newest(limit) == []  # nothing new since
    return items


async def test_a_reader_of_the_newest_gets_them_after_a_skipped_item_that_says_where_the_rest_is(
    hub: Hub,
) -> None:
    await hub.create_agent("alice")
    start = (await hub.feed.open(None, FeedMatch())).cursor
    for n in range(30):  # a row each
        await hub.publish("alice", "note", str(n))
    skipped, *newest = await read_newest(hub, start, 5)
    assert_shown(newest, [("published", "alice", seq) for seq in range(26, 31)])
    history = await hub.feed.history()
    assert skipped.kind == "skipped" and skipped.data["after"] == feed_id(history, start)
    assert skipped.data["resumes_after"] == feed_id(history, skipped.cursor)
    every = await read_all(await hub.feed.open(start, FeedMatch()))
    left_out = [item for item in every if item.cursor.key <= skipped.cursor.key]
    assert_shown(left_out, [("published", "alice", seq) for seq in range(1, 26)])
    assert [item.data for item in every[25:]] == [item.data for item in newest]


async def test_a_reader_of_the_newest_skips_nothing_while_they_are_few(hub: Hub) -> None:
    await hub.create_agent("alice")
    start = (await hub.feed.open(None, FeedMatch())).cursor
    for n in range(5):
        await hub.publish("alice", "note", str(n))
    assert_shown(
        await read_newest(hub, start, 5), [("published", "alice", seq) for seq in range(1, 6)]
    )
    await hub.publish("alice", "note", "one more")  # six rows for five: the first is skipped
    skipped, *newest = await read_newest(hub, start, 5)
    assert skipped.kind == "skipped" and shown(newest)[0] == ("published", "alice", 2)


async def test_a_reader_of_the_newest_takes_the_end_of_a_batch_and_goes_on_inside_one(
    hub: Hub,
) -> None:
    await hub.create_agent("alice")
    start = await hub.feed.open(None, FeedMatch())
    await hub.publish_many([new("alice") for _ in range(1200)])  # one row of 1,200 items
    first_page = await start.read(10)  # a cursor inside the row, at seq 10
    skipped, *newest = await read_newest(hub, start.cursor, 3)
    assert_shown(newest, [("published", "alice", seq) for seq in (1198, 1199, 1200)])
    assert skipped.data["after"] == feed_id(await hub.feed.history(), first_page[-1].cursor)
    every = await read_all(await hub.feed.open(start.cursor, FeedMatch()))
    left_out = [item for item in every if item.cursor.key <= skipped.cursor.key]
    assert [item.data["event"]["seq"] for item in left_out] == list(range(11, 1198))
    assert_shown(await read_newest(hub, newest[0].cursor, 3), shown(newest[1:]))


async def test_a_reader_of_the_newest_keeps_to_its_agent_and_type(hub: Hub) -> None:
    alice, _ = await hub.create_agent("alice")
    await hub.create_agent("bob")
    start = (await hub.feed.open(None, FeedMatch())).cursor
    for n in range(10):
        await hub.publish("alice", "build.failed" if n % 5 == 0 else "chat", str(n))
        await hub.publish("bob", "build.failed", str(n))
    skipped, *newest = await read_newest(hub, start, 3, agent_id=alice.id)
    assert skipped.kind == "skipped"
    assert_shown(newest, [("published", "alice", seq) for seq in (8, 9, 10)])
    # Rare matches among many others are all found: every item is read for its type.
    builds = await read_newest(hub, start, 3, agent_id=alice.id, type_glob="build.*")
    assert_shown(builds, [("published", "alice", 1), ("published", "alice", 6)])
    skipped, *newest = await read_newest(hub, start, 3, type_glob="build.*")
    assert_shown(newest, [("published", "bob", seq) for seq in (8, 9, 10)])
    every = await read_all(await hub.feed.open(start, FeedMatch(type_glob="build.*")))
    left_out = [item for item in every if item.cursor.key <= skipped.cursor.key]
    assert len(left_out) + len(newest) == len(every) == 12, as_read(every)


async def test_a_reader_of_the_newest_of_a_type_looks_back_only_so_far_and_says_so(
    hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("herald.hub.feed.TYPE_SCAN", 10)
    await hub.create_agent("alice")
    start = (await hub.feed.open(None, FeedMatch())).cursor
    await hub.publish("alice", "build.failed", "old")
    for n in range(10):
        await hub.publish("alice", "chat", str(n))
    (skipped,) = await read_newest(hub, start, 3, type_glob="build.*")
    assert skipped.kind == "skipped"  # eleven rows, ten looked at: the build is left out
    (build,) = await read_all(await hub.feed.open(start, FeedMatch(type_glob="build.*")))
    assert build.cursor.key <= skipped.cursor.key
    assert await read_newest(hub, skipped.cursor, 3, type_glob="build.*") == []


async def test_a_commit_that_journals_wakes_the_readers_and_one_that_does_not_is_quiet(
    hub: Hub,
) -> None:
    alice, _ = await hub.create_agent("alice")
    changed = hub.feed.changed()
    await hub.drain(alice)  # nothing to take: nothing journaled
    assert not changed.is_set()
    await hub.publish("alice", "note", "one")
    assert changed.is_set()
    changed = hub.feed.changed()
    await hub.drain(alice)  # an attempt, journaled by the store: no publish to hear
    assert changed.is_set()


async def test_a_transaction_committing_late_is_read_in_its_place_not_skipped(
    postgres_database_url: str,
) -> None:
    """PostgreSQL hands out positions before commit: a slow transaction holds a lower one
    while a later one commits. The feed holds back rows behind the slow one until it commits,
    then reads both in order; a reader by position alone would have moved past it."""
    store = await open_store(postgres_database_url)
    slow = await asyncpg.connect(postgres_database_url)
    try:
        async with Hub(store) as hub:
            alice, _ = await hub.create_agent("alice")
            reader = await hub.feed.open(None, FeedMatch())
            transaction = slow.transaction()
            await transaction.start()
            await slow.execute(
                "INSERT INTO journal (at, kind, agent_id, detail) VALUES ($1, 'append', $2,"
                " json_build_object('published',"
                " json_build_array(json_build_array($2::text, 1, 1)))::text)",
                hub.now(),
                alice.id,
            )
            slow_position = await slow.fetchval("SELECT max(position) FROM journal")
            published = await hub.publish("alice", "note", "fast")  # seq 1, committed first
            # Committed after a position still uncommitted: a reader by position moves past it.
            committed = await positions(postgres_database_url)
            assert committed[-1] > slow_position and slow_position not in committed
            assert await reader.read() == [] and reader.caught_up  # held back, not skipped
            await transaction.commit()
            items = await read_all(reader)
            assert [item.cursor.row.position for item in items] == [slow_position, committed[-1]]
            # The slow row names the agent's seq 1 too: each is shown as that event.
            assert {item.data["event"]["id"] for item in items} == {published.event.id}
    finally:
        await slow.close()


async def positions(url: str) -> list[int]:
    """The journal's committed positions in position order, as another connection sees them."""
    conn = await asyncpg.connect(url)
    try:
        return [row[0] for row in await conn.fetch("SELECT position FROM journal ORDER BY 1")]
    finally:
        await conn.close()


async def test_a_long_transaction_in_another_database_does_not_hold_the_feed_back(
    postgres_database_url: str, postgres_server_url: str
) -> None:
    elsewhere = await asyncpg.connect(postgres_server_url)
    transaction = elsewhere.transaction()
    await transaction.start()
    await elsewhere.fetchval("SELECT pg_current_xact_id()")  # holds an id, as a long write does
    try:
        async with Hub.from_url(postgres_database_url) as hub:
            reader = await hub.feed.open(None, FeedMatch())
            await hub.create_agent("alice")
            await hub.publish("alice", "note", "one")
            assert_shown(await read_all(reader), [("published", "alice", 1)])
    finally:
        await transaction.rollback()
        await elsewhere.close()


async def read_until(reader: FeedReader, count: int) -> list[FeedItem]:
    """The reader's next ``count`` items, read as they become final (bounded)."""
    items: list[FeedItem] = []

    async def enough() -> bool:
        items.extend(await reader.read())
        return len(items) >= count

    await until(enough, f"{count} items in the feed")
    return items


async def test_an_agents_events_are_read_in_the_order_they_were_numbered_across_processes(
    postgres_database_url: str,
) -> None:
    """The journal is read in transaction id order. A batch to three agents locks them one by
    one and is held at the second (another transaction holds its row), having written the
    first; another process publishes to the third meanwhile. The event numbered first (seq 1)
    is read first: were the batch's id taken before it waited, its seq 2 would come before."""
    watcher = await asyncpg.connect(postgres_database_url)
    holder = await asyncpg.connect(postgres_database_url)

    async def waiting(count: int) -> bool:
        return bool(await watcher.fetchval(LOCK_WAITS) >= count)

    try:
        async with (
            Hub.from_url(postgres_database_url) as one,
            Hub.from_url(postgres_database_url) as other,
        ):
            made = [(await one.create_agent(name))[0] for name in ("ann", "ben", "cat")]
            first, held, last = sorted(made, key=lambda agent: agent.id)  # the order locked
            reader = await one.feed.open(None, FeedMatch(agent_id=last.id))
            transaction = holder.transaction()
            await transaction.start()
            await holder.execute("SELECT FROM agents WHERE id = $1 FOR UPDATE", held.id)
            batch = asyncio.create_task(
                one.publish_many([new(first.handle), new(held.handle), new(last.handle)])
            )
            await until(lambda: waiting(1), "the batch waits for the held agent")
            alone = asyncio.create_task(other.publish(last.handle, "note", "alone"))

            async def done_or_waiting() -> bool:
                return alone.done() or await waiting(2)

            await until(done_or_waiting, "the other publish is done or waits")
            await transaction.commit()
            numbered = sorted([(await batch)[2], await alone], key=lambda p: p.event.seq)
            items = await read_until(reader, 2)
            assert [item.data["event"]["id"] for item in items] == [p.event.id for p in numbered]
            assert [item.data["event"]["seq"] for item in items] == [1, 2]
    finally:
        await holder.close()
        await watcher.close()


LOCK_WAITS = (
    "SELECT count(*) FROM pg_stat_activity"
    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
)

PROCESSES = 4
WRITERS = 16
PUBLISHES = 20


async def test_under_many_writers_in_many_processes_each_item_is_read_once_in_one_order(
    postgres_database_url: str,
) -> None:
    """Many publishers in several hubs on one database (as several processes are), alone and
    in batches to two agents; two readers read the feed all the while, one of them a page of
    few items at a time. Each reads every event exactly once, each agent's in seq order, and
    both read the same items in the same order."""
    hubs = [Hub.from_url(postgres_database_url) for _ in range(PROCESSES)]
    for hub in hubs:
        await hub.__aenter__()
    try:
        agents = [(await hubs[0].create_agent(f"agent-{n}"))[0] for n in range(8)]
        readers = [await hubs[n].feed.open(None, FeedMatch()) for n in (0, 1)]
        read: list[list[FeedItem]] = [[], []]
        writing = asyncio.Event()
        writing.set()

        async def follow(index: int, page: int) -> None:
            reader = readers[index]
            while writing.is_set() or not reader.caught_up:
                read[index] += await reader.read(page)
                await asyncio.sleep(0)

        async def write(writer: int) -> list[str]:
            hub = hubs[writer % PROCESSES]
            ids: list[str] = []
            for n in range(PUBLISHES):
                to = agents[(writer + n) % len(agents)].handle
                if n % 3:
                    ids.append((await hub.publish(to, "note", "one")).event.id)
                    continue
                also = agents[(writer + n + 1) % len(agents)].handle
                ids += [p.event.id for p in await hub.publish_many([new(to), new(also)])]
            return ids

        following = [asyncio.create_task(follow(0, 500)), asyncio.create_task(follow(1, 3))]
        written = await asyncio.gather(*(write(writer) for writer in range(WRITERS)))
        published = sorted(event_id for ids in written for event_id in ids)
        for index in (0, 1):
            await until(
                lambda index=index: _published_count(read[index], len(published)),
                "every event in the feed",
            )
        writing.clear()
        await asyncio.gather(*following)
        for items in read:
            ids = [item.data["event"]["id"] for item in items if item.kind == "published"]
            assert sorted(ids) == published  # each exactly once
            by_agent: dict[str, list[int]] = {}
            for item in items:
                if item.kind == "published":
                    by_agent.setdefault(item.data["agent"]["id"], []).append(
                        item.data["event"]["seq"]
                    )
            assert all(seqs == sorted(seqs) for seqs in by_agent.values())
        assert [str(item.cursor) for item in read[0]] == [str(item.cursor) for item in read[1]]
    finally:
        for hub in hubs:
            await hub.__aexit__(None, None, None)


async def _published_count(items: list[FeedItem], count: int) -> bool:
    await asyncio.sleep(0)
    return sum(item.kind == "published" for item in items) >= count
