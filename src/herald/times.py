"""Time as herald keeps it: integer milliseconds since the epoch, read from an injected clock
(so that tests move time instead of waiting), and shown as ISO 8601 in UTC."""

from __future__ import annotations

import datetime
import functools
import re
import time
from collections.abc import Callable

from herald.errors import InvalidInput

Clock = Callable[[], float]
"""Seconds since the epoch, like ``time.time``; ``herald.testing.ManualClock`` is one to move."""


def now_ms(clock: Clock) -> int:
    return int(clock() * 1000)


def iso_ms(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return f"{_iso_second(seconds)}.{millis:03d}Z"


@functools.lru_cache(maxsize=4096)
def _iso_second(seconds: int) -> str:
    # Events drained or pushed together were mostly created within the same few seconds, and
    # formatting a second (gmtime, then strftime) costs several times what looking it up does.
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


def ms_from_iso(text: str) -> int:
    """The inverse of ``iso_ms``."""
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return round(moment.timestamp() * 1000)


DURATION_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(d|h|m|s|ms)?")


def parse_duration(text: str) -> float:
    """Seconds from a duration as an operator writes it: ``90s``, ``15m``, ``12h``, ``7d``,
    ``500ms``, or a number alone, which is seconds (``2.5``).

    Raises:
        InvalidInput: none of those.
    """
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise InvalidInput(
            "write a duration such as 90s, 15m, 12h or 7d (a number alone is seconds),"
            f" not {text!r}"
        )
    number, unit = found.groups()
    return float(number) / 1000 if unit == "ms" else float(number) * DURATION_UNITS[unit or "s"]


def format_duration(seconds: float) -> str:
    """The shortest text ``parse_duration`` reads back as ``seconds``: ``7d``, ``5m``, ``2.5s``."""
    for unit, size in DURATION_UNITS.items():
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds!r}s" if seconds != int(seconds) else f"{int(seconds)}s"
