"""Each agent's own rules for what is pushed to it, set by the operator or by the agent: the
preferences part of the hub (``hub.preferences``)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from herald.errors import HeraldError, NotFound
from herald.ids import is_id
from herald.inputs.agents import PreferencesInput
from herald.inputs.refusals import parse
from herald.models import NO_PREFERENCES, Agent, Preferences
from herald.store import Store

log = logging.getLogger(__name__)

REMEMBERED_MS = 1000
"""How long an agent's preferences read from the store are used without reading them again:
another process's change is followed within it."""
REMEMBERED_AGENTS = 10_000


class PreferenceBook:
    """Reads and replaces agents' preferences. A push reads them for each batch of events it
    offers: they are remembered, and read again from the store a second (by the store's clock)
    after they were, while the pushes go on with what was remembered; a change made here is
    seen at once. One read of an agent's preferences at a time: the 10,000 streams of one agent
    wait on the same read, not 10,000 of them."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._known: dict[str, tuple[Preferences, int, int]] = {}
        """By agent: the preferences, when they were read and until when they are used as read."""
        self._reading: dict[str, asyncio.Task[Preferences]] = {}
        self._changes = 0  # changes made here: a read begun before one is not remembered

    async def of(self, agent_id: str) -> Preferences:
        """The agent's preferences (none for an agent that no longer exists)."""
        remembered = self.remembered(agent_id)
        if remembered is None:
            # shielded: a caller that gives up leaves the read to the others waiting on it
            return await asyncio.shield(self._read(agent_id))
        return remembered

    def remembered(self, agent_id: str) -> Preferences | None:
        """The agent's preferences as remembered (None: not remembered; ``of`` reads them),
        read again in the background when they are a second old. No coroutine: each of an
        agent's streams asks for them for every event it writes."""
        cached = self._known.get(agent_id)
        if cached is None:
            return None
        preferences, read_at, fresh_until = cached
        # A clock set back ends what was remembered too, or it could be kept for good.
        if not read_at <= self._store.now() < fresh_until:
            self._read(agent_id)  # in the background: this push goes on with what is known
        return preferences

    def _read(self, agent_id: str) -> asyncio.Task[Preferences]:
        """The read of the agent's preferences under way, or a new one."""
        reading = self._reading.get(agent_id)
        if reading is None:
            reading = asyncio.get_running_loop().create_task(self._load(agent_id))
            self._reading[agent_id] = reading
            reading.add_done_callback(lambda done: self._read_ended(agent_id, done))
        return reading

    def _read_ended(self, agent_id: str, done: asyncio.Task[Preferences]) -> None:
        self._reading.pop(agent_id, None)
        if not done.cancelled() and isinstance(done.exception(), HeraldError):
            # a refresh nobody waits on: what was remembered is used until the next one
            log.debug("preferences of %s not read again: %s", agent_id, done.exception())

    async def _load(self, agent_id: str) -> Preferences:
        now, changes = self._store.now(), self._changes
        agent = await self._store.get_agent(agent_id) if is_id(agent_id, "agt_") else None
        preferences = Preferences.from_json(agent.preferences_json) if agent else NO_PREFERENCES
        if changes == self._changes:
            if len(self._known) >= REMEMBERED_AGENTS:
                self._known.clear()
            self._known[agent_id] = (preferences, now, now + REMEMBERED_MS)
        return preferences

    async def put(self, agent_id: str, raw: Any) -> Agent:
        """Replace the agent's preferences with ``raw`` (every key not given is no rule), and
        answer the agent as it is now.

        Raises:
            InvalidInput: an unknown key or a bad value, named with what to send.
            NotFound: no such agent.
        """
        checked = parse(PreferencesInput, raw).to_json()
        if not is_id(agent_id, "agt_") or not await self._store.set_agent_preferences(
            agent_id, checked
        ):
            raise NotFound(f"no agent has the id {agent_id!r}")
        self._changes += 1
        self._known.pop(agent_id, None)
        agent = await self._store.get_agent(agent_id)
        if agent is None:
            raise NotFound(f"no agent has the id {agent_id!r}")
        return agent
