"""The PostgreSQL store: each operation on a pooled connection, in a transaction if it writes
several rows. Times are integer milliseconds read from the store's clock, never ``now()``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import asyncpg

from herald.errors import Conflict, HeraldError, InvalidInput, NotFound, StoreUnavailable
from herald.feed import JournalEntry, LoopGuardTrip
from herald.loop_guard import GuardedSend, LoopLimits
from herald.models import (
    EVERY_EVENT,
    Agent,
    Attempt,
    Drained,
    Event,
    EventMatch,
    NewEvent,
    Published,
    Reply,
    StartPosition,
)
from herald.store.base import DEFAULT_SCAN, Store
from herald.store.journal import note_written, one_agent, record, start_watching, written_in
from herald.store.postgres import loop_guards, queries
from herald.store.postgres.append import append
from herald.store.postgres.attempts import acknowledge, matching, write_attempts
from herald.store.postgres.claimants import Claimant, ClaimantStore
from herald.store.postgres.endpoints import EndpointStore
from herald.store.postgres.errors import DRIVER_ERRORS, describe, retryable
from herald.store.postgres.event_types import EventTypeStore
from herald.store.postgres.journal import JournalStore, write
from herald.store.postgres.listener import Listener
from herald.store.postgres.overview import OverviewStore
from herald.store.postgres.pool import HeldConnection, open_pool
from herald.store.postgres.publisher_keys import PublisherKeyStore
from herald.store.postgres.push_windows import PushWindowStore
from herald.store.postgres.rows import Connection, Operation, T, count, event
from herald.store.postgres.schedules import ScheduleStore
from herald.store.postgres.sessions import SessionStore
from herald.store.postgres.subscriptions import SubscriptionStore, mark_gaps_of_expiry
from herald.store.postgres.topics import TopicStore
from herald.store.postgres.writer import Writer
from herald.store.rules import (
    NO_SEQ_LIMIT,
    ack_attempts,
    check_cursor,
    dead_attempts,
    dying,
    first_created_since,
    first_unhanded,
    lease_attempts,
    looked_through,
    missing,
    polled,
    push_holders,
    take_attempts,
)
from herald.store.tables import AGENTS, ATTEMPTS, REPLIES
from herald.times import Clock
from herald.urls import split_schema

TRANSACTION_TRIES = 3
"""A transaction Postgres chose as a deadlock victim is rolled back, so it is run again."""


LISTEN_READY_S = 5.0


class PostgresStore(
    EndpointStore,
    ClaimantStore,
    SubscriptionStore,
    SessionStore,
    EventTypeStore,
    TopicStore,
    OverviewStore,
    PublisherKeyStore,
    JournalStore,
    ScheduleStore,
    PushWindowStore,
    Store,
):
    """Store on a PostgreSQL database named by a ``postgresql://user@host:port/db`` URL."""

    def __init__(self, url: str, clock: Clock = time.time) -> None:
        super().__init__(clock)
        self.url, self.schema = split_schema(url)
        self._pool: asyncpg.Pool[asyncpg.Record] | None = None
        self._held = HeldConnection()
        self._writer = Writer(self._run_held, self._appended)
        self._listener: Listener | None = None
        self._claimants: dict[str, Claimant] = {}

    async def open(self) -> None:
        if self._pool is not None:
            return
        self._pool = await open_pool(self.url, self.schema)

    async def listen(
        self,
        on_agents: Callable[[set[str]], None],
        on_catalogue: Callable[[], None] | None = None,
        *,
        on_subscription_deleted: Callable[[str], None] | None = None,
        on_inbox: Callable[[set[str]], None] | None = None,
    ) -> None:
        """Call ``on_agents`` with the agents that got events committed, ``on_catalogue`` after
        the event types changed, ``on_subscription_deleted`` with the id of each webhook
        subscription deleted, and ``on_inbox`` with the agents whose open events were closed
        (acknowledged, delivered, expired) or opened again, by any process."""
        if self._listener is None:
            self._listener = Listener(
                self.url,
                on_agents,
                on_catalogue,
                on_subscription_deleted=on_subscription_deleted,
                on_inbox=on_inbox,
            )
            self._listener.start()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LISTEN_READY_S):
                    await self._listener.listening.wait()

    async def close(self) -> None:
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None
        await self._writer.drain()  # the appends already accepted are committed first
        pool, self._pool = self._pool, None
        if pool is None:
            return
        await self._held.give_back(pool)
        try:
            await pool.close()
        except DRIVER_ERRORS:  # a broken connection needs no goodbye
            pool.terminate()

    async def _run(
        self, operation: Operation[T], *, transaction: bool = False, one_statement: bool = False
    ) -> T:
        """Run ``operation`` on a pooled connection (in a transaction if asked), mapping driver
        errors to StoreUnavailable; once it is committed, tell the journal listeners if it
        wrote a journal row. An operation that is ``one_statement`` is its own transaction: it
        is run again, as a transaction is, when Postgres chose it as a deadlock victim."""
        return await self._run_on(operation, transaction, one_statement, held=False)

    async def _run_held(
        self, operation: Operation[T], *, transaction: bool = False, one_statement: bool = False
    ) -> T:
        """``_run`` on the connection the store keeps for its writer, which runs one operation
        at a time."""
        return await self._run_on(operation, transaction, one_statement, held=True)

    async def _run_on(
        self, operation: Operation[T], transaction: bool, one_statement: bool, *, held: bool
    ) -> T:
        pool = self._pool
        if pool is None:
            raise StoreUnavailable("the store is not open: call open() first")
        tries = 0
        while True:
            tries += 1
            watch = start_watching()
            try:
                if not held:
                    async with pool.acquire() as conn:
                        result = await _on(conn, operation, transaction)
                else:
                    conn = await self._held.take(pool)
                    try:
                        result = await _on(conn, operation, transaction)
                    except HeraldError:
                        raise
                    except BaseException:
                        await self._held.give_back(pool)
                        raise
            except HeraldError:
                raise
            except DRIVER_ERRORS as exc:
                if tries >= TRANSACTION_TRIES or not retryable(exc, transaction or one_statement):
                    raise StoreUnavailable(f"PostgreSQL store failed: {describe(exc)}") from exc
                continue
            finally:
                journaled = written_in(watch)
            if journaled:
                self._journal_committed()
            return result

    # Agents and settings

    async def create_agent(self, agent: Agent) -> None:
        async def insert(conn: Connection) -> None:
            try:
                await conn.execute(queries.INSERT_AGENT, *AGENTS.values(agent))
            except asyncpg.UniqueViolationError as exc:
                raise Conflict(f"the handle {agent.handle!r} is taken; choose another") from exc

        await self._run(insert)

    async def get_agent(self, agent_id: str) -> Agent | None:
        return await self._one_agent(queries.AGENT_BY_ID, agent_id)

    async def agent_by_handle(self, handle: str) -> Agent | None:
        return await self._one_agent(queries.AGENT_BY_HANDLE, handle)

    async def agent_by_key_hash(self, key_hash: str) -> Agent | None:
        return await self._one_agent(queries.AGENT_BY_KEY_HASH, key_hash, self.now())

    async def _one_agent(self, query: str, *values: object) -> Agent | None:
        async def select(conn: Connection) -> Agent | None:
            row = await conn.fetchrow(query, *values)
            return AGENTS.record(row) if row is not None else None

        return await self._run(select)

    async def working_key_hashes(self, key_hashes: Sequence[str]) -> set[str]:
        now = self.now()

        async def select(conn: Connection) -> set[str]:
            rows = await conn.fetch(queries.WORKING_KEY_HASHES, list(key_hashes), now)
            return {row[0] for row in rows}

        return await self._run(select)

    async def rotate_agent_key(
        self, agent_id: str, key_hash: str, previous_until: int | None
    ) -> bool:
        async def update(conn: Connection) -> bool:
            status = await conn.execute(
                queries.ROTATE_AGENT_KEY, agent_id, key_hash, previous_until
            )
            return count(status) > 0

        return await self._run(update)

    async def list_agents(self) -> list[Agent]:
        async def select(conn: Connection) -> list[Agent]:
            return [AGENTS.record(row) for row in await conn.fetch(queries.LIST_AGENTS)]

        return await self._run(select)

    async def delete_agent(self, agent_id: str) -> bool:
        async def delete(conn: Connection) -> bool:
            # Its events first, then its row: the order in which a change of their status
            # locks them (the count in the agent's row is kept by a trigger), so that an ack
            # meanwhile cannot deadlock with the deletion.
            await conn.execute(queries.DELETE_AGENT_EVENTS, agent_id)
            return count(await conn.execute(queries.DELETE_AGENT, agent_id)) > 0

        return await self._run(delete, transaction=True)

    async def set_agent_delivery(self, agent_id: str, delivery_json: str) -> bool:
        async def update(conn: Connection) -> bool:
            status = await conn.execute(queries.SET_AGENT_DELIVERY, agent_id, delivery_json)
            return count(status) > 0

        return await self._run(update)

    async def set_agent_preferences(self, agent_id: str, preferences_json: str) -> bool:
        async def update(conn: Connection) -> bool:
            status = await conn.execute(queries.SET_AGENT_PREFERENCES, agent_id, preferences_json)
            # A type no longer muted: its events are scheduled for webhooks from the first.
            await conn.execute(queries.SCHEDULE_AGAIN_FROM, agent_id, 1)
            return count(status) > 0

        return await self._run(update, transaction=True)

    async def get_setting(self, name: str) -> str | None:
        async def select(conn: Connection) -> str | None:
            value = await conn.fetchval(queries.GET_SETTING, name)
            return str(value) if value is not None else None

        return await self._run(select)

    async def set_setting_if_absent(self, name: str, value: str) -> str:
        async def upsert(conn: Connection) -> str:
            await conn.execute(queries.INSERT_SETTING_IF_ABSENT, name, value)
            # A statement of its own: it sees a row another writer committed meanwhile.
            return str(await conn.fetchval(queries.GET_SETTING, name))

        return await self._run(upsert)

    async def set_setting(self, name: str, value: str) -> None:
        async def upsert(conn: Connection) -> None:
            await conn.execute(queries.SET_SETTING, name, value)

        await self._run(upsert)

    # Events

    async def append(self, events: Sequence[NewEvent]) -> list[Published]:
        if self._pool is None:
            raise StoreUnavailable("the store is not open: call open() first")
        if not events:
            return []
        return await self._writer.append(events, self.now())

    def _appended(self, published: list[Published]) -> None:
        created = [p.event for p in published if p.created]
        if created:
            self.on_appended(created)

    async def get_event(self, event_id: str) -> Event | None:
        async def select(conn: Connection) -> Event | None:
            row = await conn.fetchrow(queries.GET_EVENT, event_id)
            return event(row) if row is not None else None

        return await self._run(select)

    async def read_open(self, agent_id: str, after_seq: int, limit: int) -> list[Event]:
        now = self.now()

        async def select(conn: Connection) -> list[asyncpg.Record]:
            return list(await conn.fetch(queries.READ_OPEN, agent_id, after_seq, now, limit))

        while True:  # each look that finds the dying buries them: it ends
            rows = await self._run(select)
            dying_ids = [r["id"] for r in rows if dying(r["handed_out"], self.max_deliveries)]
            if not dying_ids:
                return [event(row) for row in rows]
            await self._bury(agent_id, dying_ids, now)

    async def _bury(self, agent_id: str, ids: list[str], now: int) -> None:
        """The agent's open events among ``ids`` handed out as often as allowed die, each
        recorded with an attempt that says why."""

        async def bury(conn: Connection) -> None:
            rows = await conn.fetch(queries.BURY_DYING, agent_id, ids, now, self.max_deliveries)
            buried = [(row["id"], row["handed_out"]) for row in rows]
            await write_attempts(conn, dead_attempts(buried, now, None), now, "dead", agent_id)

        await self._run(bury, transaction=True)

    async def claim(
        self,
        agent_id: str,
        consumer: str,
        limit: int,
        lease_ms: int,
        mechanism: str,
        *,
        ack_up_to: int | None = None,
        match: EventMatch = EVERY_EVENT,
        after: int | None = None,
    ) -> list[Event]:
        now = self.now()

        async def lease(conn: Connection) -> tuple[list[Event], list[int], int]:
            rows = await conn.fetch(
                queries.CLAIM,
                *(agent_id, consumer, now, limit, now + lease_ms, ack_up_to),
                *(*matching(match), after or 0, NO_SEQ_LIMIT, self.max_deliveries, mechanism),
            )
            if ack_up_to is not None and rows:
                check_cursor(ack_up_to, rows[0]["newest"])  # if ahead, nothing was changed
            acknowledged = list(rows[0]["acknowledged"] or ()) if rows else []  # the first's
            buried = rows[0]["buried"] if rows else 0
            leased = (event(row) for row in rows if row["id"] is not None)
            events = sorted(leased, key=lambda e: e.seq)
            if acknowledged or events or buried:
                note_written()  # by the statement itself
            return events, acknowledged, buried

        acknowledged: list[int] = []
        while True:
            events, acked, buried = await self._run(lease, one_statement=True)
            acknowledged += acked
            # Events that died leave the answer short; one left empty by them while others
            # wait would look like nothing is left: the claim is made again. Each that comes
            # back empty buried one at least, so this ends.
            if events or not buried:
                break
        if acknowledged:
            self.on_acknowledged(acknowledged)
        return events

    async def poll(
        self,
        agent_id: str,
        consumer: str,
        limit: int,
        lease_ms: int,
        *,
        cursor: int,
        match: EventMatch,
        scan: int,
    ) -> Drained:
        now = self.now()
        acknowledged: list[tuple[str, int]] = []
        types, sender = matching(match)

        async def leased(conn: Connection) -> Drained:
            acknowledged[:] = await acknowledge(
                conn, agent_id, [], cursor, consumer, now, False, match
            )
            newest = int(await conn.fetchval(queries.LAST_SEQ, agent_id) or 0)
            through = looked_through(cursor, scan, newest)
            buried: list[tuple[str, int]] = []
            while True:  # as in ``claim``: again while those that died left it empty
                rows = await conn.fetch(
                    queries.LEASE,
                    *(agent_id, consumer, now, limit, now + lease_ms, cursor),
                    *(types, sender, cursor, through, self.max_deliveries),
                )
                died = json.loads(rows[0]["buried"] or "[]")
                buried += [(event_id, handed_out) for event_id, handed_out in died]
                events = sorted(
                    (event(row) for row in rows if row["id"] is not None), key=lambda e: e.seq
                )
                if events or not died:
                    break
            unhanded = None
            if through < newest and len(events) < limit:
                seqs = await conn.fetch(
                    queries.MATCHING_SEQS,
                    *(agent_id, now, cursor, types, sender, through, len(events) + 1),
                )
                unhanded = first_unhanded([row[0] for row in seqs], events)
            attempts = ack_attempts([event_id for event_id, _ in acknowledged], now, consumer)
            attempts += dead_attempts(buried, now, consumer)
            attempts += lease_attempts(events, now, "poll", consumer)
            await write_attempts(conn, attempts, now, "claim", agent_id)
            return polled(cursor, events, limit, through, newest, unhanded)

        drained = await self._run(leased, transaction=True)
        if acknowledged:
            self.on_acknowledged([created_at for _, created_at in acknowledged])
        return drained

    async def take(self, agent_id: str, limit: int, mechanism: str, session: str) -> list[Event]:
        now = self.now()

        async def deliver(conn: Connection) -> list[Event]:
            rows = await conn.fetch(queries.DELIVER, agent_id, session, now, limit)
            events = sorted((event(row) for row in rows), key=lambda e: e.seq)
            attempts = take_attempts(events, now, mechanism, session)
            await write_attempts(conn, attempts, now, "take", agent_id)
            return events

        return await self._run(deliver, transaction=True)

    async def ack(
        self,
        agent_id: str,
        *,
        ids: Sequence[str] = (),
        up_to_seq: int | None = None,
        consumer: str | None = None,
        unheld: bool = False,
        match: EventMatch = EVERY_EVENT,
    ) -> int:
        now = self.now()
        ids = list(ids)

        async def finish(conn: Connection) -> list[tuple[str, int]]:
            acked = await acknowledge(conn, agent_id, ids, up_to_seq, consumer, now, unheld, match)
            attempts = ack_attempts([event_id for event_id, _ in acked], now, consumer)
            await write_attempts(conn, attempts, now, "ack", agent_id)
            return acked

        acknowledged = await self._run(finish, transaction=True)
        if acknowledged:
            self.on_acknowledged([created_at for _, created_at in acknowledged])
        return len(acknowledged)

    async def start_position(
        self,
        agent_id: str,
        match: EventMatch,
        not_before_ms: int | None = None,
        *,
        scan: int = DEFAULT_SCAN,
    ) -> StartPosition:
        now = self.now()
        types, sender = matching(match)

        async def select(conn: Connection) -> StartPosition:
            async def look(after: int, through: int, floor: int) -> tuple[int | None, int, int]:
                row = await conn.fetchrow(
                    queries.OPEN_IN_LOOK, agent_id, now, floor, types, sender, after, through
                )
                assert row is not None  # an aggregate without GROUP BY: one row
                return row["oldest"], int(row["waiting"]), int(row["skipped"])

            newest = await conn.fetchval(queries.LAST_SEQ, agent_id)
            if newest is None:
                raise NotFound(f"no agent {agent_id}")
            oldest = await conn.fetchval(queries.OLDEST_OPEN, agent_id)
            if oldest is None:
                return StartPosition(newest, 0, 0)
            after, too_old = oldest - 1, 0
            if not_before_ms:
                # As on SQLite: the start found by halving on the seqs; the too old ones counted
                # in a look, and past it said.
                search = first_created_since(after, newest, not_before_ms)
                try:
                    seq = next(search)
                    while True:
                        row = await conn.fetchrow(queries.FIRST_STORED, agent_id, seq)
                        seq = search.send(None if row is None else (row[0], row[1]))
                except StopIteration as done:
                    first_new = done.value
                start = newest if first_new is None else first_new - 1
                through = looked_through(after, scan, start)
                too_old = (await look(after, through, 0))[1] or int(through < start)
                after = start
            through = looked_through(after, scan, newest)
            first, waiting, skipped = await look(after, through, not_before_ms or 0)
            if first is not None:
                return StartPosition(first - 1, waiting, too_old + skipped)
            return StartPosition(through, 0, too_old + skipped, more=through < newest)

        return await self._run(select)

    async def mark_sent(self, agent_id: str, ids: Sequence[str], *, durable: bool = True) -> int:
        now = self.now()
        ids = list(ids)

        async def mark(conn: Connection) -> int:
            return int(await conn.fetchval(queries.MARK_SENT, agent_id, ids, now))

        return await self._run(mark)

    async def count_handed_out(self, agent_id: str, ids: Sequence[str]) -> None:
        ids = list(ids)
        await self._run(lambda conn: conn.execute(queries.COUNT_HANDED_OUT, agent_id, ids))

    async def count_unread(self, agent_id: str, before_ms: int) -> int:
        now = self.now()

        async def select(conn: Connection) -> int:
            return int(await conn.fetchval(queries.COUNT_OVERDUE, agent_id, before_ms, now))

        return await self._run(select)

    async def inbox_marks(self, agent_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
        now = self.now()

        async def select(conn: Connection) -> dict[str, tuple[int, int]]:
            rows = await conn.fetch(queries.INBOX_MARKS, list(agent_ids), now)
            return {row["agent_id"]: (row["open"], row["seqs"]) for row in rows}

        return await self._run(select)

    async def history(self) -> str:
        async def select(conn: Connection) -> str:
            return str(await conn.fetchval(queries.HISTORY))

        return await self._run(select)

    async def missing_after(
        self,
        agent_id: str,
        after_seq: int,
        through_seq: int | None = None,
        match: EventMatch = EVERY_EVENT,
    ) -> int:
        async def select(conn: Connection) -> int:
            row = await conn.fetchrow(
                queries.MISSING_AFTER, agent_id, after_seq, self.now(), through_seq,
                *matching(match),
            )  # fmt: skip
            return (
                0
                if row is None
                else missing(row["last_seq"], after_seq, row["stored"], row["expired"])
            )

        return await self._run(select)

    # Replies, attempts and housekeeping

    async def append_message(self, event: NewEvent, guard: GuardedSend) -> Published:
        now = self.now()

        async def insert(conn: Connection) -> Published:
            await loop_guards.check(conn, guard, now)
            return (await append(conn, [event], now))[0]

        return await self._run(insert, transaction=True)

    async def record_loop_guard(self, trip: LoopGuardTrip) -> None:
        row = record(self.now(), "loop_guard", trip.agent_id, JournalEntry(loop_guards=(trip,)))

        async def insert(conn: Connection) -> None:
            await write(conn, row)

        await self._run(insert)

    async def loop_limits(self, agent_id: str, defaults: LoopLimits) -> LoopLimits:
        return await self._run(lambda conn: loop_guards.limits_of(conn, agent_id, defaults))

    async def set_loop_limits(
        self, agent_id: str, exchanges: int | None, window_s: int | None, per_minute: int | None
    ) -> None:
        await self._run(
            lambda conn: conn.execute(
                loop_guards.SET_LIMITS, agent_id, exchanges, window_s, per_minute
            )
        )

    async def add_reply(
        self, reply: Reply, routed: NewEvent | None, guard: GuardedSend | None = None
    ) -> tuple[Reply, Published | None]:
        now = self.now()

        async def insert(conn: Connection) -> tuple[Reply, Published | None]:
            if guard is not None:
                await loop_guards.check(conn, guard, now)
            try:
                published = (await append(conn, [routed], now))[0] if routed else None
                stored = replace(reply, routed_event_id=published.event.id if published else None)
                data = await conn.fetchval(queries.INSERT_REPLY, *REPLIES.values(stored))
            except asyncpg.DataError as exc:  # its message may quote the reply: not shown
                raise InvalidInput(
                    "a reply holds what PostgreSQL cannot store: a NUL character in its text,"
                    " \\u0000 or NaN in its data, or an unpaired surrogate"
                ) from exc
            return replace(stored, data_json=data), published  # data as JSONB normalised it

        return await self._run(insert, transaction=True)

    async def replies(self, event_id: str) -> list[Reply]:
        async def select(conn: Connection) -> list[Reply]:
            rows = await conn.fetch(queries.LIST_REPLIES, event_id)
            return [REPLIES.record(row) for row in rows]

        return await self._run(select)

    async def record_attempts(self, attempts: Sequence[Attempt], *, durable: bool = True) -> None:
        now = self.now()
        await self._run(lambda conn: write_attempts(conn, attempts, now, "attempts", None))

    async def record_pushes(self, pushes: Sequence[tuple[str, Attempt]]) -> None:
        now = self.now()
        held = push_holders(pushes)
        event_ids = [event_id for event_id, _ in held]
        agent_ids = [agent_id for _, agent_id in held]
        holders = list(held.values())

        async def record(conn: Connection) -> None:
            await conn.execute(queries.RECORD_PUSHES, event_ids, agent_ids, now, holders)
            agent = one_agent(agent_ids)
            await write_attempts(conn, [attempt for _, attempt in pushes], now, "pushes", agent)

        await self._run(record, transaction=True)

    async def attempts(self, event_id: str) -> list[Attempt]:
        async def select(conn: Connection) -> list[Attempt]:
            rows = await conn.fetch(queries.LIST_ATTEMPTS, event_id)
            return [ATTEMPTS.record(row) for row in rows]

        return await self._run(select)

    async def expire(self) -> int:
        now = self.now()

        async def mark(conn: Connection) -> int:
            await mark_gaps_of_expiry(conn, now)
            rows = await conn.fetch(queries.EXPIRE, now)
            entry = JournalEntry(expired=tuple(sorted(row["id"] for row in rows)))
            agent = one_agent(row["agent_id"] for row in rows)
            await write(conn, record(now, "expire", agent, entry))
            return len(rows)

        return await self._run(mark, transaction=True)

    async def prune(self, finished_before_ms: int) -> int:
        now = self.now()

        async def delete(conn: Connection) -> int:
            await conn.execute(queries.GAPS_OF_PRUNING, now, finished_before_ms)
            await conn.execute(queries.FOLD_ATTEMPT_COUNTS)
            return count(await conn.execute(queries.PRUNE, finished_before_ms))

        return await self._run(delete)


async def _on(conn: Connection, operation: Operation[T], transaction: bool) -> T:
    """Run ``operation`` on ``conn``, in a transaction if asked."""
    if not transaction:
        return await operation(conn)
    async with conn.transaction():
        return await operation(conn)
