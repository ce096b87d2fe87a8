"""MCP Events webhook subscriptions on ``/mcp`` of a real ``herald serve`` (loopback webhooks
allowed), in raw JSON-RPC on both eras: subscribe, verification and signed deliveries to a real
receiver, the SEP's errors, and a subscription that outlives a restart of herald."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from tests.herald_process import HeraldProcess
from tests.http.test_mcp import CLIENTS, new_agent, publish
from tests.http.test_mcp_events import MODERN, agent_http, answer, meta
from tests.webhooks.receiver import Received, Receiver

pytestmark = pytest.mark.anyio

LOOPBACK = ("--webhook-allow", "loopback")
LIMIT = 3
SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()
WAIT_S = 20.0


@pytest.fixture(scope="module")
def herald(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeraldProcess]:
    path: Path = tmp_path_factory.mktemp("hooks") / "herald.db"
    limited = (*LOOPBACK, "--subscription-limit", str(LIMIT))
    process = HeraldProcess(f"sqlite:///{path}", extra_args=limited)
    yield process
    process.stop()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver(answers_challenges=True)
    yield running
    running.close()


async def call(
    http: httpx.AsyncClient, era: str, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """One request on either era: 2026-07-28 with its metadata, or in a legacy session."""
    if era == "modern":
        headers = {"mcp-protocol-version": MODERN, "mcp-method": method}
        params = {"_meta": meta(), **params}
    else:
        if "mcp-session-id" not in http.headers:
            initialize = json.loads((CLIENTS / "claude-code-2.1.328.initialize.json").read_text())
            opened = await http.post("/mcp", json=initialize)
            http.headers["mcp-session-id"] = opened.headers["mcp-session-id"]
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await http.post("/mcp", json=initialized)
        headers = {}
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return answer(await http.post("/mcp", json=body, headers=headers))


def subscription(url: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": "herald.event",
        "arguments": {},
        "delivery": {"mode": "webhook", "url": url, "secret": SECRET},
        **fields,
    }


async def next_event(receiver: Receiver) -> Received:
    """The next request the receiver gets that is not a control envelope (bounded wait)."""
    while True:
        got = await asyncio.to_thread(receiver.arrived.get, timeout=WAIT_S)
        if "type" not in got.json:
            return got


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_subscribe_verifies_and_events_arrive_signed_on_both_eras(
    herald: HeraldProcess, receiver: Receiver, era: str
) -> None:
    agent = new_agent(herald)
    async with agent_http(herald, agent["api_key"]) as http:
        result = (await call(http, era, "events/subscribe", subscription(receiver.url)))["result"]
        assert result["id"].startswith("sub_") and result["truncated"] is False
        if era == "modern":
            assert result["resultType"] == "complete"
        (challenge,) = receiver.requests
        assert Webhook(SECRET).verify(challenge.body, challenge.headers)["type"] == "verification"
        event_id = publish(herald, agent["handle"], "over the webhook")
        delivered = await next_event(receiver)
        body = Webhook(SECRET).verify(delivered.body, delivered.headers)
        assert body["eventId"] == event_id == delivered.headers["webhook-id"]
        assert delivered.headers["x-mcp-subscription-id"] == result["id"]
        history = result["cursor"].removeprefix(f"{agent['id']}~").rpartition("~")[0]
        assert body["cursor"] == f"{agent['id']}~{history}~1" and history
        refreshed = (await call(http, era, "events/subscribe", subscription(receiver.url)))[
            "result"
        ]
        assert refreshed["id"] == result["id"] and refreshed["cursor"] == body["cursor"]
        assert refreshed["deliveryStatus"]["active"] is True
        ended = await call(
            http,
            era,
            "events/unsubscribe",
            {"name": "herald.event", "arguments": {}, "delivery": {"url": receiver.url}},
        )
        assert "error" not in ended
        again = await call(
            http,
            era,
            "events/unsubscribe",
            {"name": "herald.event", "arguments": {}, "delivery": {"url": receiver.url}},
        )
        assert again["error"]["code"] == -32023 and again["error"]["data"] == {
            "kind": "subscription"
        }
    with herald.client(herald.admin_key) as admin:
        assert admin.get(f"/v1/events/{event_id}").json()["status"] == "delivered"


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize(
    ("path", "says"), [("/a hook", "' '"), ('/"hook"', "'\"'"), ("/<hook>", "'<'")]
)
async def test_a_callback_url_that_is_not_valid_by_rfc_3986_is_refused_and_nothing_is_called(
    herald: HeraldProcess, receiver: Receiver, era: str, path: str, says: str
) -> None:
    agent = new_agent(herald)
    url = receiver.url.rstrip("/") + path
    async with agent_http(herald, agent["api_key"]) as http:
        refused = (await call(http, era, "events/subscribe", subscription(url)))["error"]
    assert refused["code"] == -32602, refused
    assert refused["message"].startswith(
        f"params.delivery.url {url!r} is not a valid URL (RFC 3986): its path holds {says}"
    ), refused
    assert receiver.requests == []


async def test_the_seps_errors_come_with_their_codes(
    herald: HeraldProcess, receiver: Receiver
) -> None:
    agent = new_agent(herald)
    async with agent_http(herald, agent["api_key"]) as http:

        async def error(params: dict[str, Any]) -> dict[str, Any]:
            return dict((await call(http, "modern", "events/subscribe", params))["error"])

        push = subscription(receiver.url)
        push["delivery"]["mode"] = "push"
        assert (await error(push))["code"] == -32026
        assert (await error(push))["data"] == {"feature": "deliveryMode", "value": "push"}
        plain = await error(subscription("http://example.com/hook"))
        assert plain["code"] == -32602 and "params.delivery.url" in plain["message"]
        short = subscription(receiver.url)
        short["delivery"]["secret"] = "whsec_c2hvcnQ="
        assert "params.delivery.secret" in (await error(short))["message"]
        unknown = await error(subscription(receiver.url, name="no.such"))
        assert unknown["code"] == -32023 and unknown["data"] == {"kind": "event"}
        receiver.answers_challenges = False
        failed = await error(subscription(receiver.url))
        assert failed["code"] == -32027 and failed["data"] == {"reason": "challenge_failed"}
        receiver.answers_challenges = True
        for n in range(LIMIT):
            held = subscription(receiver.url, arguments={"types": [f"t{n}"]})
            assert "result" in await call(http, "modern", "events/subscribe", held)
        full = await error(subscription(receiver.url, arguments={"types": ["one.more"]}))
        assert full["code"] == -32025
        assert full["data"] == {"limit": "subscriptions", "max": LIMIT}


async def racing_subscribes(
    hosts: Sequence[HeraldProcess], key: str, url: str
) -> list[dict[str, Any]]:
    """One ``events/subscribe`` of the agent per host given, each to its own types, all at once
    (each on its own connection); their answers."""

    async def subscribe(herald: HeraldProcess, n: int) -> dict[str, Any]:
        async with agent_http(herald, key) as http:
            params = subscription(url, arguments={"types": [f"race{n}.*"]})
            return await call(http, "modern", "events/subscribe", params)

    return list(await asyncio.gather(*(subscribe(h, n) for n, h in enumerate(hosts))))


def held_and_refused(answers: list[dict[str, Any]], limit: int) -> tuple[int, int]:
    """How many subscribes succeeded, and how many were refused for the limit (nothing else)."""
    refused = [a for a in answers if "error" in a]
    for refusal in refused:
        assert refusal["error"]["code"] == -32025, refusal
        assert refusal["error"]["data"] == {"limit": "subscriptions", "max": limit}
    return len(answers) - len(refused), len(refused)


async def test_subscribes_racing_never_pass_the_agents_limit(
    herald: HeraldProcess, receiver: Receiver
) -> None:
    agent = new_agent(herald)
    answers = await racing_subscribes([herald] * (LIMIT * 3), agent["api_key"], receiver.url)
    assert held_and_refused(answers, LIMIT) == (LIMIT, LIMIT * 2)


async def test_a_subscription_outlives_a_restart_of_herald(
    tmp_path: Path, receiver: Receiver
) -> None:
    url = f"sqlite:///{tmp_path / 'herald.db'}"
    first = HeraldProcess(url, extra_args=LOOPBACK)
    try:
        agent = new_agent(first)
        async with agent_http(first, agent["api_key"]) as http:
            made = (await call(http, "modern", "events/subscribe", subscription(receiver.url)))[
                "result"
            ]
    finally:
        first.stop()
    second = HeraldProcess(url, extra_args=LOOPBACK)
    try:
        event_id = publish(second, agent["handle"], "after the restart")
        delivered = await next_event(receiver)
        assert Webhook(SECRET).verify(delivered.body, delivered.headers)["eventId"] == event_id
        assert delivered.headers["x-mcp-subscription-id"] == made["id"]
        async with agent_http(second, agent["api_key"]) as http:
            again = (await call(http, "modern", "events/subscribe", subscription(receiver.url)))[
                "result"
            ]
        assert again["id"] == made["id"]
        # Verified once, before the restart: the refresh needs no new challenge.
        assert len([r for r in receiver.requests if "type" in r.json]) == 1
    finally:
        second.stop()
