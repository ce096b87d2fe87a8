"""CPU accounting: how busy the load generator and the server were over a measured window.

The generator's share comes from ``time.process_time`` (this whole process, all threads); the
server's from ``/proc/PID/stat`` (all its threads, dead ones included) and ``/proc/PID/task/PID/stat``
(its main thread, which runs the event loop). A share of 1.0 is one core fully busy.
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


@dataclass(frozen=True)
class Usage:
    """CPU used over ``wall_s`` seconds; shares are CPU seconds per wall second."""

    wall_s: float
    generator_s: float
    server_s: float | None = None
    server_main_s: float | None = None

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

    def to_json(self) -> dict[str, float | None]:
        return {
            "wall_s": round(self.wall_s, 4),
            "generator_cpu_share": round(self.generator_share, 3),
            "server_cpu_share": _round(self.server_share),
            "server_main_thread_cpu_share": _round(self.server_main_share),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


class Probe:
    """Start it before a measured window and stop it after: ``usage = probe.stop()``."""

    def __init__(self, server_pid: int | None = None) -> None:
        self._pid = server_pid
        self._wall = time.perf_counter()
        self._generator = time.process_time()
        self._server = self._server_now()

    def _server_now(self) -> tuple[float, float] | None:
        if self._pid is None:
            return None
        base = Path(f"/proc/{self._pid}")
        return _proc_cpu_s(base / "stat"), _proc_cpu_s(base / "task" / str(self._pid) / "stat")

    def stop(self) -> Usage:
        wall = time.perf_counter() - self._wall
        generator = time.process_time() - self._generator
        before, after = self._server, self._server_now()
        if before is None or after is None:
            return Usage(wall, generator)
        return Usage(wall, generator, after[0] - before[0], after[1] - before[1])
