"""The metrics of one hub, in a registry of its own: what happened in this process (counters and
histograms, told by the code that did it), and what the store holds (read at scrape time).

Under ``herald serve --workers N`` a scrape reaches any one of the workers, so what they did is
added up across them: ``herald.workers`` sets ``PROMETHEUS_MULTIPROC_DIR`` before any metric
is made, the client library then keeps every value in a file per process there, and a scrape
reads them all (its ``MultiProcessCollector``). The files of a worker that died are still read:
no counter goes back when a worker is replaced. ``herald_streams`` is added up over the live
workers only; the store's gauges are the store's, read by the worker that answers.

Labels are few and bounded: ways, outcomes, kinds, states, route templates and type classes,
never an agent's id or handle, an event id or a raw path."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.openmetrics import exposition as openmetrics

from herald.metrics.latency import ACKNOWLEDGED, BUCKETS_S, HELP, NAME, SENT, DeliveryLatency
from herald.metrics.store_gauges import StoreGauges

OTHER = "other"
"""The type class of a type that is not declared, and the method no route takes."""
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
COMMIT_BUCKETS_S = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
)  # fmt: skip
HTTP_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
OPENMETRICS = "application/openmetrics-text"
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
"""The text format every Prometheus reads, which ``generate_latest`` writes for herald's names
(plain ASCII); newer releases of the client library name a newer version by default."""
SHARED_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
"""The client library's variable: where the processes of one herald keep their values."""


class Metrics:
    """Counters and histograms are children of labelled metrics kept by their labels: finding a
    child in a dict costs less than the client library's ``labels()`` on every event.

    With ``$PROMETHEUS_MULTIPROC_DIR`` set (before the client library was imported: it then
    keeps every value in its files there), a scrape adds up the values of every process."""

    def __init__(self) -> None:
        shared_dir = os.environ.get(SHARED_DIR_VARIABLE) or None
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self._published = Counter(
            "herald_events_published",
            "Events published (a repeated dedupe key is not counted again), by type class: the"
            " part of the type before its first dot, for declared types and herald's own;"
            " other for the rest",
            ["type_class"],
            registry=registry,
        )
        self._deliveries = Counter(
            "herald_deliveries",
            "Attempts at getting events through, as GET /v1/events/{id} lists them, by way"
            " (mechanism) and outcome, and events written to GET /channel/stream (way sse)",
            ["way", "outcome"],
            registry=registry,
        )
        self.latency = DeliveryLatency()
        self._shared_latency: Histogram | None = None
        if shared_dir is None:
            registry.register(self.latency)
        else:  # the library's histogram, whose values go to the shared files
            self._shared_latency = Histogram(
                NAME, HELP, ["way", "stage"], buckets=BUCKETS_S, registry=registry
            )
        self._webhook_attempts = Counter(
            "herald_webhook_attempts",
            "Requests to webhook, OpenClaw and subscription endpoints, by kind and outcome:"
            " the answer's status class (2xx...), no_answer (a timeout, a connection or name"
            " that failed, a body too large to send) or refused (an address not allowed)",
            ["kind", "outcome"],
            registry=registry,
        )
        self._loop_guards = Counter(
            "herald_loop_guards_tripped",
            "Messages between agents refused by a loop guard, by limit: exchanges (two agents"
            " in a window) or per_minute (one agent's sends)",
            ["limit"],
            registry=registry,
        )
        self._commits = Histogram(
            "herald_store_commit_seconds",
            "Time a publish waits for its events to be committed to the store (group commit"
            " included)",
            buckets=COMMIT_BUCKETS_S,
            registry=registry,
        )
        self._requests = Counter(
            "herald_http_requests",
            "HTTP requests answered, by method, route template and status class",
            ["method", "route", "status_class"],
            registry=registry,
        )
        self._durations = Histogram(
            "herald_http_request_duration_seconds",
            "Time from a request's arrival to its answer's status (a stream's whole life is"
            " not counted)",
            ["method", "route"],
            buckets=HTTP_BUCKETS_S,
            registry=registry,
        )
        self._streams = Gauge(
            "herald_streams",
            "Open event streams: GET /channel/stream and MCP events/stream (of every live worker"
            " under --workers)",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.store_gauges = StoreGauges()
        registry.register(self.store_gauges)
        self._scraped = registry
        if shared_dir is not None:
            self._scraped = CollectorRegistry(auto_describe=True)
            MultiProcessCollector(self._scraped, path=shared_dir)  # type: ignore[no-untyped-call]
            self._scraped.register(self.store_gauges)
        self._children: dict[tuple[str, ...], Counter] = {}
        self._histograms: dict[tuple[str, str], Histogram] = {}

    # What the code that did it tells

    def published(self, types: Iterable[str], classes: Collection[str]) -> None:
        """Events of ``types`` were published; ``classes`` are the type classes kept as labels."""
        # Each type classed once, not each event. A plain dict, not ``collections.Counter``:
        # a Counter's making (its Mapping check among it) cost a sequential publish more than
        # the counting of its one event.
        by_type: dict[str, int] = {}
        for type_ in types:
            by_type[type_] = by_type.get(type_, 0) + 1
        counted: dict[str, int] = {}
        for type_, count in by_type.items():
            type_class = type_.partition(".")[0]
            if type_class not in classes:
                type_class = OTHER
            counted[type_class] = counted.get(type_class, 0) + count
        for type_class, count in counted.items():
            self._child(self._published, "published", type_class).inc(count)

    def loop_guard_tripped(self, limit: str) -> None:
        """A message between agents was refused over ``limit`` (exchanges or per_minute)."""
        self._child(self._loop_guards, "loop_guards", limit).inc()

    def committed(self, seconds: float) -> None:
        self._commits.observe(seconds)

    def delivered(self, way: str, outcome: str, count: int = 1) -> None:
        """``count`` attempts by ``way`` came to ``outcome``."""
        self._child(self._deliveries, "deliveries", way, outcome).inc(count)

    def sent(self, way: str, created_at: Iterable[int], now_ms: int) -> None:
        """Events published at ``created_at`` were sent by ``way`` at ``now_ms``."""
        self._waited(way, SENT, created_at, now_ms)

    def acknowledged(self, way: str, created_at: Iterable[int], now_ms: int) -> None:
        """Events published at ``created_at`` were acknowledged by ``way`` at ``now_ms``."""
        self._waited(way, ACKNOWLEDGED, created_at, now_ms)

    def _waited(self, way: str, stage: str, created_at: Iterable[int], now_ms: int) -> None:
        shared = self._shared_latency
        if shared is None:
            self.latency.observe(way, stage, created_at, now_ms)
            return
        child = shared.labels(way, stage)
        for at in created_at:  # a clock set back counts as no time
            child.observe((now_ms - at if now_ms > at else 0) / 1000)

    def webhook_attempt(self, kind: str, status: int | None, *, refused: bool = False) -> None:
        """A request to an endpoint of ``kind`` was answered with ``status`` (None: none)."""
        outcome = "refused" if refused else "no_answer" if status is None else f"{status // 100}xx"
        self._child(self._webhook_attempts, "webhook_attempts", kind, outcome).inc()

    def http_request(self, method: str, route: str, status: int, seconds: float) -> None:
        method = method if method in METHODS else OTHER
        status_class = f"{status // 100}xx"
        self._child(self._requests, "requests", method, route, status_class).inc()
        duration = self._histograms.get((method, route))
        if duration is None:
            duration = self._histograms[method, route] = self._durations.labels(method, route)
        duration.observe(seconds)

    def streams_open(self, count: int) -> None:
        """``count`` event streams are open in this process now."""
        self._streams.set(count)

    def _child(self, metric: Counter, name: str, *labels: str) -> Counter:
        key = (name, *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    # The scrape

    def render(self, accept: str = "") -> tuple[bytes, str]:
        """The exposition in the format ``accept`` asks for (Prometheus text by default; the
        OpenMetrics text if asked), and its content type. The store gauges show the reading
        last given to ``store_gauges``; with a shared directory, the counts are every
        process's."""
        exposed = _WithoutCreated(self._scraped)
        # The client library's documented encoders, one per format; its own negotiation
        # (``exposition.choose_encoder``) is not part of its documented API.
        if _asks_for_openmetrics(accept):
            return _openmetrics_text(exposed), openmetrics.CONTENT_TYPE_LATEST
        return generate_latest(exposed), PROMETHEUS_TEXT


def _asks_for_openmetrics(accept: str) -> bool:
    """Whether an ``Accept`` header names the OpenMetrics text format (a quality of 0 refuses
    it)."""
    for media_range in accept.split(","):
        kind, *parameters = (part.strip() for part in media_range.split(";"))
        if kind.lower() == OPENMETRICS:
            return not any(_refused(parameter) for parameter in parameters)
    return False


def _refused(parameter: str) -> bool:
    name, _, value = parameter.partition("=")
    try:
        return name.strip().lower() == "q" and float(value) == 0
    except ValueError:
        return False


# The library's OpenMetrics encoder carries no type hints.
_openmetrics_text: Callable[[_WithoutCreated], bytes] = openmetrics.generate_latest


class _WithoutCreated:
    """The registry's metrics without the ``_created`` series the client library adds to each
    counter and histogram (when it was first counted): a series more for every one, which
    Prometheus does not need (a restart shows as a counter going down)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():
            metric.samples = [s for s in metric.samples if not s.name.endswith("_created")]
            yield metric
