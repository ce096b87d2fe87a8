"""Whether herald's side of a figure is measurably worse than its baseline, from paired rounds.

A target of "no worse than" the baseline cannot be decided by comparing two noisy numbers once:
when both ways cost the same, either one comes out ahead about half the time. So such a figure
runs in rounds, both sides in each (one after the other, the order alternating), and asks how
likely its rounds' ratios would be if the two sides were the same: a one-sided Wilcoxon
signed-rank test on the rounds' log ratios, exact (every sign pattern counted). Ranks rather
than the ratios themselves, so that one round upset by the machine does not decide it. herald's
side is worse only when that chance is under ``ALPHA``; the report also says how large a
worsening this run's noise would have let through.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

ALPHA = 0.05
LARGEST_SHOWN = 10.0
"""Worsenings are looked for up to this factor."""


@dataclass(frozen=True)
class Paired:
    """The test's outcome, ratios herald over baseline (a latency: lower is better)."""

    rounds: int
    ratio: float
    """The median of the rounds' ratios."""
    p: float
    """The chance of ranks at least this much on herald's worse side if the two were the same."""
    detectable: float
    """With this run's noise, the least factor by which herald's side, slower in every round
    by it, is called worse."""
    upper: float
    """The one-sided upper confidence bound (1 - ``ALPHA``) of the factor by which herald's
    side is slower than the baseline: the smallest factor the rounds say, at that level, it is
    under (the test turned around)."""

    @property
    def decidable(self) -> bool:
        """Whether so many rounds can be called worse at all: all n on the worse side has a
        chance of 2**-n (under 5 rounds, never under 5%)."""
        return 2.0**-self.rounds < ALPHA

    @property
    def worse(self) -> bool:
        return self.p < ALPHA

    def note(self) -> str:
        if not self.decidable:
            return (
                f"Paired test: {self.rounds} round(s) cannot tell worse from the same (even all"
                f" on herald's worse side would come by chance with probability"
                f" {2.0**-self.rounds:.2f}); the verdict needs 5 or more. The rounds' ratios have"
                f" a median of {self.ratio:.2f}x."
            )
        outcome = "measurably worse" if self.worse else "not measurably worse"
        return (
            f"Paired test over the {self.rounds} rounds: herald's side is {outcome} than the"
            f" baseline. The rounds' ratios have a median of {self.ratio:.2f}x; if the two"
            " sides were the same, ratios this far on herald's worse side would come by chance"
            f" with probability {self.p:.2f} (one-sided Wilcoxon signed-rank test on the log"
            f" ratios; worse below {ALPHA:g}). With this run's noise, a side {self.detectable:.2f}x"
            " slower in every round would have been called worse; and herald's side is at most"
            f" {self.upper:.2f}x the baseline ({1 - ALPHA:.0%} upper confidence bound)."
        )


def compare(herald: Sequence[float], baseline: Sequence[float]) -> Paired:
    """Test round i of ``herald`` against round i of ``baseline`` (positive values)."""
    logs = [math.log(h / b) for h, b in zip(herald, baseline, strict=True)]
    middle = statistics.median(logs)
    noise = [value - middle for value in logs]
    # The bound: the least shift s that the rounds, taken as (s - log ratio), call worse, i.e.
    # the least s that herald's side is, at that level, under.
    upper = _least_shift(lambda s: [s - value for value in logs], start=middle)
    return Paired(
        len(logs),
        math.exp(middle),
        _p_worse(logs),
        math.exp(_least_shift(lambda s: [value + s for value in noise], start=0.0)),
        math.exp(upper),
    )


def _p_worse(logs: list[float]) -> float:
    """One-sided: the chance, under random signs, of a rank sum on the positive side at least
    the observed one (ties between magnitudes share their mean rank; zeros count half)."""
    ranks = _ranks([abs(value) for value in logs])
    # Ranks doubled, so that shared (half) ranks stay integers.
    doubled = [round(2 * rank) for rank in ranks]
    observed = sum(r for r, v in zip(doubled, logs, strict=True) if v > 0) + sum(
        r // 2 for r, v in zip(doubled, logs, strict=True) if v == 0
    )
    counts = {0: 1}  # rank sum -> sign patterns giving it
    for rank in doubled:
        grown: dict[int, int] = {}
        for total, ways in counts.items():
            grown[total] = grown.get(total, 0) + ways
            grown[total + rank] = grown.get(total + rank, 0) + ways
        counts = grown
    at_least = sum(ways for total, ways in counts.items() if total >= observed)
    patterns: int = 2 ** len(logs)
    return at_least / patterns


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def _least_shift(shifted: Callable[[float], list[float]], start: float) -> float:
    """The least s from ``start`` up, to within 2**-40 of a bisection, at which the test calls
    ``shifted(s)`` worse (up to ``start + log(LARGEST_SHOWN)``, returned if none is)."""
    low, high = start, start + math.log(LARGEST_SHOWN)
    if _p_worse(shifted(high)) >= ALPHA:
        return high
    for _ in range(40):
        middle = (low + high) / 2
        if _p_worse(shifted(middle)) < ALPHA:
            high = middle
        else:
            low = middle
    return high
