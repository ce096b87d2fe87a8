"""Drains, acks and streams over a real ``herald serve`` on each backend, in the sequences that
lost or stalled events: an idle agent's stream, a stale cursor, an expired lease, a poisoned
page, a form no client can read, a form too large to hold."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.herald_process import HeraldProcess
from tests.sse import SSEReader

LEASE_S = 3.0
"""Long enough that two heartbeats in a row on a loaded machine fall inside one lease."""


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def herald(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HeraldProcess]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('herald') / 'h.db'}"
    else:
        url = request.getfixturevalue("postgres_server_url")
    process = HeraldProcess(url, extra_args=("--lease", str(LEASE_S)))
    yield process
    process.stop()


def new_agent(herald: HeraldProcess) -> tuple[str, httpx.Client]:
    with herald.client(herald.admin_key) as admin:
        answer = admin.post("/v1/agents", json={"handle": f"n-{uuid.uuid4().hex[:8]}"})
    assert answer.status_code == 201, answer.text
    return answer.json()["handle"], herald.client(answer.json()["api_key"])


def publish(herald: HeraldProcess, to: str, *texts: str) -> list[str]:
    with herald.client(herald.admin_key) as admin:
        body = [{"to": to, "type": "t", "text": text} for text in texts]
        answer = admin.post("/v1/events", json=body)
    assert answer.status_code == 202, answer.text
    return [event["id"] for event in answer.json()["events"]]


def status_of(herald: HeraldProcess, event_id: str) -> str:
    with herald.client(herald.admin_key) as admin:
        return str(admin.get(f"/v1/events/{event_id}").json()["status"])


def heartbeat(agent: httpx.Client, **body: Any) -> dict[str, Any]:
    answer = agent.post("/channel/heartbeat", json=body)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


@pytest.mark.parametrize("position", [None, 0])
def test_the_stream_of_an_agent_with_everything_drained_stays_open(
    herald: HeraldProcess, position: int | None
) -> None:
    handle, agent = new_agent(herald)
    publish(herald, handle, "one", "two", "three")
    assert heartbeat(agent, cursor=0)["cursor"] == 3
    assert heartbeat(agent, cursor=3)["events"] == []  # all acknowledged: the normal idle state
    key = agent.headers["authorization"].removeprefix("Bearer ")
    reader = SSEReader(herald.url, key, last_event_id=position)
    try:
        publish(herald, handle, "four")
        frame = reader.next()
        assert frame is not None and frame.event == "message", frame
        assert (frame.id, frame.data["text"]) == (4, "four")
    finally:
        reader.close()
        agent.close()


def test_a_cursor_ahead_of_the_newest_event_is_refused_everywhere(herald: HeraldProcess) -> None:
    handle, agent = new_agent(herald)
    publish(herald, handle, *(f"e{n}" for n in range(3)))
    with agent:
        assert heartbeat(agent, cursor=0)["cursor"] == 3
        for path, body in [
            ("/channel/heartbeat", {"cursor": 999}),
            ("/channel/ack", {"cursor": 999}),
            ("/channel/heartbeat", {"cursor": 4, "consumer": "other"}),
        ]:
            refused = agent.post(path, json=body)
            assert refused.status_code == 422, refused.text
            error = refused.json()["error"]
            assert error["code"] == "cursor_ahead" and "seq 3" in error["message"]
        ahead = _position_in_this_history(herald, agent, 4)
        stream = agent.get("/channel/stream", headers={"last-event-id": ahead})
        assert stream.status_code == 422 and "seq 3" in stream.json()["error"]["message"]
        (later,) = publish(herald, handle, "published after the stale cursor")
        assert status_of(herald, later) == "pending"
        events = heartbeat(agent, cursor=3)["events"]
        assert [event["id"] for event in events] == [later]


def test_a_cursor_leaves_an_expired_lease_of_another_consumer_to_it(
    herald: HeraldProcess,
) -> None:
    handle, agent = new_agent(herald)
    ids = publish(herald, handle, *(f"e{n}" for n in range(10)))
    with agent:
        first = heartbeat(agent, cursor=0, limit=5, consumer="c1")
        second = heartbeat(agent, cursor=0, limit=5, consumer="c2")
        assert [e["seq"] for e in first["events"]] == [1, 2, 3, 4, 5]
        assert [e["seq"] for e in second["events"]] == [6, 7, 8, 9, 10]
        time.sleep(LEASE_S * 1.5)  # c1 dies and its lease runs out: time itself must pass
        acked = agent.post("/channel/ack", json={"cursor": 10, "consumer": "c2"})
        assert acked.json() == {"acked": 5}
        assert [status_of(herald, event_id) for event_id in ids[:5]] == ["pending"] * 5
        back = heartbeat(agent, cursor=0, limit=5, consumer="c1")
        assert [e["id"] for e in back["events"]] == ids[:5]


def test_a_cursor_sent_again_after_a_lost_answer_acknowledges_nothing_unseen(
    herald: HeraldProcess,
) -> None:
    handle, agent = new_agent(herald)
    ids = publish(herald, handle, *(f"e{n}" for n in range(10)))
    with agent:
        heartbeat(agent, cursor=0, limit=5, consumer="a")  # a dies holding 1-5
        assert heartbeat(agent, cursor=0, limit=5, consumer="b")["cursor"] == 10
        assert heartbeat(agent, cursor=10, limit=5, consumer="b")["events"] == []
        time.sleep(LEASE_S * 1.5)  # a's lease runs out: time itself must pass
        lost = heartbeat(agent, cursor=10, limit=5, consumer="b")  # this answer never arrives
        assert [e["id"] for e in lost["events"]] == ids[:5] and lost["cursor"] == 5
        again = heartbeat(agent, cursor=10, limit=5, consumer="b")
        assert again == lost  # the same cursor is answered with the same events
        assert [status_of(herald, event_id) for event_id in ids[:5]] == ["pending"] * 5
        assert heartbeat(agent, cursor=5, limit=5, consumer="b")["events"] == []
        assert [status_of(herald, event_id) for event_id in ids[:5]] == ["delivered"] * 5


def test_an_ack_without_a_consumer_spares_what_a_consumer_holds(herald: HeraldProcess) -> None:
    handle, agent = new_agent(herald)
    ids = publish(herald, handle, "a", "b", "c")
    with agent:
        heartbeat(agent, cursor=0, consumer="worker")
        assert agent.post("/channel/ack", json={"cursor": 3}).json() == {"acked": 0}
        assert [status_of(herald, event_id) for event_id in ids] == ["pending"] * 3
        assert agent.post("/channel/ack", json={"cursor": 3, "consumer": "worker"}).json() == {
            "acked": 3
        }


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_data_nested_deeper_than_the_limit_is_refused(herald: HeraldProcess) -> None:
    handle, agent = new_agent(herald)
    with herald.client(herald.admin_key) as admin:
        event = {"to": handle, "type": "t", "text": "deep"}
        deep = admin.post("/v1/events", json={**event, "data": nested(65)})
        assert deep.status_code == 422 and "64 levels" in deep.json()["error"]["message"]
        assert admin.post("/v1/events", json={**event, "data": nested(64)}).status_code == 202
    with agent:
        (stored,) = heartbeat(agent, cursor=0)["events"]
        assert stored["data"] == nested(64)


def test_a_form_with_nan_is_refused(herald: HeraldProcess) -> None:
    handle, agent = new_agent(herald)
    form = '{"type": "object", "properties": {"n": {"type": "number", "minimum": NaN}}}'
    body = f'{{"to": "{handle}", "type": "t", "text": "pick", "reply": {form}}}'
    with herald.client(herald.admin_key) as admin:
        refused = admin.post("/v1/events", content=body)
    assert refused.status_code == 422, refused.text
    assert "NaN" in refused.json()["error"]["message"]
    with agent:
        assert heartbeat(agent, cursor=0)["events"] == []


def test_a_reply_form_counts_in_the_size_limit(herald: HeraldProcess) -> None:
    handle, agent = new_agent(herald)
    big = "x" * (256 * 1024)
    form = {"type": "object", "properties": {"n": {"type": "string", "description": big}}}
    with herald.client(herald.admin_key) as admin:
        refused = admin.post(
            "/v1/events", json={"to": handle, "type": "t", "text": "x", "reply": form}
        )
    assert refused.status_code == 413, refused.text
    assert "reply form" in refused.json()["error"]["message"]
    with agent:
        assert heartbeat(agent, cursor=0)["events"] == []


def test_a_deleted_agents_stream_ends(herald: HeraldProcess) -> None:
    handle, agent = new_agent(herald)
    key = agent.headers["authorization"].removeprefix("Bearer ")
    with herald.client(herald.admin_key) as admin:
        listed = admin.get("/v1/agents", params={"search": handle}).json()["agents"]
    agent_id = next(a["id"] for a in listed if a["handle"] == handle)
    reader = SSEReader(herald.url, key)
    try:
        with herald.client(herald.admin_key) as admin:
            assert admin.delete(f"/v1/agents/{agent_id}").status_code == 204
        frame = reader.next()
        assert frame is not None and frame.event == "error", frame
        assert "deleted" in frame.data["message"]
        assert reader.next() is None  # and the connection is closed
    finally:
        reader.close()
        agent.close()


def test_a_reply_must_fill_in_the_events_form(herald: HeraldProcess) -> None:
    handle, agent = new_agent(herald)
    form = {
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "why": {"type": "string", "maxLength": 5},
            "n": {"type": "integer", "minimum": 1},
        },
        "required": ["ok"],
    }
    with herald.client(herald.admin_key) as admin:
        event = {"to": handle, "type": "t", "text": "ok?", "reply": form, "from": handle}
        asked = admin.post("/v1/events", json=event)
        bad_form = {"type": "object", "properties": {"n": {"type": "number", "minimum": "one"}}}
        refused = admin.post("/v1/events", json={**event, "reply": bad_form})
        assert refused.status_code == 422 and "minimum" in refused.json()["error"]["message"]
    event_id = asked.json()["id"]
    with agent:
        for data, field in [
            ({"ok": "yes"}, "ok"),
            ({}, "ok"),
            ({"ok": True, "zzz": 1}, "zzz"),
            ({"ok": True, "why": "too long"}, "why"),
            ({"ok": True, "n": 0}, "n"),
            ({"ok": 1}, "ok"),
        ]:
            answer = agent.post(
                "/channel/reply", json={"event_id": event_id, "text": "x", "data": data}
            )
            assert answer.status_code == 422 and field in answer.json()["error"]["message"], data
        assert status_of(herald, event_id) == "pending"  # nothing was answered
        fits = {"event_id": event_id, "text": "yes", "data": {"ok": True, "why": "fine", "n": 2}}
        assert agent.post("/channel/reply", json=fits).status_code == 201
        plain = agent.post("/channel/reply", json={"event_id": event_id, "text": "and text only"})
        assert plain.status_code == 201


def test_a_null_cursor_is_refused_not_taken_for_at_most_once(herald: HeraldProcess) -> None:
    handle, agent = new_agent(herald)
    (event_id,) = publish(herald, handle, "kept")
    with agent:
        refused = agent.post("/channel/heartbeat", json={"cursor": None})
        assert refused.status_code == 422 and "leave cursor out" in refused.text
    assert status_of(herald, event_id) == "pending"


def _position_in_this_history(herald: HeraldProcess, agent: httpx.Client, seq: int) -> str:
    """The stream's position of ``seq``, made from the id the stream gives its first event."""
    key = agent.headers["authorization"].removeprefix("Bearer ")
    reader = SSEReader(herald.url, key, after=0)
    try:
        frame = reader.next()
        assert frame is not None and frame.event == "message", frame
        return f"{frame.raw_id.rpartition('~')[0]}~{seq}"
    finally:
        reader.close()
