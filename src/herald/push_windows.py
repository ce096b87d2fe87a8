"""Quiet hours and digests: which of an agent's rules holds an event back from being pushed, when
its window ends, and the summary pushed then.

In an agent's quiet hours (on the wall clock of its IANA time zone, across midnight and daylight
saving changes) nothing but urgent events is pushed; when they end, one summary says how many
arrived and of which types. In a digest, the first event of a burst of its types is pushed and
opens a window; the rest of the window are held, and one summary follows at its end. A held event
is kept all the same: drained, read from the inbox and acknowledged on its own. The hub reads the
rule at the publish (``hold_for``); the store decides in the transaction that stores the event
which window holds it, so every process agrees.
"""

from __future__ import annotations

import datetime
import functools
import json
import zoneinfo
from collections.abc import Mapping

from herald.models import (
    Hold,
    HoldReason,
    NewEvent,
    Preferences,
    Priority,
    PushWindow,
    QuietHours,
)
from herald.times import iso_ms

SUMMARY_TYPE = "herald.summary"
"""The type of the event that sums up a window's held events (only herald sends it)."""
QUIET_RULE = "quiet_hours"
"""The name of the quiet hours' windows, followed by when they end: each night has its own
(a digest's is ``Digest.rule``)."""


def hold_for(event: NewEvent, preferences: Preferences, now: int) -> Hold | None:
    """The rule that may hold ``event`` back, published at ``now`` (None: none does). Urgent
    events pass every rule; low and muted ones are never pushed anyway, so no rule counts them;
    a summary is never held. Quiet hours come first, then the first digest whose types match."""
    if event.priority in (Priority.URGENT, Priority.LOW) or event.type == SUMMARY_TYPE:
        return None
    muted, digest = preferences.type_rules(event.type)
    if muted:
        return None
    if preferences.quiet_hours is not None:
        until = quiet_until(preferences.quiet_hours, now)
        if until is not None:
            return Hold(HoldReason.QUIET_HOURS, f"{QUIET_RULE} {until}", until)
    if digest is not None:
        return Hold(HoldReason.DIGEST, digest.rule, now + digest.window_s * 1000)
    return None


@functools.lru_cache(maxsize=256)
def zone(name: str) -> zoneinfo.ZoneInfo:
    """The IANA time zone ``name`` (checked when the preferences were set)."""
    return zoneinfo.ZoneInfo(name)


def quiet_until(quiet: QuietHours, now: int) -> int | None:
    """When the quiet hours ``now`` is in end (ms since the epoch), or None if it is in none.
    Read on the zone's wall clock: a night that loses or gains an hour to daylight saving is
    that much shorter or longer; an end that falls in the hour skipped ends an hour later on
    the wall clock, as the time it names does not exist that day."""
    return _quiet_until_in_second(quiet.zone, quiet.start, quiet.end, now // 1000)


@functools.lru_cache(maxsize=4096)
def _quiet_until_in_second(zone_name: str, start: int, end: int, second: int) -> int | None:
    """``quiet_until`` of any time in that second since the epoch: the same for all of it (a
    zone's offsets are whole seconds), so each publish to an agent with quiet hours after the
    first of a second reads its answer here (the wall clock's reading cost a publish 1 µs).
    Keyed by the quiet hours' fields, not by ``QuietHours``: a dataclass's hash and equality
    are Python calls, which cost each lookup as much again."""
    local = datetime.datetime.fromtimestamp(second, zone(zone_name))
    minute = local.hour * 60 + local.minute
    across_midnight = end <= start
    inside = minute >= start or minute < end if across_midnight else start <= minute < end
    if not inside:
        return None
    day = local.date() if minute < end else local.date() + datetime.timedelta(days=1)
    ends_at = datetime.time(end // 60, end % 60)
    ends = datetime.datetime.combine(day, ends_at, tzinfo=zone(zone_name))
    return int(ends.timestamp() * 1000)


def summary(window: PushWindow, counts: Mapping[str, int]) -> NewEvent:
    """The event that sums up a window's held events (``counts``: how many of each type), to
    its agent. Its dedupe key names the window, so it is stored once whichever process (or
    retry) stores it."""
    total = sum(counts.values())
    kinds = ", ".join(f"{n} {type_}" for type_, n in sorted(counts.items()))
    during = "quiet hours" if window.reason is HoldReason.QUIET_HOURS else "a digest's window"
    data = {
        "reason": window.reason.value,
        "count": total,
        "types": dict(sorted(counts.items())),
        "from": iso_ms(window.opened_at),
        "until": iso_ms(window.until),
    }
    return NewEvent(
        to=window.handle,
        type=SUMMARY_TYPE,
        text=(
            f"1 event arrived during {during} and was not pushed ({kinds}); it waits in your inbox"
            if total == 1
            else f"{total} events arrived during {during} and were not pushed ({kinds}); they wait"
            " in your inbox"
        ),
        data=data,
        data_json=json_text(data),
        dedupe_key=f"{SUMMARY_TYPE} {window.id}",
    )


def json_text(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
