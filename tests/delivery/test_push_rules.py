"""Which events are pushed, end to end against a real ``herald serve`` on each backend: a low
event is never pushed (no webhook request, no SSE frame, no MCP push), and waits in the store to
be drained; a pushed position does not acknowledge it."""

from __future__ import annotations

import asyncio
import queue
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.backends import BACKENDS, serving
from tests.herald_process import HeraldProcess
from tests.http.test_mcp import session
from tests.sse import SSEReader
from tests.waiting import wait_until
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
        _, loud = publish(herald, agent["handle"], ("quiet", "low"), ("loud", "high"))
        (louder,) = publish(herald, agent["handle"], ("louder", "urgent"))
        texts = {receiver.arrived.get(timeout=30).json["text"] for _ in range(2)}
        assert texts == {"loud", "louder"}
        all_delivered(herald, [loud, louder])
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
        _, loud = publish(herald, agent["handle"], ("quiet", "low"), ("loud", None))
        method, params = await received.next()
        assert method == "notifications/claude/channel"
        assert "loud" in params["content"] and "quiet" not in params["content"]
        # The push is recorded after its notification leaves; until then its row is locked,
        # and an inbox read (which skips locked rows) would not show it yet.
        await asyncio.to_thread(marked_sent, herald, loud)
        inbox = await client.call_tool("inbox", {})
        events = inbox.structured_content["events"]  # type: ignore[index]
        assert [(e["text"], e["priority"]) for e in events] == [
            ("quiet", "low"),
            ("loud", "normal"),
        ]
        assert received.queue.empty()


def marked_sent(herald: HeraldProcess, event_id: str) -> None:
    """Waits (bounded) until the event's push is recorded."""
    with herald.client(herald.admin_key) as admin:
        wait_until(
            lambda: admin.get(f"/v1/events/{event_id}").json()["status"] == "sent",
            f"the push of {event_id} recorded",
        )


def mute(herald: HeraldProcess, agent: dict[str, Any], *globs: str) -> None:
    """The agent mutes the types itself, and reads its preferences back."""
    with herald.client(agent["api_key"]) as client:
        put = client.put("/channel/preferences", json={"muted": list(globs)})
        assert put.status_code == 200, put.text
        assert client.get("/channel/preferences").json() == {"muted": list(globs)}


def publish_typed(herald: HeraldProcess, to: str, *types: str) -> list[str]:
    body = [{"to": to, "type": type_, "text": type_} for type_ in types]
    with herald.client(herald.admin_key) as admin:
        answer = admin.post("/v1/events", json=body)
    assert answer.status_code == 202, answer.text
    return [event["id"] for event in answer.json()["events"]]


def all_delivered(herald: HeraldProcess, ids: list[str]) -> None:
    """Waits (bounded) until each event's delivery is recorded: a webhook's request arrives
    before herald records its answer, and until then a drain may hand the event out too."""
    with herald.client(herald.admin_key) as admin:
        for event_id in ids:
            wait_until(
                lambda event_id=event_id: (
                    admin.get(f"/v1/events/{event_id}").json()["status"] == "delivered"
                ),
                f"the delivery of {event_id} recorded",
            )


def drained_types(herald: HeraldProcess, key: str) -> list[str]:
    return [text for text, _ in drained_texts(herald, key)]


def test_muted_types_are_not_streamed_and_a_streamed_position_leaves_them_pending(
    herald: HeraldProcess,
) -> None:
    agent = new_agent(herald)
    mute(herald, agent, "ci.*", "build_done")
    reader = SSEReader(herald.url, agent["api_key"])
    try:
        publish_typed(herald, agent["handle"], "ci.passed", "buildXdone", "build_done", "dm.new")
        frames = [reader.next(), reader.next()]
        assert [(f.id, f.data["type"]) for f in frames if f] == [(2, "buildXdone"), (4, "dm.new")]
        with herald.client(agent["api_key"]) as client:
            acked = client.post("/channel/ack", json={"cursor": reader.last_id}).json()
        assert acked["acked"] == 2  # the pushed ones, not the muted ones between them
    finally:
        reader.close()
    assert drained_types(herald, agent["api_key"]) == ["ci.passed", "build_done"]


def test_muted_types_get_no_webhook_request_and_wait_to_be_drained(
    herald: HeraldProcess,
) -> None:
    agent = new_agent(herald)
    receiver = Receiver()
    try:
        with herald.client(herald.admin_key) as admin:
            muted = admin.patch(
                f"/v1/agents/{agent['id']}", json={"preferences": {"muted": ["ci.*"]}}
            )
            assert muted.status_code == 200, muted.text
            assert muted.json()["preferences"] == {"muted": ["ci.*"]}
            put = admin.put(f"/v1/agents/{agent['id']}/webhook", json={"url": receiver.url})
            assert put.status_code in (200, 201), put.text
        _, new = publish_typed(herald, agent["handle"], "ci.passed", "dm.new")
        (newer,) = publish_typed(herald, agent["handle"], "dm.newer")
        texts = {receiver.arrived.get(timeout=30).json["type"] for _ in range(2)}
        assert texts == {"dm.new", "dm.newer"}
        all_delivered(herald, [new, newer])
        with pytest.raises(queue.Empty):  # scheduled with the first batch, it would be here
            receiver.arrived.get_nowait()
    finally:
        receiver.close()
    assert drained_types(herald, agent["api_key"]) == ["ci.passed"]


@pytest.mark.anyio
async def test_an_mcp_session_mutes_types_with_its_tool_and_they_are_not_pushed_to_it(
    herald: HeraldProcess,
) -> None:
    agent = new_agent(herald)
    async with session(herald, agent["api_key"]) as (client, received):
        muted = await client.call_tool("preferences", {"set": {"muted": ["ci.*"]}})
        assert muted.structured_content == {"muted": ["ci.*"]}
        publish_typed(herald, agent["handle"], "ci.passed", "dm.new")
        method, params = await received.next()
        assert method == "notifications/claude/channel"
        assert "dm.new" in params["content"] and "ci.passed" not in params["content"]
        unmuted = await client.call_tool("preferences", {"set": {}})
        assert unmuted.structured_content == {}
        (failed,) = publish_typed(herald, agent["handle"], "ci.failed")  # nothing muted: pushed
        assert "ci.failed" in (await received.next())[1]["content"]
        await asyncio.to_thread(marked_sent, herald, failed)  # as in the test above
        read = await client.call_tool("preferences", {})
        assert read.structured_content == {}
        refused = await client.call_tool("preferences", {"set": {"muted": "ci.*"}})
        assert refused.is_error and "arguments.set.muted must be a list" in str(refused.content)
        inbox = await client.call_tool("inbox", {})
        events = inbox.structured_content["events"]  # type: ignore[index]
        assert [e["type"] for e in events] == ["ci.passed", "dm.new", "ci.failed"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"mute": ["ci.*"]}, "unknown key(s) mute; allowed: digests, muted, quiet_hours"),
        ({"muted": ["a b"]}, "preferences.muted must be a list of at most 20"),
        ({"muted": "ci.*"}, "preferences.muted must be a list"),
        ([], "preferences must be an object"),
    ],
)
def test_bad_preferences_are_refused_saying_what_to_fix_and_change_nothing(
    herald: HeraldProcess, body: Any, says: str
) -> None:
    agent = new_agent(herald)
    mute(herald, agent, "ci.*")
    with herald.client(agent["api_key"]) as client:
        refused = client.put("/channel/preferences", json=body)
        assert refused.status_code == 422, refused.text
        assert says in refused.json()["error"]["message"]
        assert client.get("/channel/preferences").json() == {"muted": ["ci.*"]}
    with herald.client(herald.admin_key) as admin:
        refused = admin.patch(f"/v1/agents/{agent['id']}", json={"preferences": body})
    assert refused.status_code == 422, refused.text
    assert says in refused.json()["error"]["message"]


def test_a_patch_with_neither_delivery_nor_preferences_is_refused(herald: HeraldProcess) -> None:
    agent = new_agent(herald)
    with herald.client(herald.admin_key) as admin:
        refused = admin.patch(f"/v1/agents/{agent['id']}", json={})
    assert refused.status_code == 422, refused.text
    assert "send delivery, preferences, loop_guard" in refused.json()["error"]["message"]
