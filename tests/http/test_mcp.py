"""herald's /mcp endpoint over streamable HTTP, against a real ``herald serve``."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from herald import open_store
from herald.http.mcp import answered_whole
from herald.models import NewEvent
from mcp import Client
from tests.herald_process import HeraldProcess
from tests.mcp.conftest import HeraldNotifications, Received

pytestmark = pytest.mark.anyio

CLIENTS = Path(__file__).resolve().parents[1] / "data" / "clients"
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def new_agent(herald: HeraldProcess, prefix: str = "agent") -> dict[str, Any]:
    with herald.client(herald.admin_key) as admin:
        response = admin.post("/v1/agents", json={"handle": f"{prefix}-{uuid.uuid4().hex[:8]}"})
        assert response.status_code == 201
        return dict(response.json())


def publish(herald: HeraldProcess, to: str, text: str) -> str:
    with herald.client(herald.admin_key) as admin:
        response = admin.post("/v1/events", json={"to": to, "type": "t", "text": text})
        assert response.status_code == 202
        return str(response.json()["id"])


@contextlib.asynccontextmanager
async def session(
    herald: HeraldProcess, key: str, name: str = "claude-code"
) -> AsyncIterator[tuple[Client, Received]]:
    received = Received()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.put("notifications/message", params)

    headers = {"authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        Client(
            streamable_http_client(f"{herald.url}/mcp", http_client=http),
            mode="auto",
            client_info=types.Implementation(name=name, version="1.0"),
            extensions=[HeraldNotifications(received)],
            logging_callback=on_log,
        ) as client,
    ):
        yield client, received


async def test_a_probing_client_falls_back_to_the_era_that_can_push(herald: HeraldProcess) -> None:
    agent = new_agent(herald)
    async with session(herald, agent["api_key"]) as (client, received):
        assert client.protocol_version == "2025-11-25"
        publish(herald, agent["handle"], "pushed over HTTP")
        method, params = await received.next()
        assert method == "notifications/claude/channel"
        assert "pushed over HTTP" in params["content"]


async def test_the_recorded_claude_code_probe_is_refused_and_its_initialize_accepted(
    herald: HeraldProcess,
) -> None:
    agent = new_agent(herald)
    headers = {**MCP_HEADERS, "authorization": f"Bearer {agent['api_key']}"}
    probe = json.loads((CLIENTS / "claude-code-2.1.328.server-discover.json").read_text())
    initialize = json.loads((CLIENTS / "claude-code-2.1.328.initialize.json").read_text())
    async with httpx.AsyncClient(base_url=herald.url, headers=headers, timeout=30) as http:
        refused = await http.post(
            "/mcp",
            json=probe,
            headers={"mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover"},
        )
        assert refused.json()["error"]["code"] == -32601
        accepted = await http.post("/mcp", json=initialize)
        assert accepted.status_code == 200
        body = accepted.text
        result = json.loads(body[body.index("{") :].splitlines()[0])["result"]
        assert result["protocolVersion"] == "2025-11-25"
        assert result["capabilities"]["experimental"] == {"claude/channel": {}}


@pytest.mark.parametrize("key", [None, "herald_agent_unknown", "admin"])
async def test_a_session_without_an_agent_key_is_refused(
    herald: HeraldProcess, key: str | None
) -> None:
    headers = dict(MCP_HEADERS)
    if key is not None:
        headers["authorization"] = f"Bearer {herald.admin_key if key == 'admin' else key}"
    initialize = json.loads((CLIENTS / "claude-code-2.1.328.initialize.json").read_text())
    async with httpx.AsyncClient(base_url=herald.url, headers=headers, timeout=30) as http:
        response = await http.post("/mcp", json=initialize)
    assert response.status_code == (403 if key == "admin" else 401)
    assert "error" in response.json()


async def test_a_session_never_sees_another_agents_events(herald: HeraldProcess) -> None:
    alice, bob = new_agent(herald, "alice"), new_agent(herald, "bob")
    async with (
        session(herald, alice["api_key"]) as (_, alice_received),
        session(herald, bob["api_key"]) as (bob_client, bob_received),
    ):
        publish(herald, bob["handle"], "for bob only")
        publish(herald, alice["handle"], "for alice only")
        assert "for alice only" in (await alice_received.next())[1]["content"]
        assert "for bob only" in (await bob_received.next())[1]["content"]
        inbox = await bob_client.call_tool("inbox", {})
        texts = [e["text"] for e in inbox.structured_content["events"]]  # type: ignore[index]
        assert texts == ["for bob only"]
        assert alice_received.queue.empty()


async def test_a_client_that_disconnects_mid_delivery_loses_nothing(herald: HeraldProcess) -> None:
    agent = new_agent(herald)
    async with session(herald, agent["api_key"]) as (_, received):
        first = publish(herald, agent["handle"], "first")
        assert (await received.next())[1]["meta"]["event_id"] == first
        second = publish(herald, agent["handle"], "second")
    third = publish(herald, agent["handle"], "third, while away")
    async with session(herald, agent["api_key"]) as (client, received):
        offered = [(await received.next())[1]["meta"]["event_id"] for _ in range(3)]
        assert offered == [first, second, third]
        acked = await client.call_tool("ack", {"ids": offered})
        assert acked.structured_content == {"acked": 3}


async def test_inbox_marks_delivered_only_what_its_answer_shows(herald: HeraldProcess) -> None:
    agent = new_agent(herald)
    before = publish(herald, agent["handle"], "before")
    deep: Any = {}
    for _ in range(300):
        deep = {"a": deep}
    # Stored by an older herald, which did not refuse such nesting: no MCP client can take it.
    async with await open_store(herald.store_url) as store:
        (poison,) = await store.append(
            [NewEvent(agent["handle"], "t", "deep", data_json=json.dumps(deep))]
        )
    after = publish(herald, agent["handle"], "after")
    async with session(herald, agent["api_key"], name="script") as (client, _):
        inbox = await client.call_tool("inbox", {})
    assert not inbox.is_error
    shown = inbox.structured_content["events"]  # type: ignore[index]
    assert [event["id"] for event in shown] == [before, after]
    said = "".join(c.text for c in inbox.content if isinstance(c, types.TextContent))
    assert poison.event.id in said and "stays pending" in said
    with herald.client(herald.admin_key) as admin:
        statuses = [
            admin.get(f"/v1/events/{event_id}").json()["status"]
            for event_id in (before, poison.event.id, after)
        ]
    assert statuses[0] == statuses[2] == "delivered"
    assert statuses[1] in {"pending", "sent"}  # still owed to the agent


@pytest.mark.parametrize(
    "change",
    [
        {"type": "reply.received"},
        {"type": "not a type"},
        {"type": 7},
        {"data": [1]},
        {"reply": {"type": "array"}},
        {"colour": "red"},
        {"to": "Not A Handle"},
        {"text": ""},
    ],
)
async def test_send_message_over_mcp_is_refused_as_post_channel_send_is(
    herald: HeraldProcess, change: dict[str, Any]
) -> None:
    sender, addressee = new_agent(herald), new_agent(herald)
    arguments = {"to": addressee["handle"], "text": "hello", **change}
    async with session(herald, sender["api_key"]) as (client, _):
        over_mcp = await client.call_tool("send_message", arguments)
    with herald.client(sender["api_key"]) as agent:
        over_http = agent.post("/channel/send", json=arguments)
    assert over_mcp.is_error and over_http.status_code == 422, over_http.text
    said = "".join(c.text for c in over_mcp.content if isinstance(c, types.TextContent))
    assert said == over_http.json()["error"]["message"]


def leaves(group: BaseException) -> list[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        return [leaf for inner in group.exceptions for leaf in leaves(inner)]
    return [group]


@pytest.mark.parametrize("key", ["herald_agent_" + "x" * 40, "admin"])
async def test_the_sdk_client_shows_why_its_key_is_refused(herald: HeraldProcess, key: str) -> None:
    key = (herald.admin_key or "") if key == "admin" else key
    with pytest.raises(BaseException) as refused:
        async with session(herald, key):
            pass
    (error,) = [leaf for leaf in leaves(refused.value) if isinstance(leaf, MCPError)]
    if key == herald.admin_key:
        assert "needs an agent's key, not the admin key" in error.error.message
    else:
        assert error.error.message.startswith("the key is not known to this herald")
        assert error.error.data == {"code": "unauthorized"}


async def test_a_refused_key_is_a_json_rpc_error_with_its_id_and_its_reason_in_the_header(
    herald: HeraldProcess,
) -> None:
    initialize = json.loads((CLIENTS / "claude-code-2.1.328.initialize.json").read_text())
    headers = {**MCP_HEADERS, "authorization": "Bearer herald_agent_" + "x" * 40}
    async with httpx.AsyncClient(base_url=herald.url, headers=headers, timeout=30) as http:
        refused = await http.post("/mcp", json={**initialize, "id": "init-7"})
        without_key = await http.post("/mcp", json=initialize, headers={"authorization": ""})
    assert refused.status_code == 401
    body = refused.json()
    assert (body["jsonrpc"], body["id"], body["error"]["code"]) == ("2.0", "init-7", -32600)
    assert body["error"]["message"].startswith("the key is not known to this herald")
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token", error_description="the key is not')
    assert without_key.status_code == 401 and without_key.headers["www-authenticate"] == "Bearer"
    assert without_key.json()["id"] == initialize["id"]


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "accept-test", "version": "1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def scope_with(headers: list[tuple[str, str]]) -> dict[str, Any]:
    raw = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]
    return {"type": "http", "method": "POST", "path": "/mcp", "headers": raw}


BOTH = ("accept", "application/json, text/event-stream")
MODERN = ("mcp-protocol-version", "2026-07-28")
POLL = ("mcp-method", "events/poll")


@pytest.mark.parametrize(
    ("headers", "whole"),
    [
        ([BOTH, MODERN, POLL], True),
        ([("accept", "*/*"), MODERN, POLL], True),
        ([("accept", "application/*;q=0.9, TEXT/*"), MODERN, POLL], True),
        ([("accept", "text/event-stream"), MODERN, POLL], False),
        ([BOTH, MODERN, ("mcp-method", "events/stream")], False),
        ([BOTH, MODERN, ("mcp-method", "tools/call")], False),
        ([BOTH, ("mcp-protocol-version", "2025-11-25"), POLL], False),
        ([BOTH, POLL], False),
        ([BOTH, MODERN], False),
        ([("accept", "application/json"), MODERN, POLL], False),
    ],
)
def test_only_a_2026_07_28_poll_the_sdk_would_take_is_answered_whole(
    headers: list[tuple[str, str]], whole: bool
) -> None:
    assert answered_whole(scope_with(headers)) is whole


async def test_a_2026_07_28_poll_that_cannot_take_a_stream_is_refused_as_any_request_is(
    herald: HeraldProcess,
) -> None:
    agent = new_agent(herald)
    headers = {
        "authorization": f"Bearer {agent['api_key']}",
        "accept": "application/json",
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
    }
    async with httpx.AsyncClient(base_url=herald.url, headers=headers, timeout=30) as http:
        answers = [
            await http.post(
                "/mcp",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": method,
                    "params": {"_meta": MODERN_META, "name": "herald.event", "cursor": None},
                },
                headers={"mcp-method": method},
            )
            for method in ("events/poll", "events/list")
        ]
    assert [answer.status_code for answer in answers] == [406, 406]
