"""Which window holds each event of a batch back from being pushed, the same on every backend
(``herald.push_windows`` says what the rules are): the backends read the windows open and write
the ones opened, in the transaction that stores the events."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from herald.ids import new_id
from herald.models import HoldReason, NewEvent

WindowLook = tuple[str, str, int]
"""An agent's id, the name of one of its rules (``Hold.rule``) and a time: the window of that
rule open then (opened at or before it, ending after it) is looked for."""
NewWindow = tuple[str, str, str, str, int, int]
"""A window opened: its id, agent's id, reason, rule, when it opened and when it ends."""


def looks(
    events: Sequence[NewEvent], agents: Mapping[str, str], nows: Sequence[int]
) -> set[WindowLook]:
    """The windows the events' rules may be held by (of agents that exist), each at the time
    of the event (its publish, or a scheduled one's due time)."""
    return {
        (agents[new.to], new.hold.rule, now)
        for new, now in zip(events, nows, strict=True)
        if new.hold is not None and new.to in agents
    }


def decide(
    events: Sequence[NewEvent],
    agents: Mapping[str, str],
    found: Mapping[WindowLook, str],
    nows: Sequence[int],
) -> tuple[list[NewEvent], list[NewWindow]]:
    """Each event with the window that holds it (``held_by``), in batch order, and the windows
    it opens: an event whose rule has a window open at its time (``found`` in the store, or
    opened by an event of the batch before it) is held by it; one whose rule has none opens one,
    and is held by it in quiet hours, or pushed as the first of a digest's burst."""
    opened: list[NewWindow] = []
    decided = []
    for new, now in zip(events, nows, strict=True):
        hold = new.hold
        if hold is None or new.to not in agents:
            decided.append(new)
            continue
        agent_id = agents[new.to]
        window = None
        for w in reversed(opened):  # most batches open none
            if w[1] == agent_id and w[3] == hold.rule and w[4] <= now < w[5]:
                window = w[0]
                break
        else:
            window = found.get((agent_id, hold.rule, now))
        if window is not None:
            decided.append(new.with_hold(hold, window))
            continue
        window = new_id("win_")
        opened.append((window, agent_id, hold.reason.value, hold.rule, now, hold.until))
        first_held = hold.reason is HoldReason.QUIET_HOURS
        decided.append(new.with_hold(hold, window) if first_held else new)
    return decided, opened
