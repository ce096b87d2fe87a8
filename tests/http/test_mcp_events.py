"""MCP Events on ``/mcp`` of a real ``herald serve``, in raw JSON-RPC on both eras: which era a
probing client gets, the advertisement, and a poll whose cursor acknowledges."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from herald.mcp.events import EXTENSION
from herald.sse import SSEDecoder
from tests.herald_process import HeraldProcess
from tests.http.test_mcp import CLIENTS, MCP_HEADERS, new_agent, publish, session
from tests.mcp.test_events import call

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"


def meta(client: str = "events-test") -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1.0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response, whether sent as JSON or as one SSE event."""
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return dict(json.loads(data[-1]))
    return dict(response.json())


async def modern(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await http.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": meta(), **params}},
        headers={"mcp-protocol-version": MODERN, "mcp-method": method},
    )
    return answer(response)


@contextlib.asynccontextmanager
async def agent_http(herald: HeraldProcess, key: str) -> AsyncIterator[httpx.AsyncClient]:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=herald.url, headers=headers, timeout=30) as http:
        yield http


@pytest.fixture(scope="module")
def modern_herald(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeraldProcess]:
    path: Path = tmp_path_factory.mktemp("modern") / "herald.db"
    process = HeraldProcess(f"sqlite:///{path}", extra_args=("--mcp-era", "modern"))
    yield process
    process.stop()


@pytest.fixture(scope="module")
def legacy_herald(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeraldProcess]:
    path: Path = tmp_path_factory.mktemp("legacy") / "herald.db"
    process = HeraldProcess(f"sqlite:///{path}", extra_args=("--mcp-era", "legacy"))
    yield process
    process.stop()


async def discover(herald: HeraldProcess, key: str, client_name: str) -> dict[str, Any]:
    probe = json.loads((CLIENTS / "claude-code-2.1.328.server-discover.json").read_text())
    probe["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]["name"] = client_name
    async with agent_http(herald, key) as http:
        response = await http.post(
            "/mcp",
            json=probe,
            headers={"mcp-protocol-version": MODERN, "mcp-method": "server/discover"},
        )
    return answer(response)


async def test_an_unknown_client_probing_gets_2026_07_28_with_events_under_both_keys(
    herald: HeraldProcess,
) -> None:
    agent = new_agent(herald)
    result = (await discover(herald, agent["api_key"], "some-new-client"))["result"]
    assert MODERN in result["supportedVersions"]
    capabilities = result["capabilities"]
    assert capabilities["extensions"][EXTENSION] == capabilities["events"]
    assert "tools" in capabilities


async def test_claude_code_stays_on_the_legacy_era_where_events_are_advertised_too(
    herald: HeraldProcess,
) -> None:
    agent = new_agent(herald)
    refused = await discover(herald, agent["api_key"], "claude-code")
    assert refused["error"]["code"] == -32601
    initialize = json.loads((CLIENTS / "claude-code-2.1.328.initialize.json").read_text())
    async with agent_http(herald, agent["api_key"]) as http:
        result = answer(await http.post("/mcp", json=initialize))["result"]
    assert result["protocolVersion"] == "2025-11-25"
    assert result["capabilities"]["extensions"][EXTENSION] == result["capabilities"]["events"]


async def test_the_operator_chooses_the_era_over_the_profile(
    modern_herald: HeraldProcess, legacy_herald: HeraldProcess
) -> None:
    on_modern = new_agent(modern_herald)
    answered = await discover(modern_herald, on_modern["api_key"], "claude-code")
    assert MODERN in answered["result"]["supportedVersions"]
    on_legacy = new_agent(legacy_herald)
    refused = await discover(legacy_herald, on_legacy["api_key"], "some-new-client")
    assert refused["error"]["code"] == -32601


async def test_a_2026_07_28_client_polls_and_its_cursor_acknowledges(herald: HeraldProcess) -> None:
    agent = new_agent(herald)
    first = publish(herald, agent["handle"], "first")
    async with agent_http(herald, agent["api_key"]) as http:
        listed = await modern(http, "events/list", {})
        assert "herald.event" in [e["name"] for e in listed["result"]["events"]]
        start = (await modern(http, "events/poll", {"name": "herald.event", "cursor": None}))[
            "result"
        ]
        assert start["resultType"] == "complete" and start["events"] == []
        page = (
            await modern(http, "events/poll", {"name": "herald.event", "cursor": start["cursor"]})
        )["result"]
        assert [e["eventId"] for e in page["events"]] == [first]
        await modern(http, "events/poll", {"name": "herald.event", "cursor": page["cursor"]})
    with herald.client(herald.admin_key) as admin:
        assert admin.get(f"/v1/events/{first}").json()["status"] == "delivered"


async def test_a_legacy_session_polls_too(herald: HeraldProcess) -> None:
    agent = new_agent(herald)
    first = publish(herald, agent["handle"], "first")
    initialize = json.loads((CLIENTS / "claude-code-2.1.328.initialize.json").read_text())
    async with agent_http(herald, agent["api_key"]) as http:
        opened = await http.post("/mcp", json=initialize)
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        await http.post(
            "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session
        )

        async def legacy(params: dict[str, Any]) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": 2, "method": "events/poll", "params": params}
            return answer(await http.post("/mcp", json=body, headers=session))["result"]

        start = await legacy({"name": "herald.event"})
        page = await legacy({"name": "herald.event", "cursor": start["cursor"]})
    assert [e["eventId"] for e in page["events"]] == [first]


@contextlib.asynccontextmanager
async def stream_messages(
    http: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str]
) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
    """The JSON-RPC messages of an SSE response, read as they come; leaving aborts the request."""
    async with http.stream("POST", "/mcp", json=body, headers=headers) as response:
        assert response.headers["content-type"].startswith("text/event-stream")

        async def messages() -> AsyncIterator[dict[str, Any]]:
            decoder = SSEDecoder()
            async for chunk in response.aiter_raw():
                for event in decoder.feed(chunk):
                    if event.data:
                        yield json.loads(event.data)

        yield messages()


async def stream_request(
    http: httpx.AsyncClient, era: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """An ``events/stream`` request of ``herald.event`` from its start, and its headers: on the
    2026-07-28 era with its ``_meta``, on the legacy one in a session opened for it."""
    if era == "modern":
        headers = {"mcp-protocol-version": MODERN, "mcp-method": "events/stream"}
        params: dict[str, Any] = {"_meta": meta()}
    else:
        initialize = json.loads((CLIENTS / "claude-code-2.1.328.initialize.json").read_text())
        opened = await http.post("/mcp", json=initialize)
        headers = {"mcp-session-id": opened.headers["mcp-session-id"]}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await http.post("/mcp", json=initialized, headers=headers)
        params = {}
    body = {
        "jsonrpc": "2.0",
        "id": "stream-1",
        "method": "events/stream",
        "params": {**params, "name": "herald.event", "cursor": None},
    }
    return body, headers


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_stream_pushes_live_events_over_http_on_both_eras(
    herald: HeraldProcess, era: str
) -> None:
    agent = new_agent(herald)
    async with agent_http(herald, agent["api_key"]) as http:
        body, headers = await stream_request(http, era)
        async with stream_messages(http, body, headers) as messages:
            active = await anext(messages)
            assert active["method"] == "notifications/events/active"
            tag = active["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
            assert tag == "stream-1"
            event_id = publish(herald, agent["handle"], "live over HTTP")
            pushed = await anext(messages)
        assert pushed["method"] == "notifications/events/event"
        assert pushed["params"]["eventId"] == event_id
    with herald.client(herald.admin_key) as admin:
        shown = admin.get(f"/v1/events/{event_id}").json()
    # Recorded sent in the background (tests/mcp/test_events.py waits for it); open either way.
    assert shown["status"] in {"pending", "sent"}


@pytest.mark.parametrize(("name", "era"), [("claude-code", "2025-11-25"), ("any-client", MODERN)])
async def test_the_sdk_client_polls_over_http_on_either_era(
    herald: HeraldProcess, name: str, era: str
) -> None:
    agent = new_agent(herald)
    first = publish(herald, agent["handle"], "for the SDK client")
    async with session(herald, agent["api_key"], name=name) as (client, _):
        assert client.protocol_version == era
        start = await call(client, "events/poll", name="herald.event", cursor=None)
        page = await call(client, "events/poll", name="herald.event", cursor=start["cursor"])
    assert [e["eventId"] for e in page["events"]] == [first]


async def test_a_refused_poll_gets_the_same_error_on_the_short_way_as_through_the_sdk(
    herald: HeraldProcess,
) -> None:
    agent = new_agent(herald)
    async with agent_http(herald, agent["api_key"]) as http:
        bad_cursor = await http.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 9,
                "method": "events/poll",
                "params": {"_meta": meta(), "name": "herald.event", "cursor": "garbage"},
            },
            headers={"mcp-protocol-version": MODERN, "mcp-method": "events/poll"},
        )
        no_meta = await http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 10, "method": "events/poll", "params": {"name": "x"}},
            headers={"mcp-protocol-version": MODERN, "mcp-method": "events/poll"},
        )
        wrong_header = await http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 11, "method": "events/poll", "params": {"_meta": meta()}},
            headers={"mcp-protocol-version": MODERN, "mcp-method": "events/list"},
        )
        poll = {"jsonrpc": "2.0", "method": "events/poll", "params": {"_meta": meta()}}
        twice = await http.post(
            "/mcp",
            json={**poll, "id": 12},
            headers=[
                ("mcp-protocol-version", MODERN),
                ("mcp-method", "events/poll"),
                ("mcp-method", "events/poll"),
            ],
        )
        other_meta = {**meta(), "io.modelcontextprotocol/protocolVersion": "2025-11-25"}
        other_version = await http.post(
            "/mcp",
            json={**poll, "id": 13, "params": {"_meta": other_meta}},
            headers={"mcp-protocol-version": MODERN, "mcp-method": "events/poll"},
        )
    assert bad_cursor.status_code == 400
    assert bad_cursor.json()["id"] == 9 and bad_cursor.json()["error"]["code"] == -32602
    assert "cursor" in bad_cursor.json()["error"]["message"]
    # Refused by the SDK's own checks of the envelope and the routing headers.
    assert no_meta.status_code == 400 and no_meta.json()["error"]["code"] == -32602
    assert wrong_header.status_code == 400 and wrong_header.json()["error"]["code"] == -32020
    for refused in (twice, other_version):
        assert refused.status_code == 400 and refused.json()["error"]["code"] == -32020


async def test_a_stream_the_client_closes_gives_its_slot_back(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    path = tmp_path_factory.mktemp("one-stream") / "herald.db"
    one_stream = HeraldProcess(f"sqlite:///{path}", extra_args=("--streams-per-key", "1"))
    try:
        agent = new_agent(one_stream)
        headers = {"mcp-protocol-version": MODERN, "mcp-method": "events/stream"}
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "events/stream",
            "params": {"_meta": meta(), "name": "herald.event", "cursor": None},
        }
        async with agent_http(one_stream, agent["api_key"]) as http:
            async with stream_messages(http, body, headers) as messages:
                assert (await anext(messages))["method"] == "notifications/events/active"
                second = answer(await http.post("/mcp", json=body, headers=headers))
                assert second["error"]["code"] == -32025  # the one slot is taken
            # Closed by the client: the slot comes back once the hub sees the close (bounded:
            # each try is one request, refused at once while the slot is still taken).
            for _ in range(200):
                async with http.stream("POST", "/mcp", json=body, headers=headers) as response:
                    if response.headers["content-type"].startswith("text/event-stream"):
                        break
                    await response.aread()
            else:
                pytest.fail("the closed stream's slot never came back")
    finally:
        one_stream.stop()


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_stream_ends_with_terminated_once_its_key_is_rotated_out(
    herald: HeraldProcess, era: str
) -> None:
    agent = new_agent(herald)
    async with agent_http(herald, agent["api_key"]) as http:
        body, headers = await stream_request(http, era)
        async with stream_messages(http, body, headers) as messages:
            assert (await anext(messages))["method"] == "notifications/events/active"
            with herald.client(herald.admin_key) as admin:
                rotated = admin.post(f"/v1/agents/{agent['id']}/rotate-key")
                assert rotated.status_code == 200
                publish(herald, agent["handle"], "not for the old key")
            said = [message async for message in messages]  # to the stream's end, not cut
        assert "not for the old key" not in json.dumps(said)
        terminated, last = said[-2:]
        assert terminated["method"] == "notifications/events/terminated"
        error = terminated["params"]["error"]
        assert error["code"] == -32024  # Forbidden: this key may not resume it
        assert "rotated out" in error["message"] and "new key" in error["message"]
        assert last["id"] == body["id"] and "result" in last
        again = await http.post("/mcp", json=body, headers=headers)
        assert again.status_code == 401  # and the old key opens nothing new
