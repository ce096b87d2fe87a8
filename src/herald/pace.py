"""A per-subscription delivery rate (``herald serve --subscription-rate``) as a pace: each
subscription's ``paced_until`` is the moment the deliveries claimed for it so far would all
have gone at that rate. A claim takes no more than the pace allows, so the rate holds in every
process that claims; what it holds back goes later."""

from __future__ import annotations

import math


def pace_ms(rate: float) -> float | None:
    """The milliseconds between two deliveries to a subscription at ``rate`` per second; None:
    no limit (0)."""
    return 1000 / rate if rate > 0 else None


PACE_WINDOW_MS = 1000
"""A subscription paced at a rate (``herald serve --subscription-rate``) may be sent a second's
worth of deliveries at once (at least one), then one per interval."""


def paced_allowance(paced_until: int | None, now: int, interval_ms: float) -> int:
    """How many deliveries a claim at ``now`` may take of a subscription paced at one per
    ``interval_ms`` whose pace has reached ``paced_until`` (the moment its deliveries taken so
    far would all have gone at that pace): a window's worth ahead of it, at most."""
    window = max(PACE_WINDOW_MS, interval_ms)
    ahead = max(paced_until or 0, now) - now
    return max(int((window - ahead) // interval_ms), 0)


def paced_on(paced_until: int | None, now: int, taken: int, interval_ms: float) -> int:
    """The pace of a subscription once ``taken`` more of its deliveries are claimed at ``now``."""
    return max(paced_until or 0, now) + math.ceil(taken * interval_ms)


def paced_wait(paced_until: int | None, now: int, interval_ms: float) -> int:
    """How long (ms) a subscription's pace holds its next delivery back; 0: it does not."""
    window = max(PACE_WINDOW_MS, interval_ms)
    return max(math.ceil((paced_until or 0) - now - window + interval_ms), 0)
