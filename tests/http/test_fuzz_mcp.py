"""Every MCP tool of a real ``herald serve`` (``/mcp``, in a session of the 2025-11-25 era and
session-less in the 2026-07-28 one), on SQLite and PostgreSQL, fed hostile arguments: no answer
is a 5xx or an internal error, every refusal is a tool error in herald's shape or the SDK's own
JSON-RPC error, and a refused call changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from herald.errors import HeraldError
from herald.sse import SSEDecoder
from tests.backends import BACKENDS
from tests.http.fuzzing import (
    FUZZ,
    LEGACY,
    MCP_HEADERS,
    MODERN,
    World,
    assert_unchanged,
    strict_json,
    world_on,
)
from tests.http.hostile import (
    SearchStrategy,
    cursors,
    datas,
    either,
    encode,
    event_ids,
    handles,
    objects,
    strings,
    texts,
    values,
)


def client_error_codes(root: type[HeraldError] = HeraldError) -> set[str]:
    """Every code of herald's error tree that says the caller must change something (4xx)."""
    codes = {root.code} if 400 <= root.http_status < 500 else set()
    for child in root.__subclasses__():
        codes |= client_error_codes(child)
    return codes


CLIENT_ERRORS = client_error_codes() - {"unauthorized"}  # a session's key was checked already


@pytest.fixture(scope="module", params=BACKENDS)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    with world_on(request.param, tmp_path_factory.mktemp(request.param)) as opened:
        yield opened


TOOLS: dict[str, SearchStrategy[dict[str, Any]]] = {
    "inbox": objects({"limit": either(st.integers(1, 100))}),
    "ack": objects({"ids": either(st.lists(either(event_ids), max_size=3)), "cursor": cursors}),
    "reply": objects(
        {"event_id": either(event_ids), "text": texts, "data": datas},
        required=("event_id", "text"),
    ),
    "send_message": objects(
        {"to": either(handles), "text": texts, "data": datas}, required=("to", "text")
    ),
}


@pytest.mark.parametrize("era", [MODERN, LEGACY])
@pytest.mark.parametrize("tool", sorted(TOOLS))
@FUZZ
@given(data=st.data())
def test_no_mcp_tool_fails_or_changes_anything_when_it_refuses(
    world: World, tool: str, era: str, data: st.DataObject
) -> None:
    arguments = data.draw(
        st.one_of(*[TOOLS[tool].map(encode)] * 4, values.map(encode), strings.map(encode)),
        label="arguments",
    )
    response = call_tool(world, era, tool, arguments)
    where = f"{tool} in {era} answered {response.status_code}"
    event(f"answered {response.status_code}")
    assert response.status_code < 500, f"{where}: {response.text[:500]}"
    if response.status_code >= 400:
        assert_unchanged(world, where)
        return
    message = jsonrpc_answer(response)
    if "error" in message:
        # The SDK refused the request itself (say, arguments that are no object).
        assert message["error"]["code"] not in (0, -32603), f"{where}: {message}"
        assert_unchanged(world, where)
        return
    result = message["result"]
    if result.get("isError"):
        code = result["structuredContent"]["error"]["code"]
        event(f"tool error {code}")
        assert code in CLIENT_ERRORS, f"{where}: {result}"
        assert_unchanged(world, where)
        return
    world.top_up()


def call_tool(world: World, era: str, tool: str, arguments: bytes) -> httpx.Response:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {world.alice.key}"}
    params: dict[str, Any] = {"name": tool, "arguments": "@"}
    session = world.mcp_session(era)
    if session is None:
        headers.update({"mcp-protocol-version": era, "mcp-method": "tools/call", "mcp-name": tool})
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": era,
            "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    else:
        headers.update({"mcp-protocol-version": era, "mcp-session-id": session})
    envelope = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
    body = envelope.encode().replace(b'"@"', world.resolve(arguments))
    return world.http.post("/mcp", content=body, headers=headers)


def jsonrpc_answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer, whether sent as JSON or as an SSE event."""
    if response.headers["content-type"].startswith("text/event-stream"):
        for sse_event in SSEDecoder().feed(response.content):
            if sse_event.data.strip():
                message = strict_json(sse_event.data.strip().encode())
                if message.get("id") == 7:
                    return dict(message)
        raise AssertionError(f"no answer in {response.text[:500]}")
    return dict(strict_json(response.content))
