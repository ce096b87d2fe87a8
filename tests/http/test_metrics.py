"""``GET /metrics`` of a real ``herald serve``: what a scrape counts after a known mix of
publishes, pushes, acks and webhook failures, parsed by Prometheus's own parser; the store's
gauges alike in two processes on one PostgreSQL database; who may scrape, and what a scrape never
shows."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.herald_process import HeraldProcess
from tests.http.test_endpoints import new_agent
from tests.http.test_keys import new_key
from tests.http.test_readiness import allow_connections
from tests.sse import SSEReader
from tests.test_workers import children_of, start_workers
from tests.waiting import wait_until
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
            wait_until(
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


@pytest.fixture(scope="module")
def with_token(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeraldProcess]:
    """A ``herald serve --metrics-token`` on SQLite for the module's tests of the token."""
    store = tmp_path_factory.mktemp("token") / "herald.db"
    herald = HeraldProcess(f"sqlite:///{store}", extra_args=("--metrics-token", TOKEN))
    yield herald
    herald.stop()


def test_metrics_answer_only_the_admin_key_or_the_metrics_token(with_token: HeraldProcess) -> None:
    herald = with_token
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


def test_metrics_left_open_answer_without_a_key_and_open_nothing_else(tmp_path: Path) -> None:
    herald = HeraldProcess(f"sqlite:///{tmp_path / 'herald.db'}", extra_args=("--metrics-open",))
    try:
        with herald.client() as anyone:
            assert "herald_events_pending" in scrape(anyone)
            assert anyone.get("/v1/stats").status_code == 401
    finally:
        herald.stop()


def test_a_scrape_shows_no_key_secret_or_agents_data(with_token: HeraldProcess) -> None:
    herald = with_token
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
            away = wait_until(
                lambda: (found := scrape(scraper))["herald_store_up"][()] == 0 and found,
                "a scrape without the store",
            )
            allow_connections(postgres_database_url, True)
            wait_until(lambda: scrape(scraper)["herald_store_up"][()] == 1, "the store back")
    finally:
        allow_connections(postgres_database_url, True)
        herald.stop()
    assert "herald_events_pending" not in away
    assert by(away, "herald_events_published_total", "type_class") == {("other",): 1}


def on_own_connection(herald: HeraldProcess) -> httpx.Client:
    """A client whose every request has a connection of its own: the kernel hands each one to
    any of the workers."""
    headers = {"authorization": f"Bearer {herald.admin_key}", "connection": "close"}
    return httpx.Client(base_url=herald.url, headers=headers, timeout=30)


def counted_series(samples: Samples) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The samples that only ever grow: counters, and histograms' buckets, counts and sums."""
    return {
        (name, labels): value
        for name, series in samples.items()
        if name.endswith(("_total", "_bucket", "_count", "_sum"))
        for labels, value in series.items()
    }


def test_with_workers_each_scrape_counts_every_workers_work_and_never_goes_back(
    postgres_database_url: str,
) -> None:
    herald = start_workers(postgres_database_url, 2)
    workers = children_of(herald.process.pid)
    published = publishes = streamed = 0
    stream: SSEReader | None = None
    last: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    try:
        with herald.client(herald.admin_key) as admin:
            agent, streamer = new_agent(admin), new_agent(admin)
        with on_own_connection(herald) as client:
            for round_ in range(8):
                if round_ == 4:  # a worker dies and is replaced: nothing it counted is lost
                    os.kill(min(workers), signal.SIGKILL)
                    herald.wait_for_line(lambda line: "starting another" in line)
                    herald.wait_for_line(lambda line: "listening on" in line)
                    stream = SSEReader(herald.url, streamer["api_key"])
                for _ in range(2):
                    publish(client, [{"to": agent["handle"], "type": "t", "text": "e"}] * 3)
                    published, publishes = published + 3, publishes + 1
                if stream is not None:  # one pushed to the stream, in whichever worker holds it
                    publish(client, [{"to": streamer["handle"], "type": "t", "text": "s"}])
                    published, publishes, streamed = published + 1, publishes + 1, streamed + 1
                    assert stream.next().event == "message"  # type: ignore[union-attr]
                    # The push is counted once its write returns: the client may read it first.
                    wait_until(
                        lambda want=streamed: sse_sent(scrape(client)) == want,
                        "the stream's push to be counted",
                    )
                for _ in range(4):
                    samples = scrape(client)
                    series = counted_series(samples)
                    went_back = {k: (last[k], v) for k, v in series.items() if v < last.get(k, 0)}
                    assert went_back == {}, f"counters went back in round {round_}"
                    assert set(last) <= set(series), "a series went missing"
                    last = series
                    counted = by(samples, "herald_events_published_total", "type_class")
                    assert counted == {("other",): published}
                    requests = by(samples, "herald_http_requests_total", "method", "route")
                    assert requests[("POST", "/v1/events")] == publishes
                    assert samples["herald_streams"][()] == (1 if stream is not None else 0)
                    assert sse_sent(samples) == streamed
    finally:
        if stream is not None:
            stream.close()
        herald.stop()


def sse_sent(samples: Samples) -> float:
    """How many events the scrape says a stream sent (the count of their latencies)."""
    latency = by(samples, "herald_delivery_latency_seconds_count", "way", "stage")
    return float(latency.get(("sse", "sent"), 0))


def established_on_port(pid: int, port: int) -> bool:
    """Whether the process ``pid`` holds a connection accepted on ``port`` (read from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port, state, inode = int(fields[1].rsplit(":", 1)[1], 16), fields[3], fields[9]
            if local_port == port and state == "01" and inode in inodes:  # 01: ESTABLISHED
                return True
    return False


def test_with_workers_a_killed_workers_streams_are_no_longer_counted(
    postgres_database_url: str,
) -> None:
    herald = HeraldProcess(postgres_database_url, extra_args=("--workers", "2"))
    stream: SSEReader | None = None
    try:
        with herald.client(herald.admin_key) as admin:
            streamer = new_agent(admin)
        stream = SSEReader(herald.url, streamer["api_key"])
        port = int(herald.url.rsplit(":", 1)[1])
        with on_own_connection(herald) as client:
            assert scrape(client)["herald_streams"][()] == 1
            (holder,) = [
                pid for pid in children_of(herald.process.pid) if established_on_port(pid, port)
            ]
            os.kill(holder, signal.SIGKILL)
            herald.wait_for_line(lambda line: f"worker {holder} ended" in line)
            for _ in range(4):
                assert scrape(client)["herald_streams"][()] == 0
    finally:
        if stream is not None:
            stream.close()
        herald.stop()
