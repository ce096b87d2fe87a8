"""Each agent's own rules for what is pushed to it, set by the operator or by the agent: the
preferences part of the hub (``hub.preferences``)."""

from __future__ import annotations

from typing import Any

from herald.errors import NotFound
from herald.ids import is_id
from herald.inputs.agents import PreferencesInput
from herald.inputs.refusals import parse
from herald.models import NO_PREFERENCES, Agent, Preferences
from herald.store import Store

REMEMBERED_MS = 1000
"""How long an agent's preferences read from the store are used without reading them again:
another process's change is followed within it."""
REMEMBERED_AGENTS = 10_000


class PreferenceBook:
    """Reads and replaces agents' preferences. A push reads them for each batch of events it
    offers: they are remembered for a second by the store's clock, not read each time; a change
    made here is seen at once."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._known: dict[str, tuple[Preferences, int]] = {}

    async def of(self, agent_id: str) -> Preferences:
        """The agent's preferences (none for an agent that no longer exists)."""
        now = self._store.now()
        cached = self._known.get(agent_id)
        # A clock set back ends what was remembered too, or it could be kept for good.
        if cached is not None and cached[1] <= now < cached[1] + REMEMBERED_MS:
            return cached[0]
        agent = await self._store.get_agent(agent_id) if is_id(agent_id, "agt_") else None
        preferences = Preferences.from_json(agent.preferences_json) if agent else NO_PREFERENCES
        if len(self._known) >= REMEMBERED_AGENTS:
            self._known.clear()
        self._known[agent_id] = (preferences, now)
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
        self._known.pop(agent_id, None)
        agent = await self._store.get_agent(agent_id)
        if agent is None:
            raise NotFound(f"no agent has the id {agent_id!r}")
        return agent
