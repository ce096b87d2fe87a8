"""The gauges that describe the store (``herald_events_pending``,
``herald_oldest_pending_age_seconds``, ``herald_events_dead``, ``herald_events_scheduled``,
``herald_sessions``, ``herald_webhook_endpoints``): read from the store at scrape time
(``Store.gauges``), so that every process sharing a PostgreSQL database reports the same."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from herald.models import EndpointStatus, Kind
from herald.overview import Gauges

PENDING = (
    "herald_events_pending",
    "Events stored and not yet delivered: pending, or sent and not acknowledged (unexpired),"
    " in the whole store",
)
OLDEST = (
    "herald_oldest_pending_age_seconds",
    "Age of the oldest event not yet delivered (0 when there is none)",
)
DEAD = (
    "herald_events_dead",
    "Events handed out as many times as allowed (--max-deliveries) without an acknowledgement,"
    " offered no more until redelivered, in the whole store",
)
SCHEDULED = (
    "herald_events_scheduled",
    "Events published for later (deliver_at, delay_s) and not yet due, in the whole store",
)
SESSIONS = ("herald_sessions", "Live sessions of every process sharing the store")
ENDPOINTS = ("herald_webhook_endpoints", "Webhook, OpenClaw and subscription endpoints by state")
STORE_UP = (
    "herald_store_up",
    "1 when this scrape read the store's gauges, 0 when the store did not answer (they are left"
    " out)",
)


class StoreGauges:
    """Yields the last reading it was given (``show``): the caller reads the store first, since
    a collector cannot wait for it. None: the store could not be read."""

    def __init__(self) -> None:
        self.reading: Gauges | None = None

    def show(self, reading: Gauges | None) -> None:
        self.reading = reading

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(*STORE_UP)
        yield from self._families(Gauges(0, 0, None, [], []))

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(*STORE_UP, value=0 if self.reading is None else 1)
        if self.reading is not None:
            yield from self._families(self.reading)

    def _families(self, reading: Gauges) -> Iterator[Metric]:
        yield GaugeMetricFamily(*PENDING, value=reading.pending)
        yield GaugeMetricFamily(*OLDEST, value=reading.oldest_pending_age_s)
        yield GaugeMetricFamily(*DEAD, value=reading.dead)
        yield GaugeMetricFamily(*SCHEDULED, value=reading.scheduled)
        sessions = GaugeMetricFamily(*SESSIONS, labels=["transport", "era"])
        for transport, era, count in reading.sessions:
            sessions.add_metric([transport, era], count)
        yield sessions
        endpoints = GaugeMetricFamily(*ENDPOINTS, labels=["kind", "state"])
        # Every kind and state, none counted as 0: a panel shows "0 disabled", not no data.
        counted = {(kind, state): count for kind, state, count in reading.endpoints}
        for kind in Kind:
            for state in EndpointStatus:
                endpoints.add_metric(
                    [kind.value, state.value], counted.get((kind.value, state.value), 0)
                )
        yield endpoints
