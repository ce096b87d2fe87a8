"""The embedded store: one SQLite file in WAL mode, written by one thread with group commit.

Every operation runs on a single connection owned by a worker thread. The worker takes all the
operations waiting at that moment and runs them in one transaction, each inside its own savepoint,
then commits once: under load many publishes share one fsync, and each caller still gets its answer
only after the commit that made its write durable.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from herald.errors import Conflict, HeraldError, InvalidInput, NotFound, StoreUnavailable
from herald.events import (
    Agent,
    Attempt,
    Event,
    EventStatus,
    NewEvent,
    Published,
    Reply,
    new_id,
)
from herald.store import migrations
from herald.store.base import Clock, Store

T = TypeVar("T")
Operation = Callable[[sqlite3.Connection], T]

MAX_GROUP = 512
_EVENT_COLUMNS = (
    "id, agent_id, seq, type, text, data, created_at, status, dedupe_key, expires_at, status_at,"
    " sender, reply_to, reply_schema"
)
_AGENT_COLUMNS = "id, handle, key_hash, created_at, webhook_url, delivery, last_seq"
_OPEN = "status IN ('pending', 'sent')"
_UNEXPIRED = "(expires_at IS NULL OR expires_at > :now)"


@dataclass
class _Job:
    operation: Operation[Any]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop


class SQLiteStore(Store):
    """Store on a SQLite file. ``synchronous`` is SQLite's pragma: FULL (default) fsyncs each
    commit, NORMAL survives a crashed process but not a power cut."""

    def __init__(self, path: str, clock: Clock = time.time, synchronous: str = "FULL") -> None:
        super().__init__(clock)
        if synchronous.upper() not in {"FULL", "NORMAL", "EXTRA"}:
            raise InvalidInput(f"synchronous={synchronous!r}: use FULL, NORMAL or EXTRA")
        self.path = path
        self.synchronous = synchronous.upper()
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._open_error: BaseException | None = None

    async def open(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._work, name="herald-sqlite", daemon=True)
        self._thread.start()
        await asyncio.to_thread(self._ready.wait)
        if self._open_error is not None:
            self._thread = None
            raise StoreUnavailable(f"cannot open SQLite store {self.path!r}: {self._open_error}")

    async def close(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            await asyncio.to_thread(thread.join)

    # The worker thread

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=30000")
        _migrate(conn)
        return conn

    def _work(self) -> None:
        try:
            conn = self._connect()
        except (sqlite3.Error, OSError) as exc:
            self._open_error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            while (job := self._jobs.get()) is not None:
                group = [job]
                stop = False
                while len(group) < MAX_GROUP:
                    try:
                        more = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        stop = True
                        break
                    group.append(more)
                self._run_group(conn, group)
                if stop:
                    break
        finally:
            conn.close()

    def _run_group(self, conn: sqlite3.Connection, group: list[_Job]) -> None:
        outcomes: list[tuple[bool, Any]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            if len(group) == 1:  # alone in its transaction: no savepoint needed
                try:
                    outcomes.append((True, group[0].operation(conn)))
                except Exception as exc:  # handed to the caller
                    conn.execute("ROLLBACK")
                    outcomes.append((False, exc))
            else:
                for job in group:
                    conn.execute("SAVEPOINT job")
                    try:
                        outcomes.append((True, job.operation(conn)))
                        conn.execute("RELEASE job")
                    except Exception as exc:  # handed to the caller of this one job
                        conn.execute("ROLLBACK TO job")
                        conn.execute("RELEASE job")
                        outcomes.append((False, exc))
            if conn.in_transaction:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            outcomes = [(False, exc)] * len(group)
        for job, (ok, value) in zip(group, outcomes, strict=True):
            job.loop.call_soon_threadsafe(_settle, job.future, ok, value)

    async def _run(self, operation: Operation[T]) -> T:
        if self._thread is None:
            raise StoreUnavailable("the store is not open: call open() first")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put(_Job(operation, future, loop))
        try:
            return await future
        except HeraldError:
            raise
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"SQLite store failed: {exc}") from exc

    # Agents and settings

    async def create_agent(self, agent: Agent) -> None:
        def insert(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(
                    f"INSERT INTO agents ({_AGENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        agent.id,
                        agent.handle,
                        agent.key_hash,
                        agent.created_at,
                        agent.webhook_url,
                        agent.delivery_json,
                        agent.last_seq,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise Conflict(f"the handle {agent.handle!r} is taken; choose another") from exc

        await self._run(insert)

    async def get_agent(self, agent_id: str) -> Agent | None:
        return await self._one_agent("id = ?", agent_id)

    async def agent_by_key_hash(self, key_hash: str) -> Agent | None:
        return await self._one_agent("key_hash = ?", key_hash)

    async def _one_agent(self, where: str, value: str) -> Agent | None:
        def select(conn: sqlite3.Connection) -> Agent | None:
            row = conn.execute(
                f"SELECT {_AGENT_COLUMNS} FROM agents WHERE {where}",
                (value,),
            ).fetchone()
            return Agent(*row) if row else None

        return await self._run(select)

    async def list_agents(self) -> list[Agent]:
        def select(conn: sqlite3.Connection) -> list[Agent]:
            rows = conn.execute(f"SELECT {_AGENT_COLUMNS} FROM agents ORDER BY handle")
            return [Agent(*row) for row in rows]

        return await self._run(select)

    async def delete_agent(self, agent_id: str) -> bool:
        def delete(conn: sqlite3.Connection) -> bool:
            return conn.execute("DELETE FROM agents WHERE id = ?", (agent_id,)).rowcount > 0

        return await self._run(delete)

    async def set_agent_delivery(self, agent_id: str, delivery_json: str) -> bool:
        def update(conn: sqlite3.Connection) -> bool:
            return (
                conn.execute(
                    "UPDATE agents SET delivery = ? WHERE id = ?", (delivery_json, agent_id)
                ).rowcount
                > 0
            )

        return await self._run(update)

    async def get_setting(self, name: str) -> str | None:
        def select(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT value FROM settings WHERE name = ?", (name,)).fetchone()
            return row[0] if row else None

        return await self._run(select)

    async def set_setting_if_absent(self, name: str, value: str) -> str:
        def upsert(conn: sqlite3.Connection) -> str:
            conn.execute(
                "INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                (name, value),
            )
            return str(
                conn.execute("SELECT value FROM settings WHERE name = ?", (name,)).fetchone()[0]
            )

        return await self._run(upsert)

    # Events

    async def append(self, events: Sequence[NewEvent]) -> list[Published]:
        now = self.now()
        return await self._run(lambda conn: _append(conn, events, now))

    async def get_event(self, event_id: str) -> Event | None:
        def select(conn: sqlite3.Connection) -> Event | None:
            row = conn.execute(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE id = ?", (event_id,)
            ).fetchone()
            return _event(row) if row else None

        return await self._run(select)

    async def read_open(self, agent_id: str, after_seq: int, limit: int) -> list[Event]:
        params = {"agent": agent_id, "after": after_seq, "limit": limit, "now": self.now()}

        def select(conn: sqlite3.Connection) -> list[Event]:
            rows = conn.execute(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE agent_id = :agent AND {_OPEN}"
                f" AND seq > :after AND {_UNEXPIRED} ORDER BY seq LIMIT :limit",
                params,
            )
            return [_event(row) for row in rows]

        return await self._run(select)

    async def claim(
        self,
        agent_id: str,
        consumer: str,
        limit: int,
        lease_ms: int,
        mechanism: str,
        *,
        ack_up_to: int | None = None,
    ) -> list[Event]:
        now = self.now()

        def lease(conn: sqlite3.Connection) -> list[Event]:
            if ack_up_to is not None:
                _acknowledge(conn, agent_id, [], ack_up_to, consumer, now)
            events = _claimable(conn, agent_id, consumer, limit, now)
            conn.executemany(
                "UPDATE events SET lease_owner = ?, lease_until = ? WHERE id = ?",
                [(consumer, now + lease_ms, event.id) for event in events],
            )
            _insert_attempts(
                conn, [Attempt(e.id, now, mechanism, "leased", consumer) for e in events]
            )
            return events

        return await self._run(lease)

    async def take(self, agent_id: str, limit: int, mechanism: str, session: str) -> list[Event]:
        now = self.now()

        def deliver(conn: sqlite3.Connection) -> list[Event]:
            events = _claimable(conn, agent_id, session, limit, now)
            conn.executemany(
                "UPDATE events SET status = 'delivered', status_at = ?, lease_owner = NULL,"
                " lease_until = NULL WHERE id = ?",
                [(now, event.id) for event in events],
            )
            _insert_attempts(
                conn, [Attempt(e.id, now, mechanism, "delivered", session) for e in events]
            )
            return [_delivered(event, now) for event in events]

        return await self._run(deliver)

    async def ack(
        self,
        agent_id: str,
        *,
        ids: Sequence[str] = (),
        up_to_seq: int | None = None,
        consumer: str | None = None,
    ) -> int:
        now = self.now()
        ids = list(ids)

        return await self._run(
            lambda conn: _acknowledge(conn, agent_id, ids, up_to_seq, consumer, now)
        )

    async def mark_sent(self, agent_id: str, ids: Sequence[str]) -> int:
        now = self.now()
        ids = list(ids)

        def mark(conn: sqlite3.Connection) -> int:
            changed = 0
            for chunk in _chunks(ids, 500):
                marks = ", ".join("?" * len(chunk))
                changed += conn.execute(
                    "UPDATE events SET status = 'sent', status_at = ?"
                    f" WHERE agent_id = ? AND status = 'pending' AND id IN ({marks})",
                    [now, agent_id, *chunk],
                ).rowcount
            return changed

        return await self._run(mark)

    async def count_overdue(self, agent_id: str, before_ms: int) -> int:
        params = {"agent": agent_id, "before": before_ms, "now": self.now()}

        def count(conn: sqlite3.Connection) -> int:
            return int(
                conn.execute(
                    f"SELECT count(*) FROM events WHERE agent_id = :agent AND {_OPEN}"
                    f" AND status_at <= :before AND {_UNEXPIRED}",
                    params,
                ).fetchone()[0]
            )

        return await self._run(count)

    async def missing_after(self, agent_id: str, after_seq: int) -> int:
        def count(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT a.last_seq, count(e.id), coalesce(sum(e.status = 'expired'"
                f" OR (e.{_OPEN} AND e.expires_at <= :now)), 0)"
                " FROM agents a LEFT JOIN events e ON e.agent_id = a.id AND e.seq > :after"
                " WHERE a.id = :agent GROUP BY a.id",
                {"agent": agent_id, "after": after_seq, "now": self.now()},
            ).fetchone()
            return _missing(row, after_seq)

        return await self._run(count)

    async def add_reply(
        self, reply: Reply, routed: NewEvent | None
    ) -> tuple[Reply, Published | None]:
        now = self.now()

        def insert(conn: sqlite3.Connection) -> tuple[Reply, Published | None]:
            published = _append(conn, [routed], now)[0] if routed is not None else None
            stored = replace(reply, routed_event_id=published.event.id if published else None)
            conn.execute(
                "INSERT INTO replies (id, event_id, agent_id, text, data, created_at,"
                " routed_event_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    stored.id,
                    stored.event_id,
                    stored.agent_id,
                    stored.text,
                    stored.data_json,
                    stored.created_at,
                    stored.routed_event_id,
                ),
            )
            return stored, published

        return await self._run(insert)

    async def replies(self, event_id: str) -> list[Reply]:
        def select(conn: sqlite3.Connection) -> list[Reply]:
            rows = conn.execute(
                "SELECT id, event_id, agent_id, text, data, created_at, routed_event_id"
                " FROM replies WHERE event_id = ? ORDER BY created_at, id",
                (event_id,),
            )
            return [Reply(*row) for row in rows]

        return await self._run(select)

    async def record_attempts(self, attempts: Sequence[Attempt]) -> None:
        await self._run(lambda conn: _insert_attempts(conn, attempts))

    async def attempts(self, event_id: str) -> list[Attempt]:
        def select(conn: sqlite3.Connection) -> list[Attempt]:
            rows = conn.execute(
                "SELECT event_id, at, mechanism, outcome, session, error FROM attempts"
                " WHERE event_id = ? ORDER BY id",
                (event_id,),
            )
            return [Attempt(*row) for row in rows]

        return await self._run(select)

    async def expire(self) -> int:
        now = self.now()

        def mark(conn: sqlite3.Connection) -> int:
            return conn.execute(
                "UPDATE events SET status = 'expired', status_at = :now, lease_owner = NULL,"
                f" lease_until = NULL WHERE {_OPEN} AND expires_at IS NOT NULL"
                " AND expires_at <= :now",
                {"now": now},
            ).rowcount

        return await self._run(mark)

    async def prune(self, finished_before_ms: int) -> int:
        def delete(conn: sqlite3.Connection) -> int:
            return conn.execute(
                "DELETE FROM events WHERE status IN ('delivered', 'expired') AND status_at < ?",
                (finished_before_ms,),
            ).rowcount

        return await self._run(delete)


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():  # the caller was cancelled; the work is committed all the same
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS herald_migrations"
        " (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
    )
    conn.execute("BEGIN IMMEDIATE")
    try:
        applied = {row[0] for row in conn.execute("SELECT version FROM herald_migrations")}
        for migration in migrations.load("sqlite"):
            if migration.version in applied:
                continue
            code = "\n".join(
                line for line in migration.sql.splitlines() if not line.lstrip().startswith("--")
            )
            for statement in code.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO herald_migrations VALUES (?, ?, ?)",
                (migration.version, migration.name, int(time.time() * 1000)),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _append(conn: sqlite3.Connection, events: Sequence[NewEvent], now: int) -> list[Published]:
    """Store a batch: duplicates answered with the first event, then one seq reservation per
    agent and one multi-row insert for what is new."""
    agents = _agent_ids(conn, {new.to for new in events})
    results: list[Published | None] = []
    fresh: list[tuple[int, NewEvent, str]] = []
    first_of_key: dict[tuple[str, str], int] = {}
    for index, new in enumerate(events):
        agent_id = agents[new.to]
        if new.dedupe_key is not None:
            key = (agent_id, new.dedupe_key)
            if key in first_of_key:  # repeated inside this batch: filled in below
                results.append(None)
                continue
            row = conn.execute(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE agent_id = ? AND dedupe_key = ?", key
            ).fetchone()
            if row is not None:
                results.append(Published(_event(row), created=False))
                continue
            first_of_key[key] = index
        results.append(None)
        fresh.append((index, new, agent_id))
    next_seq = _reserve_seqs(conn, Counter(agent_id for _, _, agent_id in fresh))
    rows = []
    for index, new, agent_id in fresh:
        seq = next_seq[agent_id]
        next_seq[agent_id] += 1
        event = _new_event(new, agent_id, seq, now)
        rows.append(_event_row(event))
        results[index] = Published(event, created=True)
    conn.executemany(f"INSERT INTO events ({_EVENT_COLUMNS}) VALUES ({', '.join('?' * 14)})", rows)
    for index, new in enumerate(events):
        if results[index] is None:
            first = results[first_of_key[(agents[new.to], new.dedupe_key or "")]]
            assert first is not None
            results[index] = Published(first.event, created=False)
    return [result for result in results if result is not None]


def _agent_ids(conn: sqlite3.Connection, handles: set[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for handle in sorted(handles):
        row = conn.execute("SELECT id FROM agents WHERE handle = ?", (handle,)).fetchone()
        if row is None:
            raise NotFound(f"no agent has the handle {handle!r}; create it with POST /v1/agents")
        found[handle] = row[0]
    return found


def _reserve_seqs(conn: sqlite3.Connection, counts: Counter[str]) -> dict[str, int]:
    """Advance each agent's last seq by its count; returns the first seq reserved for each."""
    first: dict[str, int] = {}
    for agent_id, count in counts.items():
        (last,) = conn.execute(
            "UPDATE agents SET last_seq = last_seq + ? WHERE id = ? RETURNING last_seq",
            (count, agent_id),
        ).fetchone()
        first[agent_id] = last - count + 1
    return first


def _new_event(new: NewEvent, agent_id: str, seq: int, now: int) -> Event:
    return Event(
        id=new_id("evt_"),
        agent_id=agent_id,
        seq=seq,
        type=new.type,
        text=new.text,
        data_json=new.data_json,
        created_at=now,
        status=EventStatus.PENDING,
        dedupe_key=new.dedupe_key,
        expires_at=now + int(new.ttl_s * 1000) if new.ttl_s is not None else None,
        status_at=now,
        sender=new.sender,
        reply_to=new.reply_to,
        reply_schema_json=new.reply_schema_json,
    )


def _missing(row: Sequence[int] | None, after_seq: int) -> int:
    """Events after ``after_seq`` that will never be offered: expired, or no longer stored."""
    if row is None:
        return 0
    last_seq, stored, expired = row
    return max(last_seq - after_seq - stored, 0) + expired


def _acknowledge(
    conn: sqlite3.Connection,
    agent_id: str,
    ids: list[str],
    up_to_seq: int | None,
    consumer: str | None,
    now: int,
) -> int:
    done: list[str] = []
    if up_to_seq is not None:
        done += _mark_delivered(
            conn,
            "seq <= :up_to AND (:consumer IS NULL OR lease_owner IS NULL"
            " OR lease_owner = :consumer OR lease_until <= :now)",
            {"now": now, "agent": agent_id, "up_to": up_to_seq, "consumer": consumer},
        )
    for chunk in _chunks(ids, 500):
        named = {f"id{index}": value for index, value in enumerate(chunk)}
        marks = ", ".join(f":{name}" for name in named)
        done += _mark_delivered(conn, f"id IN ({marks})", {"now": now, "agent": agent_id, **named})
    _insert_attempts(conn, [Attempt(i, now, "ack", "delivered", consumer) for i in done])
    return len(done)


def _mark_delivered(conn: sqlite3.Connection, where: str, params: dict[str, Any]) -> list[str]:
    rows = conn.execute(
        "UPDATE events SET status = 'delivered', status_at = :now, lease_owner = NULL,"
        f" lease_until = NULL WHERE agent_id = :agent AND {_OPEN} AND {where} RETURNING id",
        params,
    )
    return [row[0] for row in rows]


def _claimable(
    conn: sqlite3.Connection, agent_id: str, consumer: str | None, limit: int, now: int
) -> list[Event]:
    rows = conn.execute(
        f"SELECT {_EVENT_COLUMNS} FROM events WHERE agent_id = :agent AND {_OPEN} AND {_UNEXPIRED}"
        " AND (lease_owner IS NULL OR lease_owner = :consumer OR lease_until <= :now)"
        " ORDER BY seq LIMIT :limit",
        {"agent": agent_id, "consumer": consumer, "now": now, "limit": limit},
    )
    return [_event(row) for row in rows]


def _insert_attempts(conn: sqlite3.Connection, attempts: Sequence[Attempt]) -> None:
    conn.executemany(
        "INSERT INTO attempts (event_id, at, mechanism, outcome, session, error)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [(a.event_id, a.at, a.mechanism, a.outcome, a.session, a.error) for a in attempts],
    )


def _event(row: Sequence[Any]) -> Event:
    values = list(row)
    values[7] = EventStatus(values[7])
    return Event(*values)


def _event_row(event: Event) -> tuple[Any, ...]:
    """An event as the values of ``_EVENT_COLUMNS``, in order."""
    return (
        event.id,
        event.agent_id,
        event.seq,
        event.type,
        event.text,
        event.data_json,
        event.created_at,
        event.status.value,
        event.dedupe_key,
        event.expires_at,
        event.status_at,
        event.sender,
        event.reply_to,
        event.reply_schema_json,
    )


def _delivered(event: Event, now: int) -> Event:
    return replace(event, status=EventStatus.DELIVERED, status_at=now)


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[start : start + size] for start in range(0, len(items), size)]
