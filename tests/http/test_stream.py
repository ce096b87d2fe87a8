"""``GET /channel/stream`` against real ``herald serve`` processes."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from herald.http.stream import FrameCache
from herald.models import Event, EventStatus
from tests.herald_process import HeraldProcess
from tests.sse import SSEReader


def new_agent(herald: HeraldProcess) -> dict[str, Any]:
    with herald.client(herald.admin_key) as admin:
        response = admin.post("/v1/agents", json={"handle": f"s-{uuid.uuid4().hex[:8]}"})
        return dict(response.json())


def publish(herald: HeraldProcess, to: str, *texts: str, **fields: Any) -> list[int]:
    with herald.client(herald.admin_key) as admin:
        body = [{"to": to, "type": "t", "text": text, **fields} for text in texts]
        response = admin.post("/v1/events", json=body)
        assert response.status_code == 202, response.text
        return [event["seq"] for event in response.json()["events"]]


def read_events(reader: SSEReader, count: int) -> list[tuple[int, str]]:
    seen = []
    for _ in range(count):
        frame = reader.next()
        assert frame is not None and frame.event == "message", frame
        seen.append((frame.id or 0, frame.data["text"]))
    return seen


def test_a_stream_resumes_across_a_hub_restart_without_gap_or_duplicate(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'h.db'}"
    herald = HeraldProcess(store)
    agent = new_agent(herald)
    publish(herald, agent["handle"], "one", "two")
    reader = SSEReader(herald.url, agent["api_key"])
    assert read_events(reader, 2) == [(1, "one"), (2, "two")]
    publish(herald, agent["handle"], "three")
    assert read_events(reader, 1) == [(3, "three")]
    third = reader.last_id
    herald.kill()
    with pytest.raises(httpx.HTTPError):
        reader.next()
    reader.close()
    restarted = HeraldProcess(store)
    try:
        publish(restarted, agent["handle"], "four", "five")
        resumed = SSEReader(restarted.url, agent["api_key"], last_event_id=third)
        assert read_events(resumed, 2) == [(4, "four"), (5, "five")]
        fifth = resumed.last_id
        publish(restarted, agent["handle"], "six")
        assert read_events(resumed, 1) == [(6, "six")]
        resumed.close()
        first_connect = SSEReader(restarted.url, agent["api_key"], after=fifth)
        assert read_events(first_connect, 1) == [(6, "six")]
        first_connect.close()
    finally:
        restarted.stop()


def test_a_resume_position_is_not_an_acknowledgement(herald: HeraldProcess) -> None:
    agent = new_agent(herald)
    publish(herald, agent["handle"], "kept")
    reader = SSEReader(herald.url, agent["api_key"])
    assert read_events(reader, 1) == [(1, "kept")]
    reader.close()
    again = SSEReader(herald.url, agent["api_key"])
    assert read_events(again, 1) == [(1, "kept")]
    again.close()
    with herald.client(agent["api_key"]) as client:
        assert client.post("/channel/ack", json={"cursor": again.last_id}).json() == {"acked": 1}
    publish(herald, agent["handle"], "next")
    after_ack = SSEReader(herald.url, agent["api_key"])
    assert read_events(after_ack, 1) == [(2, "next")]
    after_ack.close()


def test_lost_history_is_announced_before_anything_else(herald: HeraldProcess) -> None:
    agent = new_agent(herald)
    publish(herald, agent["handle"], "gone", ttl_s=0.001)
    publish(herald, agent["handle"], "here")
    reader = SSEReader(herald.url, agent["api_key"], after=0)
    first = reader.next()
    assert first is not None and first.event == "truncated"
    assert first.data == {"after": 0, "missing": 1}
    assert read_events(reader, 1) == [(2, "here")]
    reader.close()
    first = reader.last_id.rpartition("~")[0] + "~1"  # the position of the expired event
    clean = SSEReader(herald.url, agent["api_key"], after=first)
    assert read_events(clean, 1) == [(2, "here")]
    clean.close()


def test_a_bare_seq_is_no_place_in_any_history_and_resumes_from_the_oldest_told_so(
    herald: HeraldProcess,
) -> None:
    """A bare seq says no history: it may be from before a restore, where the restored store
    hands its seqs out again. Not taken as a place: everything pending comes, after the
    announcement that history was lost."""
    agent = new_agent(herald)
    publish(herald, agent["handle"], "one", "two", "three")
    reader = SSEReader(herald.url, agent["api_key"], last_event_id=2)
    first = reader.next()
    assert first is not None and first.event == "truncated"
    assert first.data["after"] == 0 and first.data["missing"] is None
    assert read_events(reader, 3) == [(1, "one"), (2, "two"), (3, "three")]
    reader.close()


def test_a_stream_shows_only_its_own_agents_events(herald: HeraldProcess) -> None:
    alice, bob = new_agent(herald), new_agent(herald)
    alice_reader = SSEReader(herald.url, alice["api_key"])
    bob_reader = SSEReader(herald.url, bob["api_key"])
    publish(herald, bob["handle"], "for bob")
    publish(herald, alice["handle"], "for alice")
    assert read_events(alice_reader, 1) == [(1, "for alice")]
    assert read_events(bob_reader, 1) == [(1, "for bob")]
    publish(herald, alice["handle"], "again for alice")
    assert read_events(alice_reader, 1) == [(2, "again for alice")]
    alice_reader.close()
    bob_reader.close()


@pytest.mark.parametrize(
    ("headers", "params", "status"),
    [
        ({}, {}, 401),
        ({"authorization": "Bearer herald_agent_nope"}, {}, 401),
        ({"last-event-id": "x"}, {}, 422),
        ({}, {"after": "-1"}, 422),
    ],
)
def test_a_bad_stream_request_is_refused(
    herald: HeraldProcess, headers: dict[str, str], params: dict[str, str], status: int
) -> None:
    agent = new_agent(herald)
    if status == 422:
        headers = {**headers, "authorization": f"Bearer {agent['api_key']}"}
    with httpx.Client(base_url=herald.url, timeout=10) as client:
        response = client.get("/channel/stream", headers=headers, params=params)
    assert response.status_code == status and "error" in response.json()


def test_a_slow_client_is_cut_off_without_harm_to_others(tmp_path: Path) -> None:
    herald = HeraldProcess(f"sqlite:///{tmp_path / 'h.db'}", extra_args=("--stream-buffer", "300"))
    try:
        agent = new_agent(herald)
        host, port = herald.url.removeprefix("http://").split(":")
        slow = socket.create_connection((host, int(port)))
        request = (
            f"GET /channel/stream HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {agent['api_key']}\r\n\r\n"
        )
        slow.sendall(request.encode())
        fast = SSEReader(herald.url, agent["api_key"])
        big = "x" * 16_000
        total = 0
        for batch in range(10):
            total += len(
                publish(herald, agent["handle"], *(f"{batch}-{n} {big}" for n in range(100)))
            )
        seqs = [seq for seq, _ in read_events(fast, total)]
        assert seqs == list(range(1, total + 1))
        fast.close()
        received = _read_until_closed(slow)
        assert b"event: error" in received and b"too slow" in received
        positions = [
            line[4:].decode() for line in received.split(b"\n") if line.startswith(b"id: ")
        ]
        slow_ids = [int(position.rpartition("~")[2]) for position in positions]
        assert slow_ids == list(range(1, len(slow_ids) + 1)) and len(slow_ids) < total
        resumed = SSEReader(herald.url, agent["api_key"], last_event_id=positions[-1])
        rest = [seq for seq, _ in read_events(resumed, total - len(slow_ids))]
        assert rest == list(range(len(slow_ids) + 1, total + 1))
        resumed.close()
    finally:
        herald.stop()


def _read_until_closed(sock: socket.socket) -> bytes:
    sock.settimeout(30)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
        if b"too slow" in chunk or b"0\r\n\r\n" in chunk[-8:]:
            break
    sock.close()
    return b"".join(chunks)


@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
def test_an_event_published_through_one_process_reaches_a_stream_held_by_another(
    store_url: str,
) -> None:
    holder, publisher = HeraldProcess(store_url), HeraldProcess(store_url)
    try:
        agent = new_agent(publisher)
        reader = SSEReader(holder.url, agent["api_key"])
        publish(publisher, agent["handle"], "across processes")
        assert read_events(reader, 1) == [(1, "across processes")]
        publish(publisher, agent["handle"], "and again")
        assert read_events(reader, 1) == [(2, "and again")]
        reader.close()
    finally:
        holder.stop()
        publisher.stop()


def test_the_frame_cache_is_bounded_by_bytes() -> None:
    cache = FrameCache(max_bytes=64 * 1024)
    for n in range(200):
        event = Event(f"evt_{n}", "agt_1", n + 1, "t", "x" * 900, "null", 0, EventStatus.PENDING)
        assert cache.frame(event, "h") == cache.frame(event, "h")  # the second from the cache
        assert cache.size <= cache.max_bytes
    huge = Event("evt_huge", "agt_1", 999, "t", "x" * 64 * 1024, "null", 0, EventStatus.PENDING)
    cache.frame(huge, "h")
    assert cache.size <= cache.max_bytes  # too large to keep: encoded each time
