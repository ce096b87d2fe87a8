"""A hub's metrics: their own registry, bounded labels, and an exposition Prometheus parses."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from herald.metrics import Metrics
from herald.overview import Gauges


def values(
    metrics: Metrics, accept: str = ""
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, _ = metrics.render(accept)
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def test_types_are_counted_by_class_and_undeclared_ones_as_other() -> None:
    metrics = Metrics()
    types = ["deploy.failed", "deploy.done", "deploy", "reply.received", "chat.new", "x.y"]
    metrics.published(types, {"deploy", "reply"})
    found = values(metrics)
    assert found["herald_events_published_total", (("type_class", "deploy"),)] == 3
    assert found["herald_events_published_total", (("type_class", "reply"),)] == 1
    assert found["herald_events_published_total", (("type_class", "other"),)] == 2


def test_two_hubs_metrics_never_mix() -> None:
    first, second = Metrics(), Metrics()
    first.delivered("sse", "sent", 3)
    assert values(first)["herald_deliveries_total", (("outcome", "sent"), ("way", "sse"))] == 3
    assert not any(name == "herald_deliveries_total" for name, _ in values(second))


def test_http_requests_are_counted_by_method_template_and_status_class() -> None:
    metrics = Metrics()
    metrics.http_request("POST", "/v1/events", 202, 0.002)
    metrics.http_request("POST", "/v1/events", 204, 0.003)
    metrics.http_request("BREW", "unmatched", 404, 0.001)
    found = values(metrics)
    posted = (("method", "POST"), ("route", "/v1/events"), ("status_class", "2xx"))
    assert found["herald_http_requests_total", posted] == 2
    other = (("method", "other"), ("route", "unmatched"), ("status_class", "4xx"))
    assert found["herald_http_requests_total", other] == 1
    timed = (("method", "POST"), ("route", "/v1/events"))
    assert found["herald_http_request_duration_seconds_count", timed] == 2


def test_webhook_attempts_are_counted_by_the_class_of_their_answer() -> None:
    metrics = Metrics()
    for status in (200, 500, 503, None):
        metrics.webhook_attempt("webhook", status)
    metrics.webhook_attempt("openclaw", None, refused=True)
    found = values(metrics)

    def count(kind: str, outcome: str) -> float:
        return found["herald_webhook_attempts_total", (("kind", kind), ("outcome", outcome))]

    assert (count("webhook", "2xx"), count("webhook", "5xx")) == (1, 2)
    assert (count("webhook", "no_answer"), count("openclaw", "refused")) == (1, 1)


def test_the_store_gauges_show_the_reading_given_with_every_endpoint_state() -> None:
    metrics = Metrics()
    assert not any(name == "herald_events_pending" for name, _ in values(metrics))
    assert values(metrics)["herald_store_up", ()] == 0
    reading = Gauges(10_000, 7, 4_500, [("mcp", "legacy", 2)], [("webhook", "disabled", 1)])
    metrics.store_gauges.show(reading)
    found = values(metrics)
    assert found["herald_store_up", ()] == 1
    assert found["herald_events_pending", ()] == 7
    assert found["herald_oldest_pending_age_seconds", ()] == 5.5
    assert found["herald_sessions", (("era", "legacy"), ("transport", "mcp"))] == 2
    assert found["herald_webhook_endpoints", (("kind", "webhook"), ("state", "disabled"))] == 1
    assert found["herald_webhook_endpoints", (("kind", "openclaw"), ("state", "active"))] == 0


def test_the_exposition_has_no_created_series_in_either_format() -> None:
    metrics = Metrics()
    metrics.delivered("ack", "delivered")
    metrics.committed(0.001)
    for accept in ("", "application/openmetrics-text; version=1.0.0"):
        body, content_type = metrics.render(accept)
        assert b"_created" not in body
        assert content_type.startswith("application/openmetrics-text" if accept else "text/plain")
    metrics.streams_open(4)
    assert values(metrics)["herald_streams", ()] == 4


def test_the_exposition_format_is_what_the_accept_header_asks_for() -> None:
    metrics = Metrics()
    metrics.delivered("ack", "delivered")
    asked = {
        "text/plain;version=0.0.4;q=0.5, application/openmetrics-text;version=1.0.0": "open",
        "Application/OpenMetrics-Text": "open",
        "application/openmetrics-text;q=0, text/plain": "text",
        "application/openmetrics-text; q=0.000": "text",
        "*/*": "text",
        "": "text",
    }
    for accept, kind in asked.items():
        body, content_type = metrics.render(accept)
        if kind == "open":
            assert content_type.startswith("application/openmetrics-text"), accept
            assert body.endswith(b"# EOF\n")
        else:
            assert content_type.startswith("text/plain"), accept
            assert b"# EOF" not in body
