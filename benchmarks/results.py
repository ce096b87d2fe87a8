"""What a benchmark produces: figures with their baselines and targets, and the two reports."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from benchmarks.cpu import Usage
from benchmarks.paired import Paired

TargetKind = Literal["ratio_at_least", "ratio_at_most", "at_least", "at_most", "not_worse", "none"]
GENERATOR_LIMIT = 0.8
SATURATED = 0.9
NOISY = 0.25


@dataclass
class Measurement:
    """One measured number: a rate in events/s (higher is better) or a latency in ms."""

    label: str
    value: float
    unit: str
    text: str | None = None
    usage: Usage | None = None
    details: dict[str, Any] = field(default_factory=dict)
    cpu_us: float | None = None
    """CPU microseconds per event of the process doing the work (the server; this process for
    work done in it): unlike a rate, it hardly moves when the machine is busy."""

    def shown(self) -> str:
        return self.text if self.text is not None else format_value(self.value, self.unit)

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "value": _finite(self.value),
            "unit": self.unit,
            "text": self.shown(),
            "cpu": self.usage.to_json() if self.usage else None,
            "cpu_us_per_event": None if self.cpu_us is None else round(self.cpu_us, 1),
            "details": self.details,
        }


@dataclass(frozen=True)
class Target:
    """What a figure must reach; kind ``none`` reports the figure beside its baseline, no verdict
    (``reported``); kind ``not_worse`` is decided by the figure's paired test over its rounds
    (``Figure.paired``), not by its two numbers."""

    text: str
    kind: TargetKind
    threshold: float

    def met(self, value: float, baseline: float) -> bool:
        if math.isnan(value) or self.kind == "none":
            return False
        if self.kind == "ratio_at_least":
            return baseline > 0 and value / baseline >= self.threshold
        if self.kind == "ratio_at_most":  # a latency beside its baseline's: lower is better
            return baseline > 0 and value / baseline <= self.threshold
        if self.kind == "at_least":
            return value >= self.threshold
        return value <= self.threshold


@dataclass
class Figure:
    number: str
    title: str
    baseline: Measurement
    target: Target
    herald: Measurement | None = None
    diagnostics: list[Measurement] = field(default_factory=list)
    method: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None
    error: str | None = None
    paired: Paired | None = None
    """For a ``not_worse`` target: herald's rounds tested against the baseline's."""

    @property
    def ratio(self) -> float | None:
        if self.herald is None or not self.baseline.value:
            return None
        return self.herald.value / self.baseline.value

    @property
    def verdict(self) -> str:
        if self.error is not None:
            return "ERROR"
        if self.herald is None:
            return "skipped"
        if self.target.kind == "none":
            return "reported"
        if self.target.kind == "not_worse":
            if self.paired is not None and not self.paired.decidable:
                return "reported"  # too few rounds (--quick) to call it either way
            return "met" if self.paired is not None and not self.paired.worse else "MISSED"
        return "met" if self.target.met(self.herald.value, self.baseline.value) else "MISSED"

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "title": self.title,
            "verdict": self.verdict,
            "target": {"text": self.target.text, "kind": self.target.kind,
                       "threshold": self.target.threshold},
            "herald": self.herald.to_json() if self.herald else None,
            "baseline": self.baseline.to_json(),
            "herald_over_baseline": None if self.ratio is None else round(self.ratio, 3),
            "baseline_over_herald_cpu_per_event": None if (r := _cpu_ratio(self)) is None
            else round(r, 3),
            "diagnostics": [m.to_json() for m in self.diagnostics],
            "method": self.method,
            "notes": self.notes,
            "skipped": self.skipped,
            "paired": None if self.paired is None else {
                "rounds": self.paired.rounds, "ratio": round(self.paired.ratio, 3),
                "p": round(self.paired.p, 4), "detectable": round(self.paired.detectable, 3),
                "upper": round(self.paired.upper, 3)},
            "error": self.error,
        }  # fmt: skip


def failed_figure(name: str, exc: BaseException) -> Figure:
    """What stands in the report for a benchmark that raised instead of measuring."""
    nothing = Measurement("not measured", float("nan"), "events/s", text="n/a")
    target = Target("n/a", "at_least", math.inf)
    error = f"{type(exc).__name__}: {exc}"[:1000]
    return Figure(name, f"{name} (failed)", nothing, target, error=error)


def _finite(value: float) -> float | None:
    return round(value, 3) if math.isfinite(value) else None


def format_value(value: float, unit: str) -> str:
    if not math.isfinite(value):
        return "n/a"
    if unit == "ms":
        return f"{value:.2f} ms"
    return f"{value:,.0f} {unit}"


def per_event_us(cpu_s: float | None, events: float) -> float | None:
    """CPU microseconds per event, when there were events and the CPU time is known."""
    if cpu_s is None or events <= 0:
        return None
    return cpu_s * 1e6 / events


def _cpu_ratio(fig: Figure) -> float | None:
    """For a rate beside a rate, both with their CPU per event: the baseline's over herald's."""
    herald, baseline = fig.herald, fig.baseline
    if herald is None or herald.cpu_us is None or baseline.cpu_us is None or not herald.cpu_us:
        return None
    if herald.unit == "ms" or baseline.unit == "ms":
        return None
    return baseline.cpu_us / herald.cpu_us


def _cpu_us_text(measurement: Measurement | None) -> str:
    if measurement is None or measurement.cpu_us is None:
        return "–"
    return f"{measurement.cpu_us:,.0f}"


def cpu_text(usage: Usage | None) -> str:
    if usage is None:
        return ""
    parts = [f"generator CPU {usage.generator_share:.0%}"]
    if usage.server_share is not None:
        parts.append(f"server CPU {usage.server_share:.0%}")
    if usage.server_main_share is not None:
        parts.append(f"server event-loop thread {usage.server_main_share:.0%}")
    if usage.others_share is not None:
        parts.append(f"other processes {usage.others_share:.0%}")
    return ", ".join(parts) + f" of one core over {usage.wall_s:.1f} s"


def _table(figures: list[Figure]) -> list[str]:
    rows = [
        "| # | figure | herald | baseline | herald / baseline | CPU µs/event, herald / baseline"
        " | target | result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for fig in figures:
        herald = fig.herald.shown() if fig.herald else f"skipped: {fig.skipped}"
        if fig.error is not None:
            herald = f"failed: {fig.error}"
        ratio = "" if fig.ratio is None else f"{fig.ratio:.2f}x"
        baseline = f"{fig.baseline.shown()} ({fig.baseline.label})"
        cpu = ""
        if fig.baseline.cpu_us is not None or (fig.herald and fig.herald.cpu_us is not None):
            cpu = f"{_cpu_us_text(fig.herald)} / {_cpu_us_text(fig.baseline)}"
        rows.append(
            f"| {fig.number} | {fig.title} | {herald} | {baseline} | {ratio} | {cpu} "
            f"| {fig.target.text} | **{fig.verdict}** |"
        )
    return rows


def _measurement_line(kind: str, measurement: Measurement) -> str:
    extra = cpu_text(measurement.usage)
    if measurement.cpu_us is not None:
        extra = f"CPU {measurement.cpu_us:,.0f} µs/event" + (f", {extra}" if extra else "")
    details = ", ".join(f"{key} {value}" for key, value in measurement.details.items())
    tail = "; ".join(part for part in (details, extra) if part)
    return f"- {kind} **{measurement.label}**: {measurement.shown()}" + (
        f" ({tail})" if tail else ""
    )


def _section(fig: Figure) -> list[str]:
    lines = [f"### {fig.number}. {fig.title}: {fig.verdict}", ""]
    lines += [f"- {line}" for line in fig.method]
    if fig.herald is not None:
        lines.append(_measurement_line("herald", fig.herald))
    lines.append(_measurement_line("baseline", fig.baseline))
    lines += [_measurement_line("diagnostic", m) for m in fig.diagnostics]
    by_cpu = _cpu_ratio(fig)
    if by_cpu is not None:
        lines.append(
            f"- By CPU per event: the baseline's cost over herald's is {by_cpu:.2f}x (what the"
            " ratio of rates would be if each side were bound by its own CPU alone)."
        )
    lines += [f"- {note}" for note in fig.notes]
    if fig.error is not None:
        lines.append(f"- ERROR: the benchmark failed: {fig.error}")
    return [*lines, ""]


def _closing(meta: dict[str, Any]) -> list[str]:
    lines = [
        "## Reading this report",
        "",
        "- Rates count only answers with the expected status; every phase is bounded in count and"
        " time and talks only to 127.0.0.1.",
    ]
    profiles = meta.get("profiles") or []
    if profiles:
        lines.append(
            "- Profiles of this run (an extra, sampled run of each load, not the measured one): "
            + ", ".join(f"`{path}`" for path in profiles)
            + "."
        )
    return lines


def render_markdown(figures: list[Figure], meta: dict[str, Any]) -> str:
    lines = [
        "# herald benchmarks",
        "",
        f"Generated by `{meta['command']}` on {meta['date']} (commit {meta['commit']}, "
        f"{'quick smoke sizes' if meta['quick'] else 'full sizes'}, {meta['elapsed_s']:.0f} s).",
        "",
        f"Machine: {meta['machine']}. Each figure is measured beside its baseline in the same run;"
        " rates are events/s, latencies milliseconds. CPU shares are of one core"
        " (1.0 = one core fully busy); the machine has "
        f"{meta['cpus']} cores.",
        "",
        *_table(figures),
        "",
        "## Details",
        "",
    ]
    for fig in figures:
        lines += _section(fig)
    lines += _closing(meta)
    return "\n".join(lines).rstrip() + "\n"


def write_reports(figures: list[Figure], meta: dict[str, Any], directory: Path) -> None:
    (directory / "REPORT.md").write_text(render_markdown(figures, meta))
    payload = {"meta": meta, "figures": [fig.to_json() for fig in figures]}
    (directory / "report.json").write_text(json.dumps(payload, indent=2) + "\n")


def generator_note(usages: list[Usage]) -> str:
    """Whether the load generator could have been the bottleneck, from its CPU share."""
    worst = max(usage.generator_share for usage in usages)
    if worst < GENERATOR_LIMIT:
        return (
            f"The load generator used at most {worst:.0%} of a core here (process CPU time over"
            " wall time), so it had headroom and is not what limits these rates."
        )
    return (
        f"WARNING: the load generator used {worst:.0%} of a core here: it may be part of what is"
        " measured."
    )


def noise_note(usages: list[Usage]) -> str | None:
    """A warning when other processes took a noticeable share of the machine meanwhile."""
    shares = [usage.others_share for usage in usages if usage.others_share is not None]
    if not shares or max(shares) < NOISY:
        return None
    return (
        f"WARNING: other processes on the machine used up to {max(shares):.0%} of a core during"
        " these measurements; the figures may be lower than on a quiet machine."
    )


def saturation_note(usage: Usage | None) -> str | None:
    """Whether the server process was the busy part, and so what bounds the figure."""
    if usage is None or usage.server_share is None or usage.server_main_share is None:
        return None
    total, main = usage.server_share, usage.server_main_share
    split = (
        f"the server process used {total:.0%} of a core (event-loop thread {main:.0%}, the store's"
        f" writer thread and others {max(0.0, total - main):.0%})"
    )
    others = usage.others_share or 0.0
    if others >= NOISY and total < SATURATED:
        return (
            f"Inconclusive: {split}, while other processes took {others:.0%} of a core; it may"
            " have been short of CPU rather than waiting."
        )
    if total >= SATURATED or main >= SATURATED:
        return (
            f"Bound by the server's CPU: {split}. Its Python threads share one GIL, so about one"
            " core is all a herald process can use; it was not waiting on the disk or the client."
        )
    return (
        f"Not CPU-bound: {split}. The rest of the time it waited: on fsync, on hand-offs between"
        " the event loop and the writer thread, and on the client's round trips."
    )


def http_notes(usages: list[Usage], herald_usage: Usage | None) -> list[str]:
    """The notes of a figure measured with the HTTP load generator: the generator's headroom,
    other processes' load, and what bounded herald's side (``herald_usage``)."""
    notes = [generator_note(usages)]
    noise = noise_note(usages)
    if noise:
        notes.append(noise)
    saturation = saturation_note(herald_usage)
    if saturation:
        notes.append(saturation)
    return notes


def median_measurement(rounds: list[Measurement]) -> Measurement:
    """The median round by rate, with every round's rate in its details."""
    chosen = sorted(rounds, key=lambda m: m.value)[len(rounds) // 2]
    chosen.details["rounds"] = [round(m.value) for m in rounds]
    return chosen


def to_ms(seconds: float) -> float:
    """Seconds in milliseconds, as the reports show latencies."""
    return seconds * 1000.0
