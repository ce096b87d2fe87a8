"""The delivery latency histogram: every event of a batch observed, in Prometheus's shape."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from herald.metrics.latency import ACKNOWLEDGED, BUCKETS_S, SENT, DeliveryLatency


def samples(latency: DeliveryLatency) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(latency)
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_each_event_of_a_batch_falls_in_the_bucket_of_its_wait() -> None:
    latency = DeliveryLatency()
    now = 1_000_000
    # Waits of 0, 5 ms (on the bound: in it), 6 ms, 2 s and two days; a clock set back is 0.
    latency.observe("sse", SENT, [now, now - 5, now - 6, now - 2000, now - 2 * 86_400_000], now)
    latency.observe("sse", SENT, [now + 50], now)
    latency.observe("ack", ACKNOWLEDGED, [now - 100], now)
    found = samples(latency)

    def bucket(le: str, way: str = "sse", stage: str = SENT) -> float:
        labels = (("le", le), ("stage", stage), ("way", way))
        return found["herald_delivery_latency_seconds_bucket", labels]

    assert bucket("0.005") == 3  # 0, 5 ms and the clock set back
    assert bucket("0.01") == 4
    assert bucket("2.5") == 5
    assert bucket("86400.0") == 5
    assert bucket("+Inf") == 6
    sse = (("stage", SENT), ("way", "sse"))
    assert found["herald_delivery_latency_seconds_count", sse] == 6
    assert found["herald_delivery_latency_seconds_sum", sse] == (5 + 6 + 2000 + 172_800_000) / 1000
    assert bucket("0.1", "ack", ACKNOWLEDGED) == 1 and bucket("0.05", "ack", ACKNOWLEDGED) == 0
    assert len([key for key in found if key[0].endswith("_bucket")]) == 2 * (len(BUCKETS_S) + 1)


def test_nothing_observed_is_a_family_without_series() -> None:
    assert samples(DeliveryLatency()) == {}
