"""CPU accounting: how busy the load generator and the server were over a measured window.

The generator's share comes from ``time.process_time`` (this whole process, all threads); the
server's from ``/proc/PID/stat`` (all its threads, dead ones included) and
``/proc/PID/task/PID/stat`` (its main thread, which runs the event loop).
A share of 1.0 is one core fully busy. The machine's busy time (``/proc/stat``) less those two
is what other processes took meanwhile: a noisy neighbour shows up there.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def _proc_cpu_s(stat_path: Path) -> float:
    """utime + stime of a /proc stat file, in seconds (0 if it cannot be read)."""
    try:
        text = stat_path.read_text()
    except OSError:
        return 0.0
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def machine_busy_s() -> float:
    """CPU seconds the whole machine spent busy since boot (all cores, steal included)."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(value) for value in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / _TICKS


@dataclass(frozen=True)
class Usage:
    """CPU used over ``wall_s`` seconds; shares are CPU seconds per wall second."""

    wall_s: float
    generator_s: float
    server_s: float | None = None
    server_main_s: float | None = None
    machine_s: float | None = None

    @property
    def generator_share(self) -> float:
        return self.generator_s / self.wall_s if self.wall_s else 0.0

    @property
    def server_share(self) -> float | None:
        return self.server_s / self.wall_s if self.server_s is not None and self.wall_s else None

    @property
    def server_main_share(self) -> float | None:
        if self.server_main_s is None or not self.wall_s:
            return None
        return self.server_main_s / self.wall_s

    @property
    def others_share(self) -> float | None:
        """CPU used by every other process over the window (0 when the machine was quiet)."""
        if self.machine_s is None or not self.wall_s:
            return None
        others = self.machine_s - self.generator_s - (self.server_s or 0.0)
        return max(0.0, others / self.wall_s)

    def to_json(self) -> dict[str, float | None]:
        return {
            "wall_s": round(self.wall_s, 4),
            "generator_cpu_share": round(self.generator_share, 3),
            "server_cpu_share": _round(self.server_share),
            "server_main_thread_cpu_share": _round(self.server_main_share),
            "other_processes_cpu_share": _round(self.others_share),
        }


def combined(usages: list[Usage]) -> Usage:
    """Several measured windows as one: their times added up (shares are over all of them)."""

    def total(values: list[float | None]) -> float | None:
        return None if None in values else sum(v for v in values if v is not None)

    return Usage(
        sum(u.wall_s for u in usages),
        sum(u.generator_s for u in usages),
        total([u.server_s for u in usages]),
        total([u.server_main_s for u in usages]),
        total([u.machine_s for u in usages]),
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


class Probe:
    """Start it before a measured window and stop it after: ``usage = probe.stop()``."""

    def __init__(self, server_pid: int | None = None) -> None:
        self._pid = server_pid
        self._wall = time.perf_counter()
        self._generator = time.process_time()
        self._server = self._server_now()
        self._machine = machine_busy_s()

    def _server_now(self) -> tuple[float, float] | None:
        if self._pid is None:
            return None
        base = Path(f"/proc/{self._pid}")
        return _proc_cpu_s(base / "stat"), _proc_cpu_s(base / "task" / str(self._pid) / "stat")

    def stop(self) -> Usage:
        wall = time.perf_counter() - self._wall
        generator = time.process_time() - self._generator
        machine = machine_busy_s() - self._machine
        before, after = self._server, self._server_now()
        if before is None or after is None:
            return Usage(wall, generator, machine_s=machine)
        return Usage(wall, generator, after[0] - before[0], after[1] - before[1], machine)


def processes_cpu_s(pids: list[int]) -> dict[int, float]:
    """The CPU seconds each of these processes has used so far (all its threads)."""
    return {pid: _proc_cpu_s(Path(f"/proc/{pid}/stat")) for pid in pids}


def used_since(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds used between two readings of ``processes_cpu_s``: a process that started in
    between counts from its start; one that ended in between is not counted."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())
