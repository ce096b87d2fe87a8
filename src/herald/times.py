"""Time as herald keeps it: integer milliseconds since the epoch, read from an injected clock
(so that tests move time instead of waiting), and shown as ISO 8601 in UTC."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable

Clock = Callable[[], float]
"""Seconds since the epoch, like ``time.time``; ``herald.testing.ManualClock`` is one to move."""


def now_ms(clock: Clock) -> int:
    return int(clock() * 1000)


def iso_ms(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def ms_from_iso(text: str) -> int:
    """The inverse of ``iso_ms``."""
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return round(moment.timestamp() * 1000)
