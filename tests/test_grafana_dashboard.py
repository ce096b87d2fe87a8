"""The Grafana dashboard under docs/ is valid JSON whose queries use the metrics herald serves,
and it shows each of them."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from herald.metrics import Metrics
from herald.overview import Gauges

DASHBOARD = Path(__file__).resolve().parents[1] / "docs" / "grafana-dashboard.json"


def served() -> dict[str, set[str]]:
    """Each metric family herald serves, with the names of its samples."""
    metrics = Metrics()
    metrics.published(["t"], set())
    metrics.delivered("sse", "sent")
    metrics.sent("sse", [0], 1)
    metrics.webhook_attempt("webhook", 500)
    metrics.committed(0.001)
    metrics.loop_guard_tripped("exchanges")
    metrics.http_request("GET", "/metrics", 200, 0.001)
    metrics.store_gauges.show(Gauges(0, 0, None, [("mcp", "legacy", 1)], []))
    text = metrics.render()[0].decode()
    return {
        family.name: {sample.name for sample in family.samples}
        for family in text_string_to_metric_families(text)
    }


def test_the_dashboard_queries_only_metrics_herald_serves_and_shows_each() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    expressions = [
        target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])
    ]
    used = {name for expr in expressions for name in re.findall(r"\bherald_[a-z_]+", expr)}
    families = served()
    sample_names = set().union(*families.values())
    assert used - sample_names == set(), "the dashboard queries a metric herald does not serve"
    unshown = {family for family, names in families.items() if not names & used}
    assert unshown == set(), "a metric herald serves is on no panel"
