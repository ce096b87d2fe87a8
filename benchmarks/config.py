"""How big each benchmark is: the full run (about 4 minutes) and ``--quick`` (a smoke run)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Sizes:
    """Each measured phase stops at its count or its time limit, whichever comes first."""

    store_rounds: int
    store_events: int
    store_seconds: float
    publishers: int
    http_requests: int
    http_seconds: float
    http_connections: int
    http_rounds: int
    warmup_seconds: float
    batch_size: int
    batch_connections: int
    backlog: int
    drain_limit: int
    drain_seconds: float
    drainers: int
    latency_rate: float
    latency_seconds: float
    latency_connections: int
    mcp_sessions: int
    mcp_rate: float
    mcp_seconds: float
    mcp_publishers: int
    mcp_burst_per_session: int
    mcp_burst_rounds: int
    mcp_burst_seconds: float
    webhook_events: int
    webhook_endpoints: int
    webhook_per_endpoint: int
    webhook_seconds: float
    webhook_failing_events: int
    stream_count: int
    stream_fanout_rounds: int
    stream_agents: int
    stream_rate: float
    stream_seconds: float
    stream_publishers: int
    events_rounds: int
    latency_rounds: int
    subscription_rounds: int
    send_file_events: int
    send_file_rounds: int
    send_file_seconds: float
    listing_events: int
    listing_agents: int
    listing_requests: int
    listing_fill_seconds: float
    topic_subscribers: int
    topic_rounds: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


FULL = Sizes(
    store_rounds=3,
    store_events=20_000,
    store_seconds=1.5,
    publishers=64,
    http_requests=100_000,
    http_seconds=6.0,
    http_connections=64,
    http_rounds=3,
    warmup_seconds=1.0,
    batch_size=1000,
    batch_connections=4,
    backlog=60_000,
    drain_limit=100,
    drain_seconds=10.0,
    drainers=4,
    latency_rate=1000.0,
    latency_seconds=10.0,
    latency_connections=32,
    mcp_sessions=200,
    mcp_rate=500.0,
    mcp_seconds=8.0,
    mcp_publishers=16,
    mcp_burst_per_session=50,
    mcp_burst_rounds=3,
    mcp_burst_seconds=30.0,
    webhook_events=4000,
    webhook_endpoints=8,
    webhook_per_endpoint=4,
    webhook_seconds=20.0,
    webhook_failing_events=1200,
    stream_count=10_000,
    stream_fanout_rounds=5,
    stream_agents=100,
    stream_rate=1000.0,
    stream_seconds=5.0,
    stream_publishers=16,
    events_rounds=3,
    latency_rounds=15,  # at 5, the median round's verdict flipped between runs of one code
    subscription_rounds=3,
    send_file_events=100_000,
    send_file_rounds=3,
    send_file_seconds=60.0,
    listing_events=1_000_000,
    listing_agents=10_000,
    listing_requests=200,
    listing_fill_seconds=90.0,
    topic_subscribers=10_000,
    topic_rounds=10,
)

QUICK = Sizes(
    store_rounds=2,
    store_events=2_000,
    store_seconds=0.4,
    publishers=64,
    http_requests=5_000,
    http_seconds=1.5,
    http_connections=64,
    http_rounds=1,
    warmup_seconds=0.3,
    batch_size=1000,
    batch_connections=4,
    backlog=5_000,
    drain_limit=100,
    drain_seconds=3.0,
    drainers=4,
    latency_rate=1000.0,
    latency_seconds=2.0,
    latency_connections=32,
    mcp_sessions=50,
    mcp_rate=500.0,
    mcp_seconds=2.0,
    mcp_publishers=16,
    mcp_burst_per_session=20,
    mcp_burst_rounds=2,
    mcp_burst_seconds=10.0,
    webhook_events=800,
    webhook_endpoints=8,
    webhook_per_endpoint=4,
    webhook_seconds=10.0,
    webhook_failing_events=400,
    stream_count=1_000,
    stream_fanout_rounds=2,
    stream_agents=100,
    stream_rate=1000.0,
    stream_seconds=2.0,
    stream_publishers=16,
    events_rounds=1,
    latency_rounds=1,
    subscription_rounds=1,
    send_file_events=10_000,
    send_file_rounds=1,
    send_file_seconds=20.0,
    listing_events=20_000,
    listing_agents=1_000,
    listing_requests=50,
    listing_fill_seconds=30.0,
    topic_subscribers=10_000,
    topic_rounds=3,
)
