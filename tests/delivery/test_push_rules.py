"""Which events are pushed, end to end against a real ``herald serve`` on each backend: a low
event is never pushed (no webhook request, no SSE frame, no MCP push), and waits in the store to
be drained; a pushed position does not acknowledge it."""

from __future__ import annotations

import queue
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.backends import BACKENDS, serving
from tests.herald_process import HeraldProcess
from tests.http.test_mcp import session
from tests.sse import SSEReader
from tests.webhooks.receiver import Receiver


@pytest.fixture(scope="module", params=BACKENDS)
def herald(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HeraldProcess]:
    directory = tmp_path_factory.mktemp(request.param)
    with serving(request.param, directory, "--webhook-allow", "loopback") as process:
        yield process


def new_agent(herald: HeraldProcess) -> dict[str, Any]:
    with herald.client(herald.admin_key) as admin:
        answer = admin.post("/v1/agents", json={"handle": f"p-{uuid.uuid4().hex[:8]}"})
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def publish(herald: HeraldProcess, to: str, *events: tuple[str, str | None]) -> list[str]:
    """Publish (text, priority) pairs in one batch; a priority of None is left out."""
    body = [
        {"to": to, "type": "t", "text": text, **({"priority": p} if p else {})}
        for text, p in events
    ]
    with herald.client(herald.admin_key) as admin:
        answer = admin.post("/v1/events", json=body)
    assert answer.status_code == 202, answer.text
    return [event["id"] for event in answer.json()["events"]]


def drained_texts(herald: HeraldProcess, key: str) -> list[tuple[str, str]]:
    with herald.client(key) as agent:
        answer = agent.post("/channel/heartbeat", json={"cursor": 0})
    assert answer.status_code == 200, answer.text
    return [(event["text"], event["priority"]) for event in answer.json()["events"]]


def test_a_priority_is_stored_and_shown_normal_by_default(herald: HeraldProcess) -> None:
    agent = new_agent(herald)
    ids = publish(herald, agent["handle"], ("plain", None), ("now", "urgent"))
    with herald.client(herald.admin_key) as admin:
        shown = [admin.get(f"/v1/events/{event_id}").json()["priority"] for event_id in ids]
        listed = admin.get("/v1/events", params={"agent": agent["handle"]}).json()["events"]
    assert shown == ["normal", "urgent"]
    assert sorted(event["priority"] for event in listed) == ["normal", "urgent"]


def test_an_unknown_priority_is_refused_naming_the_field_and_its_values(
    herald: HeraldProcess,
) -> None:
    agent = new_agent(herald)
    with herald.client(herald.admin_key) as admin:
        refused = admin.post(
            "/v1/events",
            json={"to": agent["handle"], "type": "t", "text": "x", "priority": "critical"},
        )
    assert refused.status_code == 422, refused.text
    message = refused.json()["error"]["message"]
    assert "event.priority" in message and "low, normal, high, urgent" in message
    assert drained_texts(herald, agent["api_key"]) == []  # nothing stored


def test_a_low_event_is_not_streamed_and_a_streamed_position_leaves_it_pending(
    herald: HeraldProcess,
) -> None:
    agent = new_agent(herald)
    reader = SSEReader(herald.url, agent["api_key"])
    try:
        publish(herald, agent["handle"], ("quiet", "low"), ("loud", None))
        frame = reader.next()
        assert frame is not None and frame.event == "message", frame
        assert (frame.id, frame.data["text"]) == (2, "loud")  # the low one was passed over
        with herald.client(agent["api_key"]) as client:
            acked = client.post("/channel/ack", json={"cursor": frame.raw_id}).json()
        assert acked["acked"] == 1  # the pushed one, not the low one before it
    finally:
        reader.close()
    assert drained_texts(herald, agent["api_key"]) == [("quiet", "low")]


def test_a_low_event_gets_no_webhook_request_and_waits_to_be_drained(
    herald: HeraldProcess,
) -> None:
    agent = new_agent(herald)
    receiver = Receiver()
    try:
        with herald.client(herald.admin_key) as admin:
            put = admin.put(f"/v1/agents/{agent['id']}/webhook", json={"url": receiver.url})
            assert put.status_code in (200, 201), put.text
        publish(herald, agent["handle"], ("quiet", "low"), ("loud", "high"))
        publish(herald, agent["handle"], ("louder", "urgent"))
        texts = {receiver.arrived.get(timeout=30).json["text"] for _ in range(2)}
        assert texts == {"loud", "louder"}
        with pytest.raises(queue.Empty):  # scheduled with the first batch, it would be here
            receiver.arrived.get_nowait()
    finally:
        receiver.close()
    assert drained_texts(herald, agent["api_key"]) == [("quiet", "low")]


@pytest.mark.anyio
async def test_a_low_event_is_not_pushed_to_an_mcp_session_but_is_in_its_inbox(
    herald: HeraldProcess,
) -> None:
    agent = new_agent(herald)
    async with session(herald, agent["api_key"]) as (client, received):
        publish(herald, agent["handle"], ("quiet", "low"), ("loud", None))
        method, params = await received.next()
        assert method == "notifications/claude/channel"
        assert "loud" in params["content"] and "quiet" not in params["content"]
        inbox = await client.call_tool("inbox", {})
        events = inbox.structured_content["events"]  # type: ignore[index]
        assert [(e["text"], e["priority"]) for e in events] == [
            ("quiet", "low"),
            ("loud", "normal"),
        ]
        assert received.queue.empty()
