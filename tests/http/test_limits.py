"""Per-key limits of ``herald serve``: one key over its open streams, live MCP sessions or publish
rate gets 429 with ``Retry-After`` in herald's error shape (over its polls, the Events extension's
ResourceExhausted with ``retryAfterMs``), nothing is done, and no other key notices."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from herald.sse import SSEDecoder
from tests.herald_process import HeraldProcess
from tests.waiting import WAIT_S, wait_until

MODERN = "2026-07-28"
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "limits-test", "version": "1.0"},
    },
}


@pytest.fixture
def herald(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HeraldProcess]:
    """``herald serve`` with the flags the test gives (indirect parametrization)."""
    process = HeraldProcess(f"sqlite:///{tmp_path / 'h.db'}", extra_args=request.param)
    yield process
    process.stop()


def agent_keys(herald: HeraldProcess, *handles: str) -> list[str]:
    with herald.client(herald.admin_key) as admin:
        return [admin.post("/v1/agents", json={"handle": h}).json()["api_key"] for h in handles]


def assert_limited(response: httpx.Response, flag: str) -> None:
    assert response.status_code == 429, response.text
    assert response.json()["error"]["code"] == "rate_limited"
    assert flag in response.json()["error"]["message"]
    assert int(response.headers["retry-after"]) >= 1


def open_stream(herald: HeraldProcess, key: str) -> socket.socket:
    """A stream held open on a raw socket, once herald has answered 200."""
    url = urlsplit(herald.url)
    sock = socket.create_connection((url.hostname, url.port), timeout=WAIT_S)
    sock.sendall(
        f"GET /channel/stream HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer {key}\r\n\r\n".encode()
    )
    answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    return sock


def try_stream(herald: HeraldProcess, key: str) -> httpx.Response:
    """The answer to opening a stream: a refusal read whole, or the bare 200 of an opened one
    (closed at once)."""
    with herald.client(key) as client, client.stream("GET", "/channel/stream") as response:
        if response.status_code == 200:
            return httpx.Response(200, text="(a stream opened)")
        response.read()
        return response


@pytest.mark.parametrize("herald", [("--streams-per-key", "2")], indirect=True)
def test_a_key_over_its_open_streams_gets_429_until_one_closes(herald: HeraldProcess) -> None:
    alice, bob = agent_keys(herald, "alice", "bob")
    streams = [open_stream(herald, alice), open_stream(herald, alice)]
    try:
        assert_limited(try_stream(herald, alice), "--streams-per-key")
        streams.append(open_stream(herald, bob))  # another key is unaffected
        streams.pop(0).close()
        # Until herald sees it closed.
        wait_until(lambda: try_stream(herald, alice).status_code != 429, "the closed stream freed")
    finally:
        for sock in streams:
            sock.close()


def initialize(http: httpx.Client, key: str) -> httpx.Response:
    return http.post(
        "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "authorization": f"Bearer {key}"}
    )


@pytest.mark.parametrize(
    "herald", [("--requests-per-key", "2", "--streams-per-key", "0")], indirect=True
)
def test_a_key_over_its_requests_in_flight_gets_429_whatever_they_are(
    herald: HeraldProcess,
) -> None:
    alice, bob = agent_keys(herald, "alice", "bob")
    streams = [open_stream(herald, alice), open_stream(herald, alice)]
    try:
        assert_limited(try_stream(herald, alice), "--requests-per-key")
        with herald.client(alice) as client:  # not only streams: any request of the key
            assert_limited(client.post("/channel/heartbeat", json={}), "--requests-per-key")
        streams.append(open_stream(herald, bob))  # another key is unaffected
    finally:
        for sock in streams:
            sock.close()


@pytest.mark.parametrize("herald", [("--sessions-per-key", "2")], indirect=True)
def test_a_key_over_its_live_mcp_sessions_gets_429_until_one_ends(herald: HeraldProcess) -> None:
    alice, bob = agent_keys(herald, "alice", "bob")
    with httpx.Client(base_url=herald.url, timeout=WAIT_S) as http:
        opened = [initialize(http, alice), initialize(http, alice)]
        assert all(r.status_code == 200 and r.headers["mcp-session-id"] for r in opened)
        refused = initialize(http, alice)  # a JSON-RPC error, for the MCP client to show
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
        error = refused.json()["error"]
        assert (error["code"], error["data"]) == (-32025, {"code": "rate_limited"})
        assert "--sessions-per-key" in error["message"]
        assert initialize(http, bob).status_code == 200  # another key is unaffected
        session_id = opened[0].headers["mcp-session-id"]
        ended = http.delete(
            "/mcp", headers={"authorization": f"Bearer {alice}", "mcp-session-id": session_id}
        )
        assert ended.status_code == 200
        assert initialize(http, alice).status_code == 200


def call_tool(http: httpx.Client, key: str, name: str, arguments: dict[str, Any]) -> Any:
    """One herald tool called in a new MCP session of ``key``; its JSON-RPC result."""
    opened = initialize(http, key)
    headers = {
        **MCP_HEADERS,
        "authorization": f"Bearer {key}",
        "mcp-session-id": opened.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert http.post("/mcp", json=initialized, headers=headers).status_code == 202
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    answer = http.post("/mcp", json=call, headers=headers)
    assert answer.status_code == 200, answer.text
    data = [event.data for event in SSEDecoder().feed(answer.content)]
    return json.loads(data[-1] if data else answer.text)["result"]


def publish(admin: httpx.Client, events: Any) -> httpx.Response:
    return admin.post("/v1/events", json=events)


# One token back every 100 s: the test never sees one come back.
@pytest.mark.parametrize(
    "herald", [("--publish-rate", "0.01", "--publish-burst", "5")], indirect=True
)
def test_a_key_over_its_publish_rate_gets_429_and_nothing_is_published(
    herald: HeraldProcess,
) -> None:
    alice, bob = agent_keys(herald, "alice", "bob")
    batch = [{"to": "alice", "type": "t", "text": f"e{n}"} for n in range(5)]
    with herald.client(herald.admin_key) as admin:
        too_big = publish(admin, [*batch, {"to": "alice", "type": "t", "text": "e5"}])
        assert too_big.status_code == 413 and "--publish-burst" in too_big.text
        assert publish(admin, batch).status_code == 202  # a batch counts each of its events
        assert_limited(
            publish(admin, {"to": "alice", "type": "t", "text": "over"}), "--publish-rate"
        )
    with herald.client(alice) as as_alice:
        drained = as_alice.post("/channel/heartbeat", json={"cursor": 0, "limit": 100}).json()
        assert [e["text"] for e in drained["events"]] == [f"e{n}" for n in range(5)]
        for n in range(5):  # the agent's own key has a bucket of its own
            sent = as_alice.post("/channel/send", json={"to": "bob", "text": f"m{n}"})
            assert sent.status_code == 202, sent.text
        assert_limited(as_alice.post("/channel/send", json={"to": "bob", "text": "over"}), "rate")
    with httpx.Client(base_url=herald.url, timeout=WAIT_S) as http:  # the same key over MCP
        result = call_tool(http, alice, "send_message", {"to": "bob", "text": "over"})
        assert result["isError"] and "--publish-rate" in result["content"][0]["text"]
    with herald.client(bob) as as_bob:
        assert as_bob.post("/channel/send", json={"to": "alice", "text": "hi"}).status_code == 202
        texts = [e["text"] for e in as_bob.post("/channel/heartbeat", json={}).json()["events"]]
        assert texts == [f"m{n}" for n in range(5)]  # the refused message was not sent


def poll(http: httpx.Client, key: str, cursor: str | None) -> dict[str, Any]:
    """An ``events/poll`` on the 2026-07-28 era: its JSON-RPC answer."""
    params = {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "limits-test", "version": "1.0"},
            "io.modelcontextprotocol/clientCapabilities": {},
        },
        "name": "herald.event",
        "cursor": cursor,
    }
    response = http.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "events/poll", "params": params},
        headers={
            **MCP_HEADERS,
            "authorization": f"Bearer {key}",
            "mcp-protocol-version": MODERN,
            "mcp-method": "events/poll",
        },
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


# A start looks at 10 events at most and costs that; the 3 events cost 3; nothing comes back
# for 1,000 s.
@pytest.mark.parametrize(
    "herald",
    [("--scan-events", "10", "--poll-rate", "0.001", "--poll-burst", "13")],
    indirect=True,
)
def test_a_key_whose_polls_looked_at_too_much_is_refused_with_a_retry_time(
    herald: HeraldProcess,
) -> None:
    alice, bob = agent_keys(herald, "alice", "bob")
    with herald.client(herald.admin_key) as admin:
        batch = [{"to": "alice", "type": "t", "text": f"e{n}"} for n in range(3)]
        published = [e["id"] for e in publish(admin, batch).json()["events"]]
    with httpx.Client(base_url=herald.url, timeout=WAIT_S) as http:
        start = poll(http, alice, None)["result"]
        page = poll(http, alice, start["cursor"])["result"]
        assert [e["eventId"] for e in page["events"]] == published
        refused = poll(http, alice, page["cursor"])
        assert "result" not in refused
        assert refused["error"]["code"] == -32025 and "--poll-rate" in refused["error"]["message"]
        assert refused["error"]["data"]["limit"] == "polls"
        assert refused["error"]["data"]["retryAfterMs"] >= 1000
        assert "result" in poll(http, bob, None)  # another key polls on
    with herald.client(herald.admin_key) as admin:  # the refused cursor acknowledged nothing
        statuses = {admin.get(f"/v1/events/{event_id}").json()["status"] for event_id in published}
        assert "delivered" not in statuses
