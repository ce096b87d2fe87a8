"""Scale-out: two ``herald serve`` processes on one PostgreSQL database, standing for two hosts
(each its own address, port and ``--public-url``). An event published at one reaches an agent
connected at the other (its stream, its drain), a webhook is sent once by one of them, never
twice; the per-key limits are counted as docs/scaling.md says: subscriptions across both
(they are rows of the database, counted in the transaction that writes one, so that subscribes
racing at both hosts never pass the limit), streams, sessions and the publish rate by each
process alone."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import scratch_database
from tests.herald_process import HeraldProcess
from tests.http.test_mcp_events import agent_http
from tests.http.test_mcp_sessions import INITIALIZE, MCP_HEADERS
from tests.http.test_mcp_webhooks import call, held_and_refused, racing_subscribes, subscription
from tests.sse import SSEReader
from tests.waiting import wait_until
from tests.webhooks.receiver import Receiver

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]  # the module's hosts too

HOSTS = ("127.0.0.1", "127.0.0.2")
"""Two loopback addresses: two hosts as far as their clients can tell."""
EVENTS = 12
BURST = 3
SUBSCRIPTION_LIMIT = 2


def free_port(host: str) -> int:
    """A port free on ``host`` now: the process is started on it so that its ``--public-url``
    can name it."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def host(database_url: str, address: str, *extra: str) -> HeraldProcess:
    port = free_port(address)
    public_url = f"http://{address}:{port}"
    args = ("--host", address, "--public-url", public_url, "--webhook-allow", "loopback", *extra)
    herald = HeraldProcess(database_url, port=port, extra_args=args)
    assert herald.url == public_url
    return herald


@contextlib.contextmanager
def two_hosts(database_url: str, *extra: str) -> Iterator[tuple[HeraldProcess, HeraldProcess]]:
    one = host(database_url, HOSTS[0], *extra)
    try:
        two = host(database_url, HOSTS[1], *extra)
        try:
            yield one, two
        finally:
            two.stop()
    finally:
        one.stop()


@pytest.fixture(scope="module")
def hosts() -> Iterator[tuple[HeraldProcess, HeraldProcess]]:
    """Two hosts on one database, for the module's tests whose processes need not stop before
    they end nor take a limit of their own: each test has agents of its own."""
    with (
        scratch_database() as url,
        two_hosts(url, "--subscription-limit", str(SUBSCRIPTION_LIMIT)) as both,
    ):
        yield both


def new_agent(herald: HeraldProcess) -> dict[str, Any]:
    with herald.client(herald.admin_key) as admin:
        made = admin.post("/v1/agents", json={"handle": f"a-{uuid.uuid4().hex[:8]}"})
    assert made.status_code == 201, made.text
    return dict(made.json())


def publish(herald: HeraldProcess, to: str, text: str) -> httpx.Response:
    with herald.client(herald.admin_key) as admin:
        return admin.post("/v1/events", json={"to": to, "type": "t", "text": text})


def published(herald: HeraldProcess, to: str, text: str) -> str:
    answer = publish(herald, to, text)
    assert answer.status_code == 202, answer.text
    return str(answer.json()["id"])


def test_an_event_published_at_one_host_reaches_an_agent_connected_at_the_other(
    hosts: tuple[HeraldProcess, HeraldProcess],
) -> None:
    one, two = hosts
    streamed, drained = new_agent(one), new_agent(one)
    reader = SSEReader(two.url, streamed["api_key"])
    try:
        assert reader.status == 200
        sent = published(one, streamed["handle"], "from the first host")
        frame = reader.next()
        assert frame is not None and frame.event == "message", frame
        assert frame.data["id"] == sent
    finally:
        reader.close()
    sent_ids = {published(one, drained["handle"], f"to drain {n}") for n in range(3)}
    with two.client(drained["api_key"]) as agent:
        answer = agent.post("/channel/heartbeat", json={"limit": 10})
    assert {event["id"] for event in answer.json()["events"]} == sent_ids


def test_a_webhook_is_sent_once_by_one_host_with_its_public_url(
    postgres_database_url: str,
) -> None:
    receiver = Receiver()
    try:
        with two_hosts(postgres_database_url) as (one, two):
            agent = new_agent(one)
            with two.client(two.admin_key) as admin:
                target = {"url": receiver.url, "token": "t" * 32, "mode": "agent"}
                put = admin.put(f"/v1/agents/{agent['id']}/openclaw", json=target)
            assert put.status_code == 200, put.text
            sent = [published((one, two)[n % 2], agent["handle"], f"e{n}") for n in range(EVENTS)]

            def all_sent() -> bool:
                with one.client(one.admin_key) as admin:
                    return all(
                        admin.get(f"/v1/events/{event}").json()["status"] == "sent"
                        for event in sent
                    )

            wait_until(all_sent, f"the {EVENTS} events to be sent")
            with one.client(one.admin_key) as admin:
                for event in sent:
                    attempts = admin.get(f"/v1/events/{event}").json()["attempts"]
                    assert [a["outcome"] for a in attempts] == ["sent"], attempts
        # Both processes have stopped: nothing more can come. (An OpenClaw wake is "sent": the
        # agent it wakes drains its events itself.)
        keys = Counter(got.headers["idempotency-key"] for got in receiver.requests)
        assert keys == Counter(sent)
        for got in receiver.requests:  # each host tells the agent its own URL
            text = got.json["message"]
            assert f"{one.url}/channel/heartbeat" in text or f"{two.url}/channel/heartbeat" in text
    finally:
        receiver.close()


async def test_each_host_counts_streams_sessions_and_the_publish_rate_alone(
    postgres_database_url: str,
) -> None:
    # A publish rate so low that no token comes back during the test: only the burst counts.
    limits = (
        *("--streams-per-key", "1", "--sessions-per-key", "1"),
        *("--publish-rate", "0.001", "--publish-burst", str(BURST)),
    )
    with two_hosts(postgres_database_url, *limits) as (one, two):
        agent = new_agent(one)
        key = agent["api_key"]
        # Streams: one per key on each host.
        first = SSEReader(one.url, key)
        try:
            assert first.status == 200
            refused = SSEReader(one.url, key)
            refused.close()
            assert refused.status == 429
            elsewhere = SSEReader(two.url, key)
            elsewhere.close()
            assert elsewhere.status == 200
        finally:
            first.close()
        # MCP sessions: one per key on each host.
        headers = {**MCP_HEADERS, "authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            assert (await http.post(f"{one.url}/mcp", json=INITIALIZE)).status_code == 200
            over = await http.post(f"{one.url}/mcp", json=INITIALIZE)
            assert over.status_code == 429, over.text
            assert "--sessions-per-key" in over.json()["error"]["message"]
            assert (await http.post(f"{two.url}/mcp", json=INITIALIZE)).status_code == 200
        # The publish rate: the admin key's burst at each host.
        for herald in (one, two):
            for n in range(BURST):
                published(herald, agent["handle"], f"burst {n}")
            over = publish(herald, agent["handle"], "one too many")
            assert over.status_code == 429, over.text
            assert "--publish-rate" in over.json()["error"]["message"]


async def test_the_subscription_limit_holds_across_hosts(
    hosts: tuple[HeraldProcess, HeraldProcess],
) -> None:
    one, two = hosts
    receiver = Receiver(answers_challenges=True)
    try:
        agent = new_agent(one)
        # The limit's worth held at the first host, then one more asked of the second.
        async with agent_http(one, agent["api_key"]) as http:
            for n in range(SUBSCRIPTION_LIMIT):
                held = subscription(receiver.url, arguments={"types": [f"held{n}.*"]})
                assert "result" in await call(http, "modern", "events/subscribe", held)
        async with agent_http(two, agent["api_key"]) as http:
            more = subscription(receiver.url, arguments={"types": ["more.*"]})
            full = await call(http, "modern", "events/subscribe", more)
        assert full["error"]["code"] == -32025
        assert full["error"]["data"] == {"limit": "subscriptions", "max": SUBSCRIPTION_LIMIT}
    finally:
        await asyncio.to_thread(receiver.close)


async def test_subscribes_racing_at_both_hosts_never_pass_the_limit(
    hosts: tuple[HeraldProcess, HeraldProcess],
) -> None:
    one, two = hosts
    receiver = Receiver(answers_challenges=True)
    try:
        agent = new_agent(one)
        answers = await racing_subscribes([one, two] * 4, agent["api_key"], receiver.url)
        assert held_and_refused(answers, SUBSCRIPTION_LIMIT) == (SUBSCRIPTION_LIMIT, 6)
    finally:
        await asyncio.to_thread(receiver.close)
