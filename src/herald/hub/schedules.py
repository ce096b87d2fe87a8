"""When a scheduled event is due: ``deliver_at`` or ``delay_s`` as published, read against the
hub's clock, and what is refused (a time past, or further than 30 days ahead; a publish of which
only some events are scheduled)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from herald.errors import InvalidInput
from herald.models import NewEvent, is_scheduled
from herald.times import iso_ms
from herald.validation import MAX_DELAY_S, PAST_TOLERANCE_S

DUE_BATCH = 1_000
"""The most scheduled events one transaction makes pending."""
DUE_INTERVAL_S = 0.25
"""How often each process looks for scheduled events that fell due: within a second of their
time, with room for the look itself."""


def timed(events: Sequence[NewEvent], now: int) -> Sequence[NewEvent]:
    """The events with each scheduled one's due time (``deliver_at``) read against ``now``.

    Raises:
        InvalidInput: a ``deliver_at`` in the past (beyond a few seconds) or over 30 days ahead,
            or a publish some of whose events are scheduled and some not; the message names it.
    """
    if not any(is_scheduled(e) for e in events):
        return events
    due = []
    for index, event in enumerate(events):
        where = f"events[{index}]" if len(events) > 1 else "event"
        if not is_scheduled(event):
            raise InvalidInput(
                f"{where} has neither deliver_at nor delay_s, while other events of the batch"
                " have one: a publish is scheduled whole or not at all; give each event a time,"
                " or publish them apart"
            )
        due.append(replace(event, deliver_at=_due_at(event, now, where), delay_s=None))
    return due


def _due_at(event: NewEvent, now: int, where: str) -> int:
    if event.delay_s is not None:
        return now + round(event.delay_s * 1000)
    at = event.deliver_at
    assert at is not None
    if at < now - PAST_TOLERANCE_S * 1000:
        raise InvalidInput(
            f"{where}.deliver_at {iso_ms(at)} is in the past (herald's time is {iso_ms(now)});"
            " give a time to come, or leave it out to deliver the event now"
        )
    if at > now + MAX_DELAY_S * 1000:
        raise InvalidInput(
            f"{where}.deliver_at {iso_ms(at)} is more than 30 days ahead (herald's time is"
            f" {iso_ms(now)}); schedule it at most 30 days ahead"
        )
    return max(at, now)
