"""Pushes recorded in the background, many in one trip to the store.

A stream that pushes an event must record it (the event becomes ``sent``, an attempt says how),
but must not wait for the record before it pushes the next one: at a thousand events a second
over a hundred streams, two writes per push would hold every stream behind the store's writer.
So a stream hands its records to the hub's ``PushRecorder`` (``Hub.pushes``) and goes on; one
task writes whatever has gathered since its last write at once (``Store.record_pushes``). The
record of a push outlives the stream that made it (a client that leaves right after a push). A
record still waiting when the process dies is lost, and its event stays ``pending``: offered
again, never lost.

Writes are at least ``RECORD_EVERY_S`` apart: under load, one write then carries the pushes of
many streams, rather than each few pushes taking a trip to the store of their own beside the
publishes, whose latency the streams are there to keep low. A cursor is an acknowledgement of
what its subscription was handed, which the store knows only once the pushes are written: so
before a cursor acknowledges, ``written`` has what was pushed to its agent so far written at
once (and only then: another agent's pushes do not hold it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from herald.models import Attempt

log = logging.getLogger("herald.delivery")

MAX_BATCH = 5000
"""The most records one write carries."""
RECORD_EVERY_S = 0.05
"""The least time between two writes, unless a cursor waits for them."""

Pushes = Sequence[tuple[str, Attempt]]


class PushRecorder:
    """Writes the pushes of every stream of the process: each ``(agent_id, attempt)``."""

    def __init__(self, write: Callable[[Pushes], Awaitable[None]]) -> None:
        self._write = write
        self._waiting: list[tuple[str, Attempt]] = []
        self._task: asyncio.Task[None] | None = None
        self._written_at = float("-inf")
        """When the last write started, by the event loop's clock."""
        self._added = 0
        self._done = 0
        """Pushes added, and pushes written (or whose write failed and was logged), so far."""
        self._added_through: dict[str, int] = {}
        """For each agent with pushes not yet written, ``_added`` after its last one."""
        self._progress = asyncio.Condition()
        self._hurry = asyncio.Event()

    def add(self, agent_id: str, attempts: list[Attempt]) -> None:
        """Record these pushes of one agent's events soon; returns at once."""
        self._waiting.extend((agent_id, attempt) for attempt in attempts)
        self._added += len(attempts)
        self._added_through[agent_id] = self._added
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="herald-push-recorder")

    async def written(self, agent_id: str | None = None) -> None:
        """Wait until every push added so far (of ``agent_id``'s events, if given) is written,
        or its write failed and was logged, writing them now rather than at the next turn."""
        target = self._added if agent_id is None else self._added_through.get(agent_id, 0)
        if self._done >= target:
            return
        self._hurry.set()
        async with self._progress:
            await self._progress.wait_for(lambda: self._done >= target)

    async def _run(self) -> None:
        """Write until nothing waits, then end (the next ``add`` starts another)."""
        loop = asyncio.get_running_loop()
        while self._waiting:
            wait_s = self._written_at + RECORD_EVERY_S - loop.time()
            if wait_s > 0 and not self._hurry.is_set():
                # What comes meanwhile joins this write; a cursor waiting for it cuts it short.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._hurry.wait(), wait_s)
            self._hurry.clear()
            self._written_at = loop.time()
            batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
            try:
                await self._write(batch)
            except Exception:  # a task of its own: log; the events stay pending, re-offered
                log.exception("recording %d pushes failed", len(batch))
            self._done += len(batch)
            if not self._waiting:
                self._added_through.clear()  # all written
            async with self._progress:
                self._progress.notify_all()
