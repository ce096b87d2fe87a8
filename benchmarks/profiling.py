"""Optional sampling profiles of the server (``--profile``), taken with py-spy when it is installed.

A profile is taken over an extra run of the same load after the measured one, so sampling never
distorts a reported figure. Samples include idle time (``--idle``) and are split by thread, so a
thread waiting on fsync or on its queue shows as such; the summary lists, per thread, where the
samples were (the innermost frame) and which functions they were under.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import signal
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Iterable
from pathlib import Path

SAMPLE_RATE = 250
TOP = 12
_LINE_NUMBER = re.compile(r":\d+\)$")


def find_py_spy(given: str | None) -> str | None:
    return shutil.which(given or "py-spy")


@contextlib.asynccontextmanager
async def sampling(py_spy: str, pid: int, raw_path: Path) -> AsyncIterator[None]:
    """Sample ``pid`` with py-spy while the block runs, collapsed stacks to ``raw_path``."""
    command = [
        py_spy, "record", "--pid", str(pid), "--rate", str(SAMPLE_RATE), "--threads", "--idle",
        "--nonblocking", "--format", "raw", "--output", str(raw_path),
    ]  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    await asyncio.sleep(0.5)  # let it attach
    try:
        yield
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        await asyncio.wait_for(process.wait(), 30)


PerThread = dict[str, Counter[str]]


def _parse(lines: Iterable[str]) -> tuple[Counter[str], PerThread, PerThread]:
    totals: Counter[str] = Counter()
    leaves: PerThread = defaultdict(Counter)
    under: PerThread = defaultdict(Counter)
    for line in lines:
        stack, _, count_text = line.rstrip().rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        thread, *frames = stack.split(";")
        thread = thread.split(": ", 1)[-1]
        totals[thread] += count
        leaves[thread][frames[-1] if frames else "?"] += count
        for function in {_LINE_NUMBER.sub(")", frame) for frame in frames}:
            under[thread][function] += count
    return totals, leaves, under


def summarize(raw_path: Path, title: str) -> str:
    """A text summary of a py-spy raw profile: per thread, the top innermost frames and the top
    functions by inclusive share of that thread's samples (wall time, idle included)."""
    totals, leaves, under = _parse(raw_path.read_text().splitlines())
    everything = sum(totals.values())
    lines = [f"# {title}", f"# {everything} samples at {SAMPLE_RATE} Hz, idle included", ""]
    for thread, count in totals.most_common():
        lines.append(f"== thread {thread}: {count} samples")
        lines.append("  where (innermost frame):")
        lines += [f"    {n / count:6.1%}  {frame}" for frame, n in leaves[thread].most_common(TOP)]
        lines.append("  under (inclusive):")
        lines += [f"    {n / count:6.1%}  {fn}" for fn, n in under[thread].most_common(TOP * 2)]
        lines.append("")
    return "\n".join(lines)


class Profiler:
    """Takes the extra, sampled run of a load and writes its summary to ``directory/NAME.txt``."""

    def __init__(self, py_spy: str, directory: Path) -> None:
        self.py_spy = py_spy
        self.directory = directory
        self.written: list[Path] = []

    async def run(self, pid: int, name: str, title: str, load: Awaitable[object]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        raw_path = self.directory / f"{name}.raw"
        async with sampling(self.py_spy, pid, raw_path):
            await load
        summary_path = self.directory / f"{name}.txt"
        summary_path.write_text(summarize(raw_path, title))
        raw_path.unlink(missing_ok=True)
        self.written.append(summary_path)
