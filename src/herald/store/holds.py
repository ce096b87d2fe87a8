"""Which window holds each event of a batch back from being pushed, the same on every backend
(``herald.push_windows`` says what the rules are): the backends read the windows open and write
the ones opened, in the transaction that stores the events."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from herald.ids import new_id
from herald.models import HoldReason, NewEvent

WindowKey = tuple[str, str]
"""An agent's id and the name of one of its rules (``Hold.rule``)."""
NewWindow = tuple[str, str, str, str, int, int]
"""A window opened: its id, agent's id, reason, rule, when it opened and when it ends."""


def held_keys(events: Sequence[NewEvent], agents: Mapping[str, str]) -> set[WindowKey]:
    """The windows the events' rules may be held by (of agents that exist)."""
    return {
        (agents[new.to], new.hold.rule)
        for new in events
        if new.hold is not None and new.to in agents
    }


def decide(
    events: Sequence[NewEvent],
    agents: Mapping[str, str],
    open_windows: Mapping[WindowKey, str],
    nows: Sequence[int],
) -> tuple[list[NewEvent], list[NewWindow]]:
    """Each event with the window that holds it (``held_by``), in batch order, and the windows
    it opens: an event whose rule's window is open (``open_windows``, or opened by an event
    before it) is held by it; one whose rule has none open opens one, and is held by it in quiet
    hours, or pushed as the first of a digest's burst."""
    windows = dict(open_windows)
    opened: list[NewWindow] = []
    decided = []
    for new, now in zip(events, nows, strict=True):
        hold = new.hold
        if hold is None or new.to not in agents:
            decided.append(new)
            continue
        key = (agents[new.to], hold.rule)
        window = windows.get(key)
        if window is not None:
            decided.append(replace(new, held_by=window))
            continue
        window = windows[key] = new_id("win_")
        opened.append((window, key[0], hold.reason.value, hold.rule, now, hold.until))
        first_held = hold.reason is HoldReason.QUIET_HOURS
        decided.append(replace(new, held_by=window) if first_held else new)
    return decided, opened
