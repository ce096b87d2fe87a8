"""Every MCP tool of a real ``herald serve`` (``/mcp``, in a session of the 2025-11-25 era and
session-less in the 2026-07-28 one), and ``events/poll``, on SQLite and PostgreSQL, fed hostile
arguments: no answer is a 5xx or an internal error, every refusal is a tool error in herald's
shape or the SDK's own JSON-RPC error, and a refused call changes nothing. Cursors are drawn
among positions of this store's history and of others (as from before a restore): one of
another history acknowledges nothing, and its answer says ``truncated``."""

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
    ack_cursors,
    datas,
    either,
    encode,
    event_ids,
    handles,
    objects,
    positions,
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
    "ack": objects(
        {
            "ids": either(st.lists(either(event_ids), max_size=3)),
            "cursor": st.one_of(positions, ack_cursors),
        }
    ),
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
    sent = sent_arguments(world, arguments)
    if tool == "ack" and of_another_history(world, sent.get("cursor")) and not sent.get("ids"):
        event("ack from another history")
        assert result["structuredContent"] == {"acked": 0, "truncated": True}, where
        assert_unchanged(world, where)
    world.top_up()


ORDERLY_POLL = st.fixed_dictionaries(
    {"name": st.just("herald.event"), "cursor": positions},
    optional={"maxEvents": st.integers(1, 100)},
)
POLL = st.one_of(
    # Mostly well-formed but for the cursor, which is where the history is checked...
    ORDERLY_POLL,
    ORDERLY_POLL,
    # ...and anything else.
    objects(
        {
            "name": either(st.just("herald.event")),
            "arguments": either(st.just({})),
            "cursor": st.one_of(st.none(), ack_cursors),
            "maxEvents": either(st.integers(1, 100)),
        },
        required=("name",),
    ),
)


@FUZZ
@given(data=st.data())
def test_no_poll_fails_and_a_cursor_of_another_history_acknowledges_nothing(
    world: World, data: st.DataObject
) -> None:
    params = data.draw(POLL, label="params")
    drawn = encode({**params, "_meta": MODERN_META})
    response = call_method(world, "events/poll", drawn)
    where = f"events/poll answered {response.status_code}"
    event(f"answered {response.status_code}")
    assert response.status_code < 500, f"{where}: {response.text[:500]}"
    message = jsonrpc_answer(response) if response.status_code < 400 else {"error": None}
    if "error" in message:
        error = message["error"]
        assert error is None or error["code"] not in (0, -32603), f"{where}: {message}"
        assert_unchanged(world, where)
        return
    if of_another_history(world, sent_arguments(world, drawn).get("cursor")):
        event("poll from another history")
        assert message["result"]["truncated"] is True, f"{where}: {message}"
        assert_nothing_delivered(world, where)
    world.top_up()


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def call_method(world: World, method: str, params: bytes) -> httpx.Response:
    """A request of ``method`` as alice, in the 2026-07-28 era."""
    headers = {
        **MCP_HEADERS,
        "authorization": f"Bearer {world.alice.key}",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
    }
    envelope = json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": "@"})
    body = envelope.encode().replace(b'"@"', world.resolve(params))
    return world.http.post("/mcp", content=body, headers=headers)


def sent_arguments(world: World, drawn: bytes) -> dict[str, Any]:
    """The arguments as sent (placeholders filled in), when they are a JSON object."""
    sent = json.loads(world.resolve(drawn))
    return sent if isinstance(sent, dict) else {}


def of_another_history(world: World, cursor: Any) -> bool:
    """Whether ``cursor`` is a position of alice's given in another history of the store (or
    in none, as herald gave before positions named one)."""
    if not isinstance(cursor, str) or not cursor.startswith(f"{world.alice.id}~"):
        return False
    *history, seq = cursor.split("~")[1:]
    return seq.isdigit() and history != [world.history]


def assert_nothing_delivered(world: World, where: str) -> None:
    """No event of the world's became delivered since its state was taken."""
    before, after = world.state["events"], world.snapshot()["events"]
    for event_id, (status, _, _) in after.items():
        if status == "delivered":
            assert before[event_id][0] == "delivered", f"{where}, and delivered {event_id}"


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
