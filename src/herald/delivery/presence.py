"""This process's live sessions, kept registered in the store so that every process sharing it
sees them (the webhook worker's hold-back, ``GET /v1/agents/{id}/sessions``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import replace

from herald.delivery.sessions import LiveSession
from herald.errors import NotFound
from herald.hub import Hub
from herald.ids import new_id
from herald.models import SessionRecord

log = logging.getLogger("herald.delivery")

CLOSE_TIMEOUT_S = 5.0
"""How long a closing process spends taking its sessions out of the store; what it leaves
expires on its own."""


class PresenceKeeper:
    """Puts each session in the store when it connects, removes it when it ends, and refreshes
    the expiry of all of them every third of ``ttl_s``. One task does it all, in order, so a
    session that ends at once is never registered after its removal. A store that fails is
    retried at the next refresh; the store's expiry is the bound either way.

    Args:
        hub: whose presence part keeps the records, and whose clock times them.
        ttl_s: how long a record lives without a refresh.
    """

    def __init__(self, hub: Hub, ttl_s: float) -> None:
        self.hub = hub
        self.ttl_ms = int(ttl_s * 1000)
        self.refresh_every_s = ttl_s / 3
        self.process = new_id("prc_")
        self._live: dict[str, SessionRecord] = {}
        self._changes: asyncio.Queue[SessionRecord | str] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._settled = asyncio.Event()
        self._settled.set()

    def joined(self, session: LiveSession) -> None:
        record = self._record(session)
        self._live[session.id] = record
        self._change(record)

    def left(self, session_id: str) -> None:
        if self._live.pop(session_id, None) is not None:
            self._change(session_id)

    async def live(self, agent_id: str) -> list[SessionRecord]:
        """The agent's live sessions in every process: this process's as it knows them now
        (a change may not be written yet), the others' as the store has them."""
        here = [record for record in self._live.values() if record.agent_id == agent_id]
        elsewhere = [
            record
            for record in await self.hub.presence.live(agent_id)
            if record.process != self.process
        ]
        return sorted(here + elsewhere, key=lambda record: (record.connected_at, record.id))

    async def settled(self, timeout_s: float = 10.0) -> None:
        """Wait until every change so far is written (or failed and left to the refresh).

        Raises:
            TimeoutError: not within ``timeout_s``.
        """
        async with asyncio.timeout(timeout_s):
            await self._settled.wait()

    async def close(self) -> None:
        """Write what is queued (bounded), then stop."""
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            await self.settled(CLOSE_TIMEOUT_S)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    def _change(self, change: SessionRecord | str) -> None:
        self._settled.clear()
        self._changes.put_nowait(change)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="herald-presence")

    def _record(self, session: LiveSession) -> SessionRecord:
        caps, now = session.caps, self.hub.now()
        return SessionRecord(
            id=session.id,
            agent_id=session.agent.id,
            process=self.process,
            transport=caps.transport,
            era=caps.era,
            connected_at=int(session.connected_at * 1000),
            seen_at=now,
            expires_at=now + self.ttl_ms,
            client_name=caps.client_name,
            client_version=caps.client_version,
            capabilities_json=json.dumps(caps.to_json(), separators=(",", ":")),
            can_push=bool(session.peer.push_paths),
        )

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        refresh_at = loop.time() + self.refresh_every_s
        while True:
            if self._changes.empty():
                self._settled.set()
            wait = refresh_at - loop.time()
            if wait > 0:
                try:
                    async with asyncio.timeout(wait):
                        change = await self._changes.get()
                except TimeoutError:
                    pass
                else:
                    # Written outside the refresh's deadline: a write cut short would leave
                    # an ended session registered until it expires.
                    await self._apply(change)
                    continue
            refresh_at = loop.time() + self.refresh_every_s
            await self.refresh()

    async def _apply(self, change: SessionRecord | str) -> None:
        try:
            if isinstance(change, str):
                await self.hub.presence.remove(change)
            elif change.id in self._live:
                await self.hub.presence.put(self._fresh(change))
        except NotFound:  # its agent was deleted: nothing to keep
            if not isinstance(change, str):
                self._live.pop(change.id, None)
        except Exception:  # the task's top level: the next refresh puts it again
            log.warning("could not register a change of session in the store", exc_info=True)

    async def refresh(self) -> None:
        """Move the expiry of every live session of this process on (the loop does it every
        third of the TTL); put back any the store no longer has. A failure is logged."""
        ids = list(self._live)
        try:
            kept = await self.hub.presence.refresh(ids, self.hub.now() + self.ttl_ms)
            if kept < len(ids):  # some expired or were never written: put them again
                for record in list(self._live.values()):
                    await self._apply(record)
        except Exception:  # the task's top level: try again at the next refresh
            log.warning("could not refresh this process's sessions in the store", exc_info=True)

    def _fresh(self, record: SessionRecord) -> SessionRecord:
        now = self.hub.now()
        return replace(record, seen_at=now, expires_at=now + self.ttl_ms)
