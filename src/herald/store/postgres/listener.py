"""LISTEN for other processes' events (a hint that wakes local streams and sessions sooner),
inboxes changed by an acknowledgement or an expiry (any process's), changes of the event-type
catalogue, and webhook subscriptions deleted. A lost notification
costs latency only, since every reader also polls the table, and the catalogue is read again
once its copy is a few seconds old; a deletion not heard of leaves the deliveries this process
holds of it to be sent (at most a few per subscription, until its next claim).

The same connection holds the advisory locks that tell other processes this one lives (see
``claimants.py``): it is the one connection that lasts as long as the process, and PostgreSQL
lets the locks go the moment it ends."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

import asyncpg

from herald.store.postgres.errors import DRIVER_ERRORS

log = logging.getLogger("herald.store.postgres")

CHANNEL = "herald_events"
INBOX_CHANNEL = "herald_inbox"
CATALOGUE_CHANNEL = "herald_catalogue"
SUBSCRIPTIONS_CHANNEL = "herald_subscriptions"
MAX_BACKOFF_S = 30.0
HOLDING_BACKOFF_S = 1.0
"""The longest wait between tries while the connection holds locks: once PostgreSQL is back, a
process must have them again before the others take it for dead (``claimants.py``)."""
CHECK_EVERY_S = 1.0
CHECK_TIMEOUT_S = 2.0
"""While it holds locks, the connection is asked to answer every ``CHECK_EVERY_S``, within this
(and made within this): one whose server side is gone unnoticed (a failover, a NAT's timeout)
no longer holds the locks, and is made again before the others take the process for dead."""


class Listener:
    """One connection that LISTENs, and reconnects (with backoff) when it is lost."""

    def __init__(
        self,
        url: str,
        on_agents: Callable[[set[str]], None],
        on_catalogue: Callable[[], None] | None = None,
        *,
        on_subscription_deleted: Callable[[str], None] | None = None,
        on_inbox: Callable[[set[str]], None] | None = None,
    ) -> None:
        self.url = url
        self.on_agents = on_agents
        self.on_catalogue = on_catalogue
        self.on_subscription_deleted = on_subscription_deleted
        self.on_inbox = on_inbox
        self._task: asyncio.Task[None] | None = None
        self.listening = asyncio.Event()
        self._conn: asyncpg.Connection[Any] | None = None
        self._using = asyncio.Lock()
        """One query at a time on the connection: a lock taken while another is being taken."""
        self._keys: set[int] = set()
        self._held: set[int] = set()
        """Of ``_keys``, those the current connection holds (if there is one)."""
        self._refused: set[int] = set()
        """Of ``_keys``, those the current connection was refused: another session holds them."""
        self.connections = 0
        """How many connections were made: a lock held now and at an earlier look, with the
        same count, was held all along."""

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="herald-pg-listener")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        backoff = 0.5
        while True:
            try:
                await self._listen_until_lost()
                backoff = 0.5
            except (*DRIVER_ERRORS, TimeoutError) as exc:
                log.warning("LISTEN %s failed (%s); again in %.1fs", CHANNEL, exc, backoff)
            except Exception:  # this task must live as long as the store: log, try again
                log.exception("LISTEN %s failed; again in %.1fs", CHANNEL, backoff)
            self.listening.clear()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, HOLDING_BACKOFF_S if self._keys else MAX_BACKOFF_S)

    async def hold(self, key: int) -> bool:
        """Hold the advisory lock ``key`` from now on, on every connection this listener makes;
        whether it is held now (if not, it is taken at the next connection, or by calling this
        again)."""
        self._keys.add(key)
        async with self._using:
            if self._conn is not None and key not in self._held:
                await self._lock(self._conn, key)
        return self.holds(key)

    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    def holds(self, key: int) -> bool:
        return self.connected() and key in self._held

    def refused(self, key: int) -> bool:
        """Whether the current connection asked for ``key`` and another session holds it (a
        question that went unanswered is no refusal)."""
        return self.connected() and key in self._refused

    def holds_all(self, keys: Iterable[int]) -> bool:
        """Whether there is a connection now and it holds every one of ``keys``."""
        return self.connected() and all(key in self._held for key in keys)

    async def let_go(self, key: int) -> None:
        self._keys.discard(key)
        async with self._using:
            if self._conn is not None and key in self._held:
                self._held.discard(key)
                with contextlib.suppress(*DRIVER_ERRORS, TimeoutError):
                    unlock = "SELECT pg_advisory_unlock($1)"
                    await self._conn.fetchval(unlock, key, timeout=CHECK_TIMEOUT_S)

    async def _lock(self, conn: asyncpg.Connection[Any], key: int) -> None:
        # A lost connection: taken at the next one.
        with contextlib.suppress(*DRIVER_ERRORS, TimeoutError):
            lock = "SELECT pg_try_advisory_lock($1)"
            if await conn.fetchval(lock, key, timeout=CHECK_TIMEOUT_S):
                self._held.add(key)
                self._refused.discard(key)
            else:  # keys are random: an earlier connection of this process, not yet ended
                self._refused.add(key)
                log.warning("advisory lock %d is still held by an earlier session", key)

    async def _answers(self, conn: asyncpg.Connection[Any]) -> bool:
        try:
            async with self._using:
                await conn.fetchval("SELECT 1", timeout=CHECK_TIMEOUT_S)
        except (*DRIVER_ERRORS, TimeoutError):
            log.warning("the listening connection did not answer within %gs: made again",
                        CHECK_TIMEOUT_S)  # fmt: skip
            return False
        return True

    async def _listen_until_lost(self) -> None:
        bounded = CHECK_TIMEOUT_S if self._keys else None
        conn = await asyncpg.connect(
            self.url,
            server_settings={"application_name": "herald-listen"},
            timeout=bounded or 60,
            command_timeout=bounded,
        )
        lost = asyncio.Event()
        silent = False
        try:
            conn.add_termination_listener(lambda _conn: lost.set())
            await conn.add_listener(CHANNEL, self._notified)
            if self.on_catalogue is not None:
                await conn.add_listener(CATALOGUE_CHANNEL, self._catalogue_changed)
            if self.on_subscription_deleted is not None:
                await conn.add_listener(SUBSCRIPTIONS_CHANNEL, self._subscription_deleted)
            if self.on_inbox is not None:
                await conn.add_listener(INBOX_CHANNEL, self._inbox_changed)
            async with self._using:
                self._held, self._refused = set(), set()
                for key in sorted(self._keys):
                    await self._lock(conn, key)
                self._conn = conn
                self.connections += 1
            self.listening.set()
            while not lost.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(CHECK_EVERY_S):
                        await lost.wait()
                if not lost.is_set() and self._keys and not await self._answers(conn):
                    silent = True
                    break
        except (*DRIVER_ERRORS, TimeoutError):
            silent = True  # a question unanswered: the connection may be gone without a word
            raise
        finally:
            self._conn = None  # the session that held the locks is over
            if silent and not lost.is_set():  # no goodbye to wait for
                conn.terminate()
            else:
                with contextlib.suppress(*DRIVER_ERRORS, TimeoutError):
                    await conn.close(timeout=5)

    def _notified(self, conn: Any, pid: int, channel: str, payload: object) -> None:
        # Up to 200 agents' ids, joined by commas (migration 0036): one notification for each
        # agent cost a publish to a topic of 10,000 agents as many wake-ups in every process.
        self.on_agents(set(str(payload).split(",")))

    def _catalogue_changed(self, conn: Any, pid: int, channel: str, payload: object) -> None:
        if self.on_catalogue is not None:
            self.on_catalogue()

    def _subscription_deleted(self, conn: Any, pid: int, channel: str, payload: object) -> None:
        if self.on_subscription_deleted is not None:
            self.on_subscription_deleted(str(payload))

    def _inbox_changed(self, conn: Any, pid: int, channel: str, payload: object) -> None:
        if self.on_inbox is not None:
            self.on_inbox({str(payload)})
