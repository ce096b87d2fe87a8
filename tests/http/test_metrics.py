"""``GET /metrics`` of a real ``herald serve``: what a scrape counts after a known mix of
publishes, pushes, acks and webhook failures, parsed by Prometheus's own parser; the store's
gauges alike in two processes on one PostgreSQL database; who may scrape, and what a scrape never
shows."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.herald_process import HeraldProcess
from tests.http.test_endpoints import new_agent
from tests.http.test_keys import new_key
from tests.http.test_readiness import allow_connections
from tests.sse import SSEReader
from tests.webhooks.receiver import Receiver

TOKEN = "herald-test-metrics-token-0123456789abcdef"

Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def scrape(client: httpx.Client) -> Samples:
    """Every sample of a scrape, by name then labels; the text is parsed as Prometheus would."""
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    found: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.items()))
            found.setdefault(sample.name, {})[labels] = sample.value
    return found


def by(samples: Samples, name: str, *label_names: str) -> dict[tuple[str, ...], float]:
    """The samples of ``name`` keyed by the values of ``label_names``; those at 0 left out."""
    return {
        tuple(dict(labels)[label] for label in label_names): value
        for labels, value in samples.get(name, {}).items()
        if value
    }


def publish(admin: httpx.Client, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    response = admin.post("/v1/events", json=events)
    assert response.status_code in (200, 202), response.text  # 200: each one a repeat
    return list(response.json()["events"])


def wait_for(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + 30
    while not (value := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return value


def test_a_scrape_after_a_known_mix_shows_the_expected_counts(tmp_path: Path) -> None:
    receiver = Receiver(script=[(500, {}), (503, {})])
    args = ("--webhook-allow", "loopback", "--webhook-schedule", "0,0")
    herald = HeraldProcess(f"sqlite:///{tmp_path / 'herald.db'}", extra_args=args)
    try:
        with herald.client(herald.admin_key) as admin:
            declared = admin.put("/v1/event-types/deploy.finished", json={"description": "d"})
            assert declared.status_code == 201, declared.text
            drainer, streamer, hooked = new_agent(admin), new_agent(admin), new_agent(admin)
            hook = admin.put(f"/v1/agents/{hooked['id']}/webhook", json={"url": receiver.url})
            assert hook.status_code == 200, hook.text
            stream = SSEReader(herald.url, streamer["api_key"])

            deploy = {"to": drainer["handle"], "type": "deploy.finished", "text": "d"}
            publish(admin, [{**deploy, "dedupe_key": "once"}, deploy, deploy])
            publish(admin, [{**deploy, "dedupe_key": "once"}])  # a repeat: not counted
            chat = {"to": streamer["handle"], "type": "chat.message", "text": "c"}
            pushed = publish(admin, [chat, chat])
            (failing,) = publish(admin, [{"to": hooked["handle"], "type": "t", "text": "w"}])

            # Two pushed to the stream, then acknowledged by id.
            assert [stream.next().event for _ in pushed] == ["message", "message"]  # type: ignore[union-attr]
            with herald.client(streamer["api_key"]) as agent:
                acked = agent.post("/channel/ack", json={"ids": [e["id"] for e in pushed]})
                assert acked.status_code == 200, acked.text
            # Three leased to a drain, then acknowledged by its cursor.
            with herald.client(drainer["api_key"]) as agent:
                drained = agent.post("/channel/heartbeat", json={"cursor": 0, "limit": 10})
                assert len(drained.json()["events"]) == 3, drained.text
                agent.post("/channel/heartbeat", json={"cursor": 3}).raise_for_status()
            # The webhook answers 500, then 503: tried twice and given up on.
            attempts = f"/v1/events/{failing['id']}"
            wait_for(
                lambda: (
                    [a["outcome"] for a in admin.get(attempts).json()["attempts"]]
                    == ["failed", "undeliverable"]
                ),
                "the webhook to be given up on",
            )
            samples = scrape(admin)
            stream.close()
    finally:
        herald.stop()
        receiver.close()

    assert by(samples, "herald_events_published_total", "type_class") == {
        ("deploy",): 3,
        ("other",): 3,
    }
    assert by(samples, "herald_deliveries_total", "way", "outcome") == {
        ("sse", "sent"): 2,
        ("heartbeat", "leased"): 3,
        ("ack", "delivered"): 5,
        ("webhook", "failed"): 1,
        ("webhook", "undeliverable"): 1,
    }
    assert by(samples, "herald_delivery_latency_seconds_count", "way", "stage") == {
        ("sse", "sent"): 2,
        ("heartbeat", "sent"): 3,
        ("ack", "acknowledged"): 5,
    }
    assert by(samples, "herald_webhook_attempts_total", "kind", "outcome") == {
        ("webhook", "5xx"): 2
    }
    assert samples["herald_events_pending"][()] == 1  # the webhook's, left for a drain
    assert samples["herald_oldest_pending_age_seconds"][()] > 0
    # Its two requests failed: the endpoint is counted failing, not active.
    assert by(samples, "herald_webhook_endpoints", "kind", "state") == {("webhook", "failing"): 1}
    assert by(samples, "herald_sessions", "transport", "era") == {}
    assert samples["herald_streams"][()] == 1
    assert samples["herald_store_commit_seconds_count"][()] == 4
    requests = by(samples, "herald_http_requests_total", "method", "route", "status_class")
    assert requests[("POST", "/v1/events", "2xx")] == 4
    assert requests[("PUT", "/v1/agents/{agent_id}/webhook", "2xx")] == 1
    assert requests[("POST", "/channel/heartbeat", "2xx")] == 2
    assert requests[("GET", "/channel/stream", "2xx")] == 1
    timed = by(samples, "herald_http_request_duration_seconds_count", "method", "route")
    assert timed[("POST", "/v1/events")] == 4


def test_two_processes_on_postgresql_report_the_same_store_gauges(
    postgres_database_url: str,
) -> None:
    first = HeraldProcess(postgres_database_url)
    second = HeraldProcess(postgres_database_url)
    try:
        with first.client(first.admin_key) as admin:
            agent = new_agent(admin, webhook_url="https://93.184.215.14/h")
            publish(
                admin, [{"to": agent["handle"], "type": "t", "text": f"e{n}"} for n in range(5)]
            )
            seen_first = scrape(admin)
        with second.client(second.admin_key) as admin:
            seen_second = scrape(admin)
    finally:
        first.stop()
        second.stop()
    for samples in (seen_first, seen_second):
        assert samples["herald_events_pending"][()] == 5
        assert by(samples, "herald_webhook_endpoints", "kind", "state") == {
            ("webhook", "active"): 1
        }
    # What each process did is its own: only the first published.
    assert by(seen_first, "herald_events_published_total", "type_class") == {("other",): 5}
    assert by(seen_second, "herald_events_published_total", "type_class") == {}


def test_metrics_answer_only_the_admin_key_or_the_metrics_token(tmp_path: Path) -> None:
    herald = HeraldProcess(
        f"sqlite:///{tmp_path / 'herald.db'}", extra_args=("--metrics-token", TOKEN)
    )
    try:
        with herald.client(herald.admin_key) as admin:
            agent = new_agent(admin)
            publisher = new_key(admin)["key"]
        for key, status in [
            (None, 401),
            ("herald_admin_" + "x" * 43, 401),
            (TOKEN + "x", 401),
            (agent["api_key"], 403),
            (publisher, 403),
        ]:
            with herald.client(key) as client:
                refused = client.get("/metrics")
                assert refused.status_code == status, (key, refused.text)
                assert "herald_" not in refused.text.replace("herald_agent_", "")
        for key in (herald.admin_key, TOKEN):
            with herald.client(key) as client:
                assert "herald_events_pending" in scrape(client)
        with herald.client(TOKEN) as scraper:  # the token reads the metrics and nothing else
            for path in ("/v1/stats", "/v1/agents", "/v1/events"):
                assert scraper.get(path).status_code == 401, path
    finally:
        herald.stop()


def test_metrics_left_open_answer_without_a_key_and_open_nothing_else(tmp_path: Path) -> None:
    herald = HeraldProcess(f"sqlite:///{tmp_path / 'herald.db'}", extra_args=("--metrics-open",))
    try:
        with herald.client() as anyone:
            assert "herald_events_pending" in scrape(anyone)
            assert anyone.get("/v1/stats").status_code == 401
    finally:
        herald.stop()


def test_a_scrape_shows_no_key_secret_or_agents_data(tmp_path: Path) -> None:
    herald = HeraldProcess(
        f"sqlite:///{tmp_path / 'herald.db'}", extra_args=("--metrics-token", TOKEN)
    )
    try:
        with herald.client(herald.admin_key) as admin:
            handle = f"secretive-{uuid.uuid4().hex[:8]}"
            agent = new_agent(admin, handle=handle, webhook_url="https://93.184.215.14/h")
            openclaw = {"url": "https://93.184.215.14/oc", "token": "openclaw-token-" + "q" * 20}
            assert admin.put(f"/v1/agents/{agent['id']}/openclaw", json=openclaw).is_success
            publisher = new_key(admin)["key"]
            (event,) = publish(
                admin,
                [{"to": handle, "type": "private.thing", "text": "the-text", "data": {"d": 1}}],
            )
            with herald.client(agent["api_key"]) as as_agent:
                as_agent.post("/channel/heartbeat", json={"cursor": 0}).raise_for_status()
            with herald.client(TOKEN) as scraper:
                text = scraper.get("/metrics").text
    finally:
        herald.stop()
    assert "herald_events_pending" in text
    for secret in (
        herald.admin_key,
        TOKEN,
        agent["api_key"],
        agent["webhook"]["secret"],
        openclaw["token"],
        publisher,
        agent["id"],
        handle,
        event["id"],
        "the-text",
        "private",
        "93.184.215.14",
    ):
        assert str(secret) not in text, secret


def test_a_scrape_while_the_store_is_away_answers_the_processs_own_counts(
    postgres_database_url: str,
) -> None:
    herald = HeraldProcess(postgres_database_url, extra_args=("--metrics-token", TOKEN))
    try:
        with herald.client(herald.admin_key) as admin:
            agent = new_agent(admin)
            publish(admin, [{"to": agent["handle"], "type": "t", "text": "e"}])
        with herald.client(TOKEN) as scraper:  # the token is checked without the store
            assert scrape(scraper)["herald_store_up"][()] == 1
            allow_connections(postgres_database_url, False)
            away = wait_for(
                lambda: (found := scrape(scraper))["herald_store_up"][()] == 0 and found,
                "a scrape without the store",
            )
            allow_connections(postgres_database_url, True)
            wait_for(lambda: scrape(scraper)["herald_store_up"][()] == 1, "the store back")
    finally:
        allow_connections(postgres_database_url, True)
        herald.stop()
    assert "herald_events_pending" not in away
    assert by(away, "herald_events_published_total", "type_class") == {("other",): 1}
