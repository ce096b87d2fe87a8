"""``herald_delivery_latency_seconds``: how long after its publish an event was sent, and
acknowledged, by each way.

A Prometheus histogram, kept here rather than in the client library's ``Histogram``: a stream
or a drain hands out events by the hundred, and this one takes a batch in one call, a bisection
and two additions per event and no lock (it is told only from the event loop), where the
library's takes a lock per bucket and per sum for each event."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client.metrics_core import HistogramMetricFamily, Metric

NAME = "herald_delivery_latency_seconds"
HELP = (
    "Time from an event's publish to its being sent (stage=sent: pushed, written to a stream,"
    " handed to a drain, accepted by an endpoint) and to its being acknowledged"
    " (stage=acknowledged: an ack, a drain that takes it, a webhook's 2xx), by way"
)
BUCKETS_S = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0,
    3600.0, 6 * 3600.0, 24 * 3600.0,
)  # fmt: skip
"""Up to a day: a webhook's retries and an agent that drains once a day are deliveries too."""
SENT = "sent"
ACKNOWLEDGED = "acknowledged"


@dataclass
class _Series:
    buckets: list[int]
    """Observations per bucket (not cumulative), the last one above every bound."""
    sum_ms: int = 0
    count: int = 0


@dataclass(eq=False)
class DeliveryLatency:
    """The histogram, one series per way and stage; times are the store's milliseconds."""

    bounds_ms: tuple[int, ...] = tuple(round(b * 1000) for b in BUCKETS_S)
    _series: dict[tuple[str, str], _Series] = field(default_factory=dict)

    def observe(self, way: str, stage: str, created_at: Iterable[int], now_ms: int) -> None:
        """One observation per event published at each of ``created_at``, ``now_ms`` being
        when it was sent or acknowledged (a clock set back counts as no time)."""
        series = self._series.get((way, stage))
        if series is None:
            series = self._series[way, stage] = _Series([0] * (len(self.bounds_ms) + 1))
        buckets, bounds = series.buckets, self.bounds_ms
        total = count = 0
        for at in created_at:
            waited = now_ms - at if now_ms > at else 0
            buckets[bisect_left(bounds, waited)] += 1
            total += waited
            count += 1
        series.sum_ms += total
        series.count += count

    def describe(self) -> Iterator[Metric]:
        yield HistogramMetricFamily(NAME, HELP, labels=["way", "stage"])

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(NAME, HELP, labels=["way", "stage"])
        for (way, stage), series in sorted(self._series.items()):
            cumulative, buckets = 0, []
            for bound, n in zip(BUCKETS_S, series.buckets, strict=False):
                cumulative += n
                buckets.append((_bound(bound), cumulative))
            buckets.append(("+Inf", series.count))
            family.add_metric([way, stage], buckets, series.sum_ms / 1000)
        yield family


def _bound(seconds: float) -> str:
    return repr(float(seconds))
