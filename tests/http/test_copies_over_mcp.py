"""A list's and a topic's copies over MCP, end to end against a real ``herald serve`` on each
backend: each agent named by the list, or subscribed to the topic, has its own copy pushed once
to its MCP session (the cascade) and handed once to its MCP Events consumers (``events/stream``,
and ``events/poll``, whose cursor acknowledges it); an agent the publish did not reach gets
nothing. (Drains, SSE streams and webhooks of both: ``test_event_lists.py``, ``test_topics.py``.)"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.herald_process import HeraldProcess
from tests.http.test_event_lists import drained, new_agents
from tests.http.test_mcp import session
from tests.http.test_mcp_events import agent_http, modern, stream_messages, stream_request

pytestmark = pytest.mark.anyio

WAYS = ["list", "topic"]


@pytest.fixture
def admin(each_backend: HeraldProcess) -> Iterator[httpx.Client]:
    with each_backend.client(each_backend.admin_key) as client:
        yield client


def reached_by(
    admin: httpx.Client, way: str, agents: list[dict[str, Any]]
) -> tuple[str | None, list[str]]:
    """Make ``agents`` the ones a publish of ``way`` reaches (a list names them; a new topic
    has them as its subscribers), publish it, and return the topic (None for a list) and each
    agent's copy's id, in order."""
    topic: str | None = None
    if way == "list":
        body: dict[str, Any] = {"to": [agent["handle"] for agent in agents]}
    else:
        topic = f"repo/{uuid.uuid4().hex[:8]}"
        assert admin.put(f"/v1/topics/{topic}", json={"description": "d"}).status_code == 201
        for agent in agents:
            put = admin.put(f"/v1/topics/{topic}/subscribers/{agent['handle']}")
            assert put.status_code == 201, put.text
        body = {"topic": topic}
    sent = admin.post("/v1/events", json={**body, "type": "t", "text": f"to all by {way}"})
    assert sent.status_code == 202, sent.text
    owner = {}
    for receipt in sent.json()["events"]:
        owner[admin.get(f"/v1/events/{receipt['id']}").json()["agent"]] = receipt["id"]
    assert len(owner) == len(agents)
    return topic, [owner[agent["id"]] for agent in agents]


def alone(admin: httpx.Client, agent: dict[str, Any]) -> str:
    """An event for ``agent`` alone: published after the copies, it is what comes next, so that
    a copy handed twice (or one the agent should not have) would come before it."""
    sent = admin.post("/v1/events", json={"to": agent["handle"], "type": "t", "text": "alone"})
    assert sent.status_code == 202, sent.text
    return str(sent.json()["id"])


@pytest.mark.parametrize("way", WAYS)
async def test_each_agent_s_copy_is_pushed_once_to_its_mcp_session(
    each_backend: HeraldProcess, admin: httpx.Client, way: str
) -> None:
    agents = new_agents(admin, 3)  # the last is not reached
    async with contextlib.AsyncExitStack() as stack:
        sessions = [
            await stack.enter_async_context(session(each_backend, agent["api_key"]))
            for agent in agents
        ]
        topic, copies = reached_by(admin, way, agents[:2])
        alones = [alone(admin, agent) for agent in agents]
        for (client, received), copy, last in zip(sessions, [*copies, None], alones, strict=True):
            if copy is not None:
                _, first = await received.next()
                assert first["meta"]["event_id"] == copy
                assert first["meta"].get("topic") == topic  # the <channel> tag names it
                acked = await client.call_tool("ack", {"ids": [copy]})
                assert acked.structured_content == {"acked": 1}
            _, then = await received.next()
            assert then["meta"]["event_id"] == last and "topic" not in then["meta"]
    for copy in copies:
        assert admin.get(f"/v1/events/{copy}").json()["status"] == "delivered"


@pytest.mark.parametrize("way", WAYS)
async def test_each_agent_s_copy_is_streamed_once_by_mcp_events(
    each_backend: HeraldProcess, admin: httpx.Client, way: str
) -> None:
    agents = new_agents(admin, 3)  # the last is not reached
    async with contextlib.AsyncExitStack() as stack:
        streams = []
        for agent in agents:
            http = await stack.enter_async_context(agent_http(each_backend, agent["api_key"]))
            body, headers = await stream_request(http, "modern")
            messages = await stack.enter_async_context(stream_messages(http, body, headers))
            active = await anext(messages)
            assert active["method"] == "notifications/events/active"
            streams.append(messages)
        topic, copies = reached_by(admin, way, agents[:2])
        alones = [alone(admin, agent) for agent in agents]
        for messages, copy, last in zip(streams, [*copies, None], alones, strict=True):
            pushed = [await anext(messages) for _ in range(1 if copy is None else 2)]
            assert [m["method"] for m in pushed] == ["notifications/events/event"] * len(pushed)
            expected = [last] if copy is None else [copy, last]
            assert [m["params"]["eventId"] for m in pushed] == expected
            topics = [m["params"]["data"].get("topic") for m in pushed]
            assert topics == ([None] if copy is None else [topic, None])


@pytest.mark.parametrize("way", WAYS)
async def test_each_agent_s_copy_is_polled_once_by_mcp_events_and_its_cursor_acknowledges_it(
    each_backend: HeraldProcess, admin: httpx.Client, way: str
) -> None:
    agents = new_agents(admin, 3)  # the last is not reached
    async with contextlib.AsyncExitStack() as stack:
        https = [
            await stack.enter_async_context(agent_http(each_backend, agent["api_key"]))
            for agent in agents
        ]
        starts = [await poll(http, None) for http in https]
        assert all(start["events"] == [] for start in starts)
        topic, copies = reached_by(admin, way, agents[:2])
        for http, start, copy in zip(https, starts, [*copies, None], strict=True):
            page = await poll(http, start["cursor"])
            assert [e["eventId"] for e in page["events"]] == ([] if copy is None else [copy])
            assert [e["data"].get("topic") for e in page["events"]] == (
                [] if copy is None else [topic]
            )
            after = await poll(http, page["cursor"])  # acknowledges the copy: none comes again
            assert after["events"] == []
    for copy in copies:
        assert admin.get(f"/v1/events/{copy}").json()["status"] == "delivered"
    assert all(drained(each_backend, agent) == [] for agent in agents)


async def poll(http: httpx.AsyncClient, cursor: str | None) -> dict[str, Any]:
    """One 2026-07-28 ``events/poll`` of ``herald.event``: its result."""
    answered = await modern(http, "events/poll", {"name": "herald.event", "cursor": cursor})
    assert "result" in answered, answered
    result: dict[str, Any] = answered["result"]
    return result
