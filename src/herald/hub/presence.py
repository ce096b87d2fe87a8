"""Live sessions as the store keeps them, so that every process sharing it sees them: the
presence part of the hub (``hub.presence``)."""

from __future__ import annotations

from collections.abc import Sequence

from herald.ids import is_id
from herald.models import SessionRecord
from herald.store import Store


class Presence:
    """Each process registers its live sessions with an expiry and refreshes it while they
    live; the sessions of a process that died drop out once their expiry passes."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def put(self, session: SessionRecord) -> None:
        """Register a live session, or replace its record.

        Raises:
            NotFound: its agent no longer exists.
        """
        await self._store.put_session(session)

    async def refresh(self, ids: Sequence[str], expires_at: int) -> int:
        """Move the expiry of these sessions; returns how many are still stored."""
        return await self._store.refresh_sessions(ids, expires_at) if ids else 0

    async def remove(self, session_id: str) -> bool:
        return await self._store.remove_session(session_id)

    async def live(self, agent_id: str) -> list[SessionRecord]:
        """The agent's unexpired sessions, in every process, oldest connection first."""
        return await self._store.live_sessions(agent_id) if is_id(agent_id, "agt_") else []
