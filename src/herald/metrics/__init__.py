"""herald's Prometheus metrics (``GET /metrics``): counters and histograms of what each process
did (added up across the workers of ``herald serve --workers``), and gauges of what the store
holds, read from it at scrape time."""

from herald.metrics.instruments import Metrics

__all__ = ["Metrics"]
