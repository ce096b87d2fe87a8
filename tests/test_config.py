"""``ServeConfig`` holds every default: the constructors a Python program calls use the same ones
as ``herald serve`` (whose flags are compared in tests/test_cli.py)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from herald import Hub, InvalidInput, Notifier, ServeConfig
from herald.addresses import AddressPolicy
from herald.capabilities import DeliveryCapabilities
from herald.config import (
    DEFAULTS,
    DeliveryConfig,
    KeyLimits,
    SubscriptionConfig,
    WebhookConfig,
)
from herald.delivery.fanout import Fanout
from herald.http.limits import Limits
from herald.times import format_duration, parse_duration
from herald.webhooks.sender import Sender
from herald.webhooks.worker import WebhookWorker

pytestmark = pytest.mark.anyio


@pytest.fixture
async def unopened_hub(tmp_path: Path) -> AsyncIterator[Hub]:
    hub = Hub.from_url(f"sqlite:///{tmp_path / 'h.db'}")
    yield hub


def test_the_defaults_are_a_serve_config_built_with_no_arguments() -> None:
    assert ServeConfig() == DEFAULTS


async def test_the_hub_notifier_and_fanout_default_to_the_config(unopened_hub: Hub) -> None:
    hub = unopened_hub
    assert hub.lease_ms == DEFAULTS.hub.lease_s * 1000
    assert hub.retention_ms == DEFAULTS.hub.retention_s * 1000
    assert hub.maintenance_interval_s == DEFAULTS.hub.maintenance_interval_s
    notifier = Notifier(hub)
    delivery = DEFAULTS.delivery
    assert (notifier.ack_timeout_s, notifier.backlog_limit, notifier.poll_interval_s) == (
        delivery.ack_timeout_s,
        delivery.backlog_limit,
        delivery.poll_interval_s,
    )
    assert DeliveryCapabilities("http", "2025-11-25").ack_timeout_s == delivery.ack_timeout_s
    fanout = Fanout(hub)
    streams = DEFAULTS.streams
    assert (fanout.buffer_size, fanout.buffer_bytes, fanout.poll_interval_s) == (
        streams.buffer_size,
        streams.buffer_bytes,
        streams.poll_interval_s,
    )


async def test_the_webhook_sender_and_worker_default_to_the_config(unopened_hub: Hub) -> None:
    webhooks = DEFAULTS.webhooks
    sender = Sender("http://127.0.0.1:8787", AddressPolicy())
    assert sender.timeout_s == webhooks.timeout_s
    worker = WebhookWorker(unopened_hub, sender)
    assert worker.schedule_s == webhooks.schedule_s
    assert worker.subscription_schedule_s == DEFAULTS.subscriptions.schedule_s
    assert worker.disable_after_ms == webhooks.disable_after_s * 1000
    assert worker.per_endpoint == webhooks.per_endpoint
    assert worker.poll_interval_s == webhooks.poll_interval_s
    assert worker.min_interval_s == webhooks.min_interval_s
    assert worker.stop_grace_s == webhooks.stop_grace_s
    # A webhook waits for a live session as long as a push waits for its acknowledgement.
    assert worker.grace_ms == DEFAULTS.delivery.ack_timeout_s * 1000
    await sender.close()


def test_the_per_key_limits_default_to_the_config() -> None:
    limits = Limits()
    assert limits.config == DEFAULTS.limits == KeyLimits()
    assert limits.streams.limit == DEFAULTS.limits.streams
    assert (limits.publish.rate, limits.publish.burst) == (
        DEFAULTS.limits.publish_rate,
        DEFAULTS.limits.publish_burst,
    )


def test_the_address_policy_reads_back_as_the_text_it_was_parsed_from() -> None:
    for text in ["", "loopback", "private", "loopback,private"]:
        assert str(AddressPolicy.parse(text)) == text


@pytest.mark.parametrize("ttl_s", [0.0, 0.5, -1.0, float("nan"), float("inf")])
def test_a_presence_ttl_under_a_second_is_refused(ttl_s: float) -> None:
    with pytest.raises(InvalidInput, match="presence TTL must be at least 1 s"):
        DeliveryConfig(presence_ttl_s=ttl_s)


@pytest.mark.parametrize(
    "ttls",
    [(0.0, 60.0, 120.0), (120.0, 60.0, 3600.0), (60.0, 7200.0, 3600.0), (60.0, 60.0, math.inf)],
)
def test_subscription_ttls_out_of_order_are_refused(ttls: tuple[float, float, float]) -> None:
    low, default, high = ttls
    with pytest.raises(InvalidInput, match="subscription TTLs"):
        SubscriptionConfig(min_ttl_s=low, default_ttl_s=default, max_ttl_s=high)


@pytest.mark.parametrize("grace_s", [-1.0, float("nan"), float("inf")])
def test_a_webhook_stop_grace_below_0_or_endless_is_refused(grace_s: float) -> None:
    with pytest.raises(InvalidInput, match="webhook stop grace must be 0 seconds or more"):
        WebhookConfig(stop_grace_s=grace_s)
    assert WebhookConfig(stop_grace_s=0).stop_grace_s == 0  # requests are cut off at once


def test_a_negative_subscription_limit_is_refused() -> None:
    with pytest.raises(InvalidInput, match="subscription limit per agent"):
        SubscriptionConfig(max_per_agent=-1)


@pytest.mark.parametrize("rate", [-1.0, float("nan"), float("inf")])
def test_a_negative_or_endless_subscription_rate_is_refused(rate: float) -> None:
    with pytest.raises(InvalidInput, match="subscription rate"):
        SubscriptionConfig(rate=rate)


def test_an_empty_subscription_schedule_is_refused() -> None:
    with pytest.raises(InvalidInput, match="retry schedule"):
        SubscriptionConfig(schedule_s=())


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("12h", 43200), ("7d", 604800), ("2.5", 2.5), ("500ms", 0.5)],
)
def test_a_duration_reads_as_seconds_and_writes_back_as_it_was_read(
    text: str, seconds: float
) -> None:
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


def test_a_duration_is_written_in_its_largest_whole_unit() -> None:
    written = [format_duration(s) for s in (DEFAULTS.hub.retention_s, 300.0, 90.0, 0.25)]
    assert written == ["7d", "5m", "90s", "0.25s"]


@pytest.mark.parametrize("text", ["", "soon", "-5s", "5 weeks", "1e3", "nan"])
def test_a_duration_that_is_not_one_says_what_to_write(text: str) -> None:
    with pytest.raises(InvalidInput, match="write a duration such as 90s, 15m, 12h or 7d"):
        parse_duration(text)


def test_an_unknown_log_level_or_format_is_refused() -> None:
    with pytest.raises(InvalidInput, match="log level"):
        ServeConfig(log_level="loud")
    with pytest.raises(InvalidInput, match="log format"):
        ServeConfig(log_format="xml")
