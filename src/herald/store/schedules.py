"""What schedules do the same on every backend: the placeholder seqs of scheduled events, the
attempt a cancel records, and why an event cannot be cancelled.

A scheduled event is stored with a seq below zero, each agent's next one down, so that it holds
no place in the agent's sequence (which cursors, streams and the journal follow) until it is due:
then it takes the agent's next seq, as a publish at that moment would have. Placeholders go down
in the order events are scheduled, within a batch as from one batch to the next: the lower, the
newer. So an agent's listing reads its events not yet numbered newest first by seq, ascending,
and events due at the same moment are numbered in the order they were scheduled (seq
descending)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from herald.models import Attempt, Event, EventStatus

CANCEL = "cancel"
"""The mechanism a cancel is recorded under (outcome ``cancelled``)."""
CANCELLED = EventStatus.CANCELLED.value


def first_placeholders(lowest: Mapping[str, int], added: Mapping[str, int]) -> dict[str, int]:
    """The first placeholder seq of each agent's ``added`` scheduled events, numbered upwards
    from it, all below ``lowest`` (the agent's lowest seq stored, or 0 if it has none below)."""
    return {agent_id: min(lowest.get(agent_id, 0), 0) - count for agent_id, count in added.items()}


def going_down(
    stored: Sequence[Event], first: Mapping[str, int], added: Mapping[str, int]
) -> list[Event]:
    """Scheduled events numbered upwards from each agent's ``first`` placeholder (its ``added``
    events, ``AppendPlan.numbered``) given the same placeholders downwards: the first of each
    agent's the highest, so that its placeholders go down in the order they were scheduled."""
    return [replace(e, seq=2 * first[e.agent_id] + added[e.agent_id] - 1 - e.seq) for e in stored]


def cancel_attempt(event_id: str, now: int, status: str) -> Attempt:
    """A cancel, as the event's history shows it: what it was when it was cancelled."""
    was = "scheduled" if status == EventStatus.SCHEDULED.value else "pending, recalled"
    return Attempt(event_id, now, CANCEL, CANCELLED, None, f"cancelled while {was}")


def why_not_cancellable(status: str, handed_out: int, leased: bool, tried: bool) -> str | None:
    """Why an event cannot be cancelled (None: it can): only a scheduled event, or a pending one
    that nothing handed out (leased, pushed, delivered) or began to deliver (an attempt, a
    webhook delivery scheduled) can."""
    if status == EventStatus.SCHEDULED.value:
        return None
    if status != EventStatus.PENDING.value:
        return (
            f"it is {status}, not scheduled or pending; only an event nothing has handed out"
            " can be cancelled"
        )
    if handed_out or leased:
        return "it was handed out already (leased by a drain or a poll), so it may have been seen"
    if tried:
        return (
            "a way of delivery has tried it already (a push, or a webhook delivery is scheduled),"
            " so it may have been seen"
        )
    return None
