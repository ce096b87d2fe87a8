"""Group commit: appends that arrive while one is in flight are stored next as one batch in one
transaction (one lock per agent, one commit), and each caller gets its answer only after that
commit. An append alone with one event is one statement: one round trip. Once a group is
committed, the store is told what each append created before any of their callers is answered,
so that the pushes of the events are under way before the answers to their publishes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Sequence

import asyncpg

from herald.errors import InvalidInput
from herald.models import NewEvent, Published
from herald.store.postgres.append import PendingAppend, append, append_group
from herald.store.postgres.errors import refused
from herald.store.postgres.rows import Connection, Runner

log = logging.getLogger("herald.store.postgres")

MAX_GROUP = 1000
"""The most events that appends waiting together are committed with (unless one has more)."""


class Writer:
    """The task that commits appends, started by the first to wait and ended when none is left."""

    def __init__(self, run: Runner, committed: Callable[[list[Published]], None]) -> None:
        self._run = run
        self._committed = committed
        """Told each append's answer once it is committed, before its caller gets it."""
        self._waiting: deque[PendingAppend] = deque()
        self._task: asyncio.Task[None] | None = None

    async def append(self, events: Sequence[NewEvent], now: int) -> list[Published]:
        """Store the events once the appends waiting before them are committed."""
        job = PendingAppend(list(events), now, asyncio.get_running_loop().create_future())
        self._waiting.append(job)
        if self._task is None:
            self._task = asyncio.create_task(self._write())
        return await job.answer

    async def drain(self) -> None:
        """Wait until the appends already accepted are committed."""
        if self._task is not None:
            await asyncio.wait([self._task])

    async def _write(self) -> None:
        """Commit the waiting appends, a group at a time, until none is left."""
        try:
            while self._waiting:
                group = [self._waiting.popleft()]
                size = len(group[0].events)
                while self._waiting and size + len(self._waiting[0].events) <= MAX_GROUP:
                    size += len(self._waiting[0].events)
                    group.append(self._waiting.popleft())
                await self._commit([job for job in group if not job.answer.done()])
        finally:
            self._task = None
            while self._waiting:  # left only if the writer was cancelled: fail them, not hang
                self._waiting.popleft().answer.cancel()

    async def _commit(self, group: list[PendingAppend]) -> None:
        """Commit a group of appends as one, or each alone if the database refuses one of them,
        and answer their callers."""
        outcomes: list[list[Published] | Exception] | None = None
        try:
            if len(group) > 1:
                with contextlib.suppress(InvalidInput):  # then each alone, to fail alone
                    outcomes = await self._run(
                        lambda conn: append_group(conn, group), transaction=True
                    )
            if outcomes is None:
                outcomes = [await self._append_alone(job) for job in group]
        except asyncio.CancelledError:
            for job in group:
                job.answer.cancel()
            raise
        except Exception as exc:  # the group failed as a whole: nothing of it is stored
            outcomes = [exc] * len(group)
        for outcome in outcomes:
            if not isinstance(outcome, Exception):
                try:
                    self._committed(outcome)
                except Exception:  # a listener's fault: the writer goes on, its callers answered
                    log.exception("telling of new events failed")
        for job, outcome in zip(group, outcomes, strict=True):
            if job.answer.done():  # its caller gave up
                continue
            if isinstance(outcome, Exception):
                job.answer.set_exception(outcome)
            else:
                job.answer.set_result(outcome)

    async def _append_alone(self, job: PendingAppend) -> list[Published] | Exception:
        async def store(conn: Connection) -> list[Published]:
            try:
                return await append(conn, job.events, job.now)
            except asyncpg.DataError as exc:  # its message may quote the whole batch: not shown
                raise refused() from exc

        # One event is one statement: no transaction needed, unless a window may hold it.
        whole = len(job.events) > 1 or job.events[0].hold is not None
        try:
            return await self._run(store, transaction=whole)
        except Exception as exc:  # for its caller
            return exc
