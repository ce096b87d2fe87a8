"""Timed loops for in-process benchmarks: bounded by a count and by a deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from benchmarks.cpu import machine_busy_s

Publish = Callable[[], Awaitable[Any]]
T = TypeVar("T")


@dataclass(frozen=True)
class Run:
    """``events`` done in ``wall_s`` seconds, using ``cpu_s`` of this process's CPU time while
    other processes used ``others_s``."""

    events: int
    wall_s: float
    cpu_s: float
    others_s: float = 0.0

    @property
    def rate(self) -> float:
        return self.events / self.wall_s if self.wall_s else 0.0

    def details(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "seconds": round(self.wall_s, 3),
            "process CPU share": round(self.cpu_s / self.wall_s, 2) if self.wall_s else None,
            "other processes CPU share": round(self.others_s / self.wall_s, 2)
            if self.wall_s
            else None,
        }


class Stopwatch:
    """Wall time, this process's CPU time and the other processes' CPU time since it was made."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()
        self.machine = machine_busy_s()

    def run(self, events: int) -> Run:
        cpu = time.process_time() - self.cpu
        others = max(0.0, machine_busy_s() - self.machine - cpu)
        return Run(events, time.perf_counter() - self.wall, cpu, others)


async def sequential(publish: Publish, count: int, seconds: float) -> Run:
    """Await ``publish()`` one call after another."""
    watch = Stopwatch()
    deadline = watch.wall + seconds
    done = 0
    while done < count and time.perf_counter() < deadline:
        await publish()
        done += 1
    return watch.run(done)


async def concurrent(publish: Publish, workers: int, count: int, seconds: float) -> Run:
    """``workers`` tasks each awaiting ``publish()`` in turn, ``count`` calls in all."""
    watch = Stopwatch()
    deadline = watch.wall + seconds
    budget = [count]

    async def worker() -> int:
        done = 0
        while budget[0] > 0 and time.perf_counter() < deadline:
            budget[0] -= 1
            await publish()
            done += 1
        return done

    counts = await asyncio.gather(*(worker() for _ in range(workers)))
    return watch.run(sum(counts))


async def alternate(
    sides: dict[str, Callable[[], Awaitable[T]]], rounds: int
) -> dict[str, list[T]]:
    """Each side once a round, in the order given, then in the reverse order the next round: a
    slow spell of the machine falls on every side rather than on one."""
    done: dict[str, list[T]] = {name: [] for name in sides}
    for index in range(rounds):
        order = list(sides) if index % 2 == 0 else list(reversed(sides))
        for name in order:
            done[name].append(await sides[name]())
    return done


def median_round(rounds: Sequence[T], key: Callable[[T], float]) -> T:
    """The median round by ``key`` (the lower middle one of an even count)."""
    return sorted(rounds, key=key)[(len(rounds) - 1) // 2]


def round_orders(rounds: int) -> list[tuple[str, str]]:
    """Which side goes first in each round: alternately the baseline ("old") and herald's new
    way ("new"), so that a slow spell of the machine falls on both."""
    return [("old", "new") if index % 2 == 0 else ("new", "old") for index in range(rounds)]
