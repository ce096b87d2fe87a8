"""Malformed input gets a 4xx in herald's error shape, never a 5xx, on SQLite and PostgreSQL
alike: each class of input that once made ``herald serve`` answer 500 or 503."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.backends import BACKENDS, serving
from tests.herald_process import HeraldProcess

MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
MODERN = "2026-07-28"


@pytest.fixture(scope="module", params=BACKENDS)
def herald(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HeraldProcess]:
    with serving(request.param, tmp_path_factory.mktemp(request.param)) as process:
        yield process


@dataclass(frozen=True)
class Agent:
    id: str
    handle: str
    key: str
    event_id: str


@pytest.fixture
def agent(herald: HeraldProcess) -> Agent:
    """An agent with one event."""
    with herald.client(herald.admin_key) as admin:
        created = admin.post("/v1/agents", json={"handle": f"m-{uuid.uuid4().hex[:8]}"}).json()
        event = admin.post(
            "/v1/events", json={"to": created["handle"], "type": "t", "text": "hello"}
        ).json()
    return Agent(created["id"], created["handle"], created["api_key"], event["id"])


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The error of an answer in herald's shape: {"error": {"code", "message"}}, nothing else."""
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"} and body["error"]["message"], body
    return dict(body["error"])


def form(**schema: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"ok": {"type": "boolean"}}, **schema}


# Each body is raw JSON text: a client library would refuse to encode most of these values.
DEEP = b"[" * 2000 + b"]" * 2000
BODIES = {
    "json nested 2000 deep": ("agent", "POST", "/channel/heartbeat", b'{"cursor": ' + DEEP + b"}"),
    "an integer of 5000 digits": (
        "agent",
        "POST",
        "/channel/heartbeat",
        b'{"cursor": ' + b"7" * 5000 + b"}",
    ),
    "an unpaired surrogate in consumer": (
        "agent",
        "POST",
        "/channel/heartbeat",
        b'{"cursor": 0, "consumer": "\\ud800"}',
    ),
    "an unpaired surrogate in ids": ("agent", "POST", "/channel/ack", b'{"ids": ["\\udfff"]}'),
    "an unpaired surrogate in event_id": (
        "agent",
        "POST",
        "/channel/reply",
        b'{"event_id": "evt_\\ud800", "text": "x"}',
    ),
    "an unpaired surrogate in a token": (
        "admin",
        "PUT",
        "/v1/agents/{agent}/openclaw",
        b'{"url": "http://127.0.0.1:9", "token": "\\ud800"}',
    ),
    "an unpaired surrogate in a delivery key": (
        "admin",
        "PATCH",
        "/v1/agents/{agent}",
        b'{"delivery": {"\\ud800": true}}',
    ),
    "an unpaired surrogate in a form": (
        "admin",
        "POST",
        "/v1/events",
        json.dumps({"to": "{handle}", "type": "t", "text": "x", "reply": form(title="@")})
        .encode()
        .replace(b"@", b"\\ud800"),
    ),
    "NUL in consumer": (
        "agent",
        "POST",
        "/channel/heartbeat",
        b'{"cursor": 0, "consumer": "a\\u0000"}',
    ),
    "NUL in a webhook URL": (
        "admin",
        "PUT",
        "/v1/agents/{agent}/webhook",
        b'{"url": "http://127.0.0.1:9/\\u0000"}',
    ),
    "a form whose required holds a list": (
        "admin",
        "POST",
        "/v1/events",
        json.dumps(
            {"to": "{handle}", "type": "t", "text": "x", "reply": form(required=[[]])}
        ).encode(),
    ),
    "a form whose field type is a list": (
        "admin",
        "POST",
        "/v1/events",
        json.dumps(
            {
                "to": "{handle}",
                "type": "t",
                "text": "x",
                "reply": {"type": "object", "properties": {"ok": {"type": ["string"]}}},
            }
        ).encode(),
    ),
}


@pytest.mark.parametrize("case", sorted(BODIES))
def test_a_malformed_body_is_refused_with_422(
    herald: HeraldProcess, agent: Agent, case: str
) -> None:
    who, method, path, body = BODIES[case]
    key = agent.key if who == "agent" else herald.admin_key
    with herald.client(key) as client:
        before = client.get(f"/v1/events/{agent.event_id}").json()
        response = client.request(
            method,
            path.format(agent=agent.id),
            content=body.replace(b"{handle}", agent.handle.encode()),
        )
        assert response.status_code == 422, response.text
        assert error_of(response)["code"] == "invalid_input"
        assert client.get(f"/v1/events/{agent.event_id}").json() == before
    with herald.client(herald.admin_key) as admin:
        assert admin.get(f"/v1/agents/{agent.id}/endpoints").json() == {"endpoints": []}
        assert admin.get(f"/v1/agents/{agent.id}").json()["last_seq"] == 1


def test_a_refusal_names_the_json_path_at_fault(herald: HeraldProcess, agent: Agent) -> None:
    with herald.client(agent.key) as client:
        response = client.post("/channel/ack", content=b'{"ids": ["a", "\\ud800"]}')
    assert "$.ids[1]" in error_of(response)["message"]


@pytest.mark.parametrize(
    ("who", "method", "path"),
    [
        ("admin", "GET", "/v1/agents/%00"),
        ("admin", "GET", "/v1/agents/agt_%00"),
        ("admin", "DELETE", "/v1/agents/%00"),
        ("admin", "GET", "/v1/agents/%00/sessions"),
        ("admin", "GET", "/v1/agents/%00/endpoints"),
        ("admin", "DELETE", "/v1/agents/%00/webhook"),
        ("admin", "DELETE", "/v1/agents/%00/openclaw"),
        ("admin", "POST", "/v1/agents/%00/webhook/rotate"),
        ("admin", "GET", "/v1/events/evt_%00"),
        ("agent", "GET", "/v1/events/%00"),
    ],
)
def test_an_id_that_cannot_exist_is_404_on_every_backend(
    herald: HeraldProcess, agent: Agent, who: str, method: str, path: str
) -> None:
    with herald.client(agent.key if who == "agent" else herald.admin_key) as client:
        response = client.request(method, path)
    assert response.status_code == 404, response.text
    assert error_of(response)["code"] == "not_found"


@pytest.mark.parametrize(
    ("last_event_id", "after"), [(b"\xb2", None), (None, "²"), (b"1\xb9", None), (None, "٣")]
)
def test_a_stream_position_that_is_no_number_is_refused(
    herald: HeraldProcess, agent: Agent, last_event_id: bytes | None, after: str | None
) -> None:
    headers = {"last-event-id": last_event_id} if last_event_id is not None else {}
    params = {"after": after} if after is not None else {}
    with herald.client(agent.key) as client:
        response = client.get("/channel/stream", headers=headers, params=params)
    assert response.status_code == 422, response.text
    assert error_of(response)["code"] == "invalid_input"


def mcp_call(herald: HeraldProcess, key: str, tool: str, arguments: bytes) -> dict[str, Any]:
    """One tools/call in the 2026-07-28 era (no session: the SDK parses it with ``json``, which
    lets through what a session's parser would refuse), as raw JSON text."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    envelope = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": "@", "_meta": meta},
        }
    ).encode()
    headers = {
        **MCP_HEADERS,
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }
    with herald.client(key) as client:
        response = client.post("/mcp", content=envelope.replace(b'"@"', arguments), headers=headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("ack", b'{"ids": ["\\ud800"]}'),
        ("ack", b'{"ids": ["evt_\\u0000"]}'),
        ("reply", b'{"event_id": "evt_\\u0000", "text": "x"}'),
        ("reply", b'{"event_id": "\\udc00", "text": "x"}'),
        ("send_message", b'{"to": "nobody", "text": "x", "data": {"\\ud800": 1}}'),
        ("inbox", b'{"\\u0000": 1}'),
    ],
)
def test_a_malformed_tool_argument_is_a_tool_error_in_heralds_shape(
    herald: HeraldProcess, agent: Agent, tool: str, arguments: bytes
) -> None:
    answer = mcp_call(herald, agent.key, tool, arguments)
    result = answer.get("result")
    assert result is not None and result["isError"] is True, answer
    assert result["structuredContent"]["error"]["code"] == "invalid_input", result
    with herald.client(agent.key) as client:
        assert client.get(f"/v1/events/{agent.event_id}").json()["status"] == "pending"


@pytest.mark.parametrize(
    "body", [b" ", b"\r\n\t ", b"\x0c", b"\xef\xbb\xbf", b"\xef\xbb\xbf \n"], ids=repr
)
def test_a_body_of_only_whitespace_is_refused_not_taken_for_no_body(
    herald: HeraldProcess, agent: Agent, body: bytes
) -> None:
    with herald.client(agent.key) as client:
        drained = client.post("/channel/heartbeat", content=body)
        assert drained.status_code == 422, drained.text
        assert "holds no JSON, only whitespace or a byte-order mark" in error_of(drained)["message"]
        acked = client.post("/channel/ack", content=body)
        assert acked.status_code == 422, acked.text
        assert client.get(f"/v1/events/{agent.event_id}").json()["status"] == "pending"
    with herald.client(herald.admin_key) as admin:
        rotated = admin.post(f"/v1/agents/{agent.id}/rotate-key", content=body)
        assert rotated.status_code == 422, rotated.text
    with herald.client(agent.key) as client:  # the key was not rotated
        assert client.get(f"/v1/events/{agent.event_id}").status_code == 200


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (b'{"to": "{handle}", "to": "{other}", "type": "t", "text": "x"}', '$ has the key "to"'),
        (
            b'{"to": "{handle}", "type": "t", "text": "x", "data": {"a": [{"k": 1, "k": 2}]}}',
            '$.data.a[0] has the key "k"',
        ),
        (
            b'[{"to": "{handle}", "type": "t", "text": "x"},'
            b' {"to": "{handle}", "type": "t", "text": "y", "text": "z"}]',
            '$[1] has the key "text"',
        ),
    ],
)
def test_a_key_given_twice_is_refused_naming_it_and_where_and_nothing_is_published(
    herald: HeraldProcess, agent: Agent, body: bytes, named: str
) -> None:
    with herald.client(herald.admin_key) as admin:
        other = admin.post("/v1/agents", json={"handle": f"o-{uuid.uuid4().hex[:8]}"}).json()
        sent = body.replace(b"{handle}", agent.handle.encode())
        response = admin.post(
            "/v1/events", content=sent.replace(b"{other}", other["handle"].encode())
        )
        assert response.status_code == 422, response.text
        message = error_of(response)["message"]
        assert message.startswith(f"{named} more than once"), message
        assert admin.get(f"/v1/agents/{agent.id}").json()["last_seq"] == 1
        assert admin.get(f"/v1/agents/{other['id']}").json()["last_seq"] == 0


def test_a_cursor_given_twice_on_a_heartbeat_is_refused_and_delivers_nothing(
    herald: HeraldProcess, agent: Agent
) -> None:
    with herald.client(agent.key) as client:
        response = client.post("/channel/heartbeat", content=b'{"cursor": 0, "cursor": 1}')
        assert response.status_code == 422, response.text
        assert '$ has the key "cursor" more than once' in error_of(response)["message"]
        assert client.get(f"/v1/events/{agent.event_id}").json()["status"] == "pending"


def mcp_post(herald: HeraldProcess, key: str, method: str, body: bytes) -> httpx.Response:
    headers = {**MCP_HEADERS, "mcp-protocol-version": MODERN, "mcp-method": method}
    if method == "tools/call":
        headers["mcp-name"] = "send_message"
    with herald.client(key) as client:
        return client.post("/mcp", content=body, headers=headers)


MCP_META = json.dumps(
    {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
).encode()


@pytest.mark.parametrize(
    ("method", "params", "named"),
    [
        (
            "tools/call",
            b'{"name": "send_message", "arguments": {"to": "{handle}", "to": "{other}",'
            b' "text": "x"}, "_meta": @}',
            '$.params.arguments has the key "to"',
        ),
        (
            "events/poll",
            b'{"name": "herald.event", "cursor": null, "cursor": null, "_meta": @}',
            '$.params has the key "cursor"',
        ),
    ],
)
def test_an_mcp_message_with_a_key_given_twice_is_a_json_rpc_error_naming_it(
    herald: HeraldProcess, agent: Agent, method: str, params: bytes, named: str
) -> None:
    with herald.client(herald.admin_key) as admin:
        other = admin.post("/v1/agents", json={"handle": f"o-{uuid.uuid4().hex[:8]}"}).json()
    filled = (
        params.replace(b"{handle}", agent.handle.encode())
        .replace(b"{other}", other["handle"].encode())
        .replace(b"@", MCP_META)
    )
    body = b'{"jsonrpc": "2.0", "id": 7, "method": "' + method.encode() + b'", "params": '
    response = mcp_post(herald, agent.key, method, body + filled + b"}")
    assert response.status_code == 400, response.text
    answer = response.json()
    assert answer["id"] == 7 and answer["error"]["code"] == -32600, answer
    assert answer["error"]["message"].startswith(f"{named} more than once"), answer
    with herald.client(herald.admin_key) as admin:
        assert admin.get(f"/v1/agents/{other['id']}").json()["last_seq"] == 0
    with herald.client(agent.key) as client:
        assert client.get(f"/v1/events/{agent.event_id}").json()["status"] == "pending"
