"""The 2026-07-28 era without Events on ``/mcp`` of a real ``herald serve``: the
``herald://inbox`` resource on both eras, its updates on a ``subscriptions/listen`` stream (and
never another agent's), ``notifications/events/list_changed``, and forms through input-required
results, in raw JSON-RPC where the wire is the point."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from herald.mcp.events import SUBSCRIPTION_ID
from herald.mcp.resources import HISTORY_URI, INBOX_URI
from tests.herald_process import HeraldProcess
from tests.http.test_mcp import CLIENTS, new_agent, publish, session
from tests.http.test_mcp_events import MODERN, agent_http, answer, stream_messages

pytestmark = pytest.mark.anyio

FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def envelope(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "listen-test", "version": "1.0"},
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
    }


def headers_for(method: str, name: str | None = None) -> dict[str, str]:
    headers = {"mcp-protocol-version": MODERN, "mcp-method": method}
    return {**headers, "mcp-name": name} if name else headers


async def call_tool(
    http: httpx.AsyncClient, name: str, arguments: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    capabilities = extra.pop("capabilities", None)
    params = {"_meta": envelope(capabilities), "name": name, "arguments": arguments, **extra}
    body = {"jsonrpc": "2.0", "id": "call", "method": "tools/call", "params": params}
    response = await http.post("/mcp", json=body, headers=headers_for("tools/call", name))
    return answer(response)


def event_view(herald: HeraldProcess, event_id: str) -> dict[str, Any]:
    with herald.client(herald.admin_key) as admin:
        return dict(admin.get(f"/v1/events/{event_id}").json())


@pytest.mark.parametrize("client_name", ["claude-code", "listen-test"])
async def test_the_inbox_resource_is_listed_and_read_on_both_eras_and_delivers_nothing(
    herald: HeraldProcess, client_name: str
) -> None:
    agent = new_agent(herald)
    event_id = publish(herald, agent["handle"], "waiting")
    async with session(herald, agent["api_key"], client_name) as (client, _):
        assert (client.protocol_version == MODERN) == (client_name != "claude-code")
        listed = (await client.list_resources()).resources
        assert [str(r.uri) for r in listed] == [INBOX_URI, HISTORY_URI]
        (contents,) = (await client.read_resource(INBOX_URI)).contents
    shown = json.loads(contents.text)  # type: ignore[union-attr]
    assert [e["id"] for e in shown["events"]] == [event_id]
    assert event_view(herald, event_id)["status"] != "delivered"


async def test_claude_codes_recorded_handshake_still_lands_on_the_legacy_era(
    herald: HeraldProcess,
) -> None:
    agent = new_agent(herald)
    initialize = json.loads((CLIENTS / "claude-code-2.1.328.initialize.json").read_text())
    async with agent_http(herald, agent["api_key"]) as http:
        result = answer(await http.post("/mcp", json=initialize))["result"]
    assert result["protocolVersion"] == "2025-11-25"
    assert "resources" in result["capabilities"]


async def test_a_listen_stream_tells_of_the_agents_inbox_and_the_catalogue_only(
    herald: HeraldProcess,
) -> None:
    alice, bob = new_agent(herald, "alice"), new_agent(herald, "bob")
    filter = {
        "resourceSubscriptions": [INBOX_URI, "herald://outbox"],
        "toolsListChanged": True,
        "eventsListChanged": True,
    }
    body = {
        "jsonrpc": "2.0",
        "id": "listen-1",
        "method": "subscriptions/listen",
        "params": {"_meta": envelope(), "notifications": filter},
    }
    async with (
        agent_http(herald, alice["api_key"]) as http,
        stream_messages(http, body, headers_for("subscriptions/listen")) as messages,
    ):
        acknowledged = await anext(messages)
        assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
        assert acknowledged["params"]["notifications"] == {
            "resourceSubscriptions": [INBOX_URI],
            "eventsListChanged": True,
        }
        assert acknowledged["params"]["_meta"][SUBSCRIPTION_ID] == "listen-1"
        publish(herald, bob["handle"], "for bob")
        with herald.client(herald.admin_key) as admin:
            name = f"listen.{alice['handle']}"
            assert admin.put(f"/v1/event-types/{name}", json={"description": "x"}).is_success
        # Had bob's event been told to alice, its update would have come first.
        changed = await anext(messages)
        assert changed["method"] == "notifications/events/list_changed"
        assert changed["params"]["_meta"][SUBSCRIPTION_ID] == "listen-1"
        event_id = publish(herald, alice["handle"], "for alice")
        updated = await anext(messages)
        assert updated["method"] == "notifications/resources/updated"
        assert updated["params"] == {"uri": INBOX_URI, "_meta": {SUBSCRIPTION_ID: "listen-1"}}
        acked = await call_tool(http, "ack", {"ids": [event_id]})
        assert acked["result"]["structuredContent"] == {"acked": 1}
        assert (await anext(messages))["method"] == "notifications/resources/updated"


async def test_a_form_answered_through_input_required_is_the_events_reply(
    herald: HeraldProcess,
) -> None:
    alice = new_agent(herald, "alice")
    with herald.client(herald.admin_key) as admin:
        question = {"to": alice["handle"], "type": "q", "text": "Ship it?", "reply": FORM}
        event_id = admin.post("/v1/events", json=question).json()["id"]
    forms = {"elicitation": {}}
    async with agent_http(herald, alice["api_key"]) as http:
        asked = (await call_tool(http, "inbox", {}, capabilities=forms))["result"]
        assert asked["resultType"] == "input_required"
        request = asked["inputRequests"][event_id]
        assert request["method"] == "elicitation/create"
        assert request["params"]["mode"] == "form"
        assert request["params"]["requestedSchema"] == FORM
        forged = await call_tool(
            http,
            "inbox",
            {},
            capabilities=forms,
            inputResponses={event_id: {"action": "accept", "content": {"ok": True}}},
            requestState=asked["requestState"][:-4] + "AAAA",
        )
        assert forged["error"]["code"] == -32602
        assert "requestState" in forged["error"]["message"]
        assert event_view(herald, event_id)["replies"] == []
        done = await call_tool(
            http,
            "inbox",
            {},
            capabilities=forms,
            inputResponses={event_id: {"action": "accept", "content": {"ok": True}}},
            requestState=asked["requestState"],
        )
    assert done["result"]["resultType"] == "complete"
    shown = event_view(herald, event_id)
    assert shown["status"] == "delivered"
    assert [r["data"] for r in shown["replies"]] == [{"ok": True}]
