"""``events/poll``: the cursor acknowledges, then the next events come, as a heartbeat drains.

A null cursor starts a subscription: no events, and a cursor just before the agent's oldest
unacknowledged matching event, so that nothing pending is skipped (but what ``maxAgeMs`` says is
too old: ``truncated``). Each later cursor acknowledges the matching events up to it that this
subscription was handed or that were pushed, and the oldest open matching events are leased to
it; the same cursor again (a lost answer) gets the same events. An answer whose cursor passes
events that will never be offered (expired, or pruned: the cursor was outside retention) says
``truncated``. So does the answer to a cursor given in another history of the store (before a
restore): it acknowledges nothing, and the events come from the oldest pending one.

Every answer reads a bounded part of the backlog (``HubConfig.scan_events`` seqs): a poll whose
types match nothing in a long backlog answers with no events, a cursor where its look ended, and
``hasMore`` (``nextPollMs`` 0), so the client goes on from there without reading it again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from herald import cursors
from herald.config import DEFAULTS
from herald.hub import Hub
from herald.inputs.subscriptions import PollInput
from herald.models import Agent, Drained, StartPosition
from herald.subscriptions import catalogue
from herald.subscriptions.catalogue import Subscription

DEFAULT_MAX_EVENTS = 20


async def start(
    hub: Hub, agent: Agent, subscription: Subscription, max_age_ms: int | None
) -> StartPosition:
    """Where a subscription with a null cursor starts: just before the oldest open matching
    event not older than ``max_age_ms``."""
    floor = hub.now() - max_age_ms if max_age_ms is not None else None
    return await hub.start_position(agent, subscription.match, floor)


async def poll(
    hub: Hub,
    agent: Agent,
    params: PollInput,
    *,
    idle_ms: int = DEFAULTS.events.poll_idle_ms,
    flowing_ms: int = DEFAULTS.events.poll_flowing_ms,
    looked: Callable[[int], None] = lambda seqs: None,
) -> dict[str, Any]:
    """The ``events/poll`` result for ``agent``, wire-shaped. ``idle_ms`` and ``flowing_ms`` are
    the ``nextPollMs`` after a poll that found nothing, and after one that found some events.
    ``looked`` is told how many of the agent's events the poll looked at (a start: the most
    it may, ``hub.scan_events``), once it is answered.

    Raises:
        NotFound: no entry of that name.
        InvalidInput: bad arguments, a cursor herald did not give this agent, or one past the
            agent's newest event (CursorAhead); nothing changes.
    """
    subscription = await catalogue.resolve(hub, params.name, params.arguments)
    history = await hub.history()
    given = cursors.decode(params.cursor, agent, history) if params.cursor is not None else None
    if params.cursor is None:
        position = await start(hub, agent, subscription, params.max_age_ms)
        events: list[dict[str, Any]] = []
        cursor, truncated = position.cursor, position.skipped > 0
        has_more = position.waiting > 0 or position.more
        looked(hub.scan_events)
    else:
        limit = params.max_events or DEFAULT_MAX_EVENTS
        # A cursor of another history acknowledges nothing and is no place in this one: every
        # pending event comes again, from the oldest, and the answer says history was lost.
        drained = await hub.poll(
            agent, subscription.key, subscription.match, cursor=given or 0, limit=limit
        )
        events = [catalogue.occurrence(event, params.name) for event in drained.events]
        cursor, has_more = drained.cursor, len(drained.events) == limit or drained.more
        looked(drained.looked)
        truncated = given is None or await _passed_a_loss(hub, agent, subscription, given, drained)
    return {
        "events": events,
        "cursor": cursors.encode(agent, history, cursor),
        "truncated": truncated,
        "hasMore": has_more,
        "nextPollMs": 0 if has_more else flowing_ms if events else idle_ms,
    }


async def _passed_a_loss(
    hub: Hub, agent: Agent, subscription: Subscription, given: int, drained: Drained
) -> bool:
    """Whether the answer's cursor passes events the agent will never be offered: matching ones
    that expired, or any pruned (the given cursor was outside retention). Told once, by the
    answer that passes them; an answer whose events follow the given cursor seq by seq passes
    none."""
    if drained.cursor - given == len(drained.events):
        return False
    return await hub.missing_after(agent, given, drained.cursor, subscription.match) > 0
