"""Pushes recorded in the background, many in one trip to the store.

A stream that pushes an event must record it (the event becomes ``sent``, an attempt says how),
but must not wait for the record before it pushes the next one: at a thousand events a second
over a hundred streams, two writes per push would hold every stream behind the store's writer.
So a stream hands its records to the process's ``PushRecorder`` and goes on; one task writes
whatever has gathered since its last write in one transaction. The record of a push outlives
the stream that made it (a client that leaves right after a push). A record still waiting when
the process dies is lost, and its event stays ``pending``: offered again, never lost.

Writes are at least ``RECORD_EVERY_S`` apart: under load, one transaction then carries the
pushes of many streams, rather than each few pushes taking a commit of their own beside the
publishes', whose latency the streams are there to keep low.
"""

from __future__ import annotations

import asyncio
import logging

from herald.hub import Hub
from herald.models import Attempt

log = logging.getLogger("herald.delivery")

MAX_BATCH = 5000
"""The most records one write carries."""
RECORD_EVERY_S = 0.05
"""The least time between two writes."""


class PushRecorder:
    """Writes pushes (``Hub.record_pushes``) for every stream of the process."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self._waiting: list[tuple[str, Attempt]] = []
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._written_at = float("-inf")
        """When the last write started, by the event loop's clock."""

    def add(self, agent_id: str, attempts: list[Attempt]) -> None:
        """Record these pushes of one agent's events soon; returns at once."""
        self._waiting.extend((agent_id, attempt) for attempt in attempts)
        self._idle.clear()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="herald-push-recorder")

    async def settled(self) -> None:
        """Wait until every push added so far is written (or its write failed and was logged)."""
        await self._idle.wait()

    async def _run(self) -> None:
        """Write until nothing waits, then end (the next ``add`` starts another)."""
        loop = asyncio.get_running_loop()
        while self._waiting:
            wait_s = self._written_at + RECORD_EVERY_S - loop.time()
            if wait_s > 0:
                await asyncio.sleep(wait_s)  # what comes meanwhile joins this write
            self._written_at = loop.time()
            batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
            try:
                await self.hub.record_pushes(batch)
            except Exception:  # a task of its own: log; the events stay pending, re-offered
                log.exception("recording %d pushes failed", len(batch))
        self._idle.set()
