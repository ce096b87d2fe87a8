"""The Python client of the agent API, against a real ``herald serve``."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from herald import NotFound, Unauthorized
from herald.client import HeraldClient
from herald.errors import HubUnreachable, InvalidInput, RateLimited
from herald.models import Priority
from tests.herald_process import HeraldProcess
from tests.sse_server import CraftedStream, event_frame

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def herald(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeraldProcess]:
    process = HeraldProcess(f"sqlite:///{tmp_path_factory.mktemp('client') / 'h.db'}")
    yield process
    process.stop()


def agent(herald: HeraldProcess, handle: str) -> str:
    with herald.client(herald.admin_key) as admin:
        return str(admin.post("/v1/agents", json={"handle": handle}).json()["api_key"])


def publish(herald: HeraldProcess, to: str, text: str, **fields: Any) -> str:
    with herald.client(herald.admin_key) as admin:
        answer = admin.post("/v1/events", json={"to": to, "type": "t", "text": text, **fields})
        assert answer.status_code == 202
        return str(answer.json()["id"])


async def test_a_drain_loop_with_a_cursor_gets_everything_once(herald: HeraldProcess) -> None:
    key = agent(herald, "drainer")
    for n in range(5):
        publish(herald, "drainer", f"e{n}")
    seen: list[str] = []
    async with HeraldClient(herald.url, key) as client:
        cursor = 0
        while drained := await client.heartbeat(cursor=cursor, limit=2):
            if not drained.events:
                break
            seen += [e.text for e in drained.events]
            cursor = drained.cursor
        assert (await client.heartbeat(cursor=cursor)).events == []
    assert seen == [f"e{n}" for n in range(5)]


async def test_history_reads_back_acknowledged_events_page_by_page(herald: HeraldProcess) -> None:
    key = agent(herald, "historian")
    older, newer = publish(herald, "historian", "older"), publish(herald, "historian", "newer")
    publish(herald, "historian", "a build", type="build.passed")
    async with HeraldClient(herald.url, key) as client:
        await client.ack([older, newer])
        first = await client.history(limit=1, type="t")
        assert [e.id for e in first.events] == [newer] and first.next is not None
        rest = await client.history(before=first.next, limit=1, type="t")
        with pytest.raises(InvalidInput, match=r"query\.before is not a cursor herald gave"):
            await client.history(before="17")
    assert [e.id for e in rest.events] == [older]


async def test_messages_replies_and_the_stream(herald: HeraldProcess) -> None:
    ann, ben = agent(herald, "ann"), agent(herald, "ben")
    async with HeraldClient(herald.url, ann) as as_ann, HeraldClient(herald.url, ben) as as_ben:
        sent = await as_ann.send_message("ben", "lunch?", {"where": "canteen"})
        assert sent.event.sender == "ann" and sent.event.data == {"where": "canteen"}
        stream = as_ben.stream(0)
        item = await anext(stream)
        assert item.event is not None and item.event.text == "lunch?"
        await stream.aclose()
        reply = await as_ben.reply(sent.event.id, "yes")
        assert reply.routed_event_id is not None
        (answer,) = await as_ann.inbox(10)
        assert answer.type == "reply.received" and answer.reply_to == sent.event.id


async def test_the_stream_keeps_unicode_line_separators_inside_an_event(
    herald: HeraldProcess,
) -> None:
    sender, receiver = agent(herald, "separator-sender"), agent(herald, "separator-receiver")
    text = "one\u2028two\u2029three\u0085four"
    async with (
        HeraldClient(herald.url, sender) as as_sender,
        HeraldClient(herald.url, receiver) as as_receiver,
    ):
        sent = await as_sender.send_message("separator-receiver", text, {"note": text})
        stream = as_receiver.stream(0)
        async with asyncio.timeout(20):
            item = await anext(stream)
        await stream.aclose()
    assert item.kind == "event" and item.event is not None
    assert item.event.id == sent.event.id
    assert item.event.text == text and item.event.data == {"note": text}


async def test_a_malformed_event_is_an_invalid_item_and_the_stream_goes_on() -> None:
    crafted = CraftedStream(
        [
            [
                b"id: 1\ndata: {not json\n\n",
                b'id: 2\ndata: {"id": "evt_x", "seq": "2"}\n\n',
                b"id: 3\ndata: [1, 2]\n\n",
                event_frame(4, "X").replace(b'"X"', b'"a lone surrogate \\ud800"'),
                event_frame(5, "still here"),
            ]
        ]
    )
    try:
        async with HeraldClient(crafted.url, "herald_agent_unused") as client:
            stream = client.stream(0)
            async with asyncio.timeout(20):
                items = [await anext(stream) for _ in range(5)]
            await stream.aclose()
    finally:
        crafted.close()
    invalid = [item.data or {} for item in items[:4]]
    assert [item.kind for item in items] == ["invalid"] * 4 + ["event"]
    assert [data["seq"] for data in invalid] == [1, 2, 3, 4]
    assert "not JSON" in invalid[0]["error"]
    assert "seq" in invalid[1]["error"] and "agent" in invalid[1]["error"]
    assert "not a JSON object" in invalid[2]["error"]
    assert "lone surrogate" in invalid[3]["error"]
    assert items[4].event is not None and items[4].event.text == "still here"


async def test_a_stream_reports_lost_history_first(herald: HeraldProcess) -> None:
    key = agent(herald, "forgetful")
    publish(herald, "forgetful", "gone", ttl_s=0.001)
    publish(herald, "forgetful", "kept")
    async with HeraldClient(herald.url, key) as client:
        stream = client.stream(0)
        first = await anext(stream)
        assert first.kind == "truncated" and first.data == {"after": 0, "missing": 1}
        second = await anext(stream)
        assert second.event is not None and second.event.text == "kept"
        await stream.aclose()


async def test_a_publisher_publishes_to_one_agent_and_to_a_list_each_receipt_in_order(
    herald: HeraldProcess,
) -> None:
    keys = [agent(herald, handle) for handle in ("list-a", "list-b", "list-c")]
    with herald.client(herald.admin_key) as admin:
        made = admin.post("/v1/keys", json={"name": "app", "scopes": ["publish"]})
        assert made.status_code == 201, made.text
    async with HeraldClient(herald.url, made.json()["key"]) as publisher:
        alone = await publisher.publish("list-a", "t", "alone")
        assert (alone.seq, alone.duplicate) == (1, False)
        listed = await publisher.publish(
            ["list-c", "list-a", "list-b"], "t", "all", data={"n": 1}, dedupe_key="d-1"
        )
        assert [(r.seq, r.duplicate) for r in listed] == [(1, False), (2, False), (1, False)]
        again = await publisher.publish(["list-b", "list-c"], "t", "all", dedupe_key="d-1")
        assert [r.id for r in again] == [listed[2].id, listed[0].id]
        assert all(r.duplicate for r in again)
        with pytest.raises(InvalidInput, match="names 'nobody', which no agent has"):
            await publisher.publish(["list-a", "nobody"], "t", "refused whole")
    for key, expected in zip(keys, [[alone, listed[1]], [listed[2]], [listed[0]]], strict=True):
        async with HeraldClient(herald.url, key) as client:
            drained = await client.heartbeat(limit=10)
        assert [(e.id, e.seq) for e in drained.events] == [(r.id, r.seq) for r in expected]
        assert all(e.text in ("alone", "all") for e in drained.events)


async def test_publish_and_send_message_carry_a_priority_and_publish_a_schedule(
    herald: HeraldProcess,
) -> None:
    key = agent(herald, "prio-reader")
    writer = agent(herald, "prio-writer")
    due = datetime.datetime.now(datetime.UTC).replace(microsecond=0) + datetime.timedelta(days=1)
    async with HeraldClient(herald.url, herald.admin_key) as admin:
        low = await admin.publish("prio-reader", "t", "fyi", priority="low")
        assert (low.seq, low.deliver_at) == (1, None)
        later = await admin.publish("prio-reader", "t", "standup", delay_s=3600, priority="high")
        at = await admin.publish(["prio-reader"], "t", "review", deliver_at=due)
        in_an_hour = (datetime.datetime.now(datetime.UTC).timestamp() + 3600) * 1000
        assert later.seq < 0 and later.deliver_at is not None
        assert abs(later.deliver_at - in_an_hour) < 60_000
        assert [(r.seq < 0, r.deliver_at) for r in at] == [(True, due.timestamp() * 1000)]
        with pytest.raises(InvalidInput, match=r"event\.priority must be one of low"):
            await admin.publish("prio-reader", "t", "x", priority="critical")
        with pytest.raises(InvalidInput, match="not both"):
            await admin.publish("prio-reader", "t", "x", delay_s=60, deliver_at=due)
    async with HeraldClient(herald.url, writer) as client:
        sent = await client.send_message("prio-reader", "urgent word", priority="urgent")
        assert sent.event.priority is Priority.URGENT
        with pytest.raises(InvalidInput, match=r"message\.priority must be one of low"):
            await client.send_message("prio-reader", "x", priority="soon")
    with herald.client(herald.admin_key) as admin_http:
        listed = admin_http.get("/v1/events", params={"agent": "prio-reader"}).json()["events"]
    shown = {e["text"]: (e["priority"], e["status"]) for e in listed}
    assert shown == {
        "fyi": ("low", "pending"),
        "standup": ("high", "scheduled"),
        "review": ("normal", "scheduled"),
        "urgent word": ("urgent", "pending"),
    }
    async with HeraldClient(herald.url, key) as reader:
        drained = await reader.heartbeat(limit=10)
    assert [(e.text, e.priority) for e in drained.events] == [
        ("fyi", Priority.LOW),
        ("urgent word", Priority.URGENT),
    ]


async def test_errors_come_back_as_heralds_own(herald: HeraldProcess, tmp_path: Path) -> None:
    key = agent(herald, "errant")
    async with HeraldClient(herald.url, key) as client:
        with pytest.raises(NotFound):
            await client.reply("evt_unknown", "x")
        with pytest.raises(InvalidInput, match="limit"):
            await client.heartbeat(limit=500)
    async with HeraldClient(herald.url, "herald_agent_wrong") as stranger:
        with pytest.raises(Unauthorized):
            await stranger.ack(cursor=1)
    async with HeraldClient("http://127.0.0.1:9", key) as nowhere:
        with pytest.raises(HubUnreachable, match="cannot be reached"):
            await nowhere.inbox(1)


async def test_drain_acknowledges_each_batch_once_the_next_is_asked_for(
    herald: HeraldProcess,
) -> None:
    key = agent(herald, "batcher")
    for n in range(5):
        publish(herald, "batcher", f"e{n}")
    async with HeraldClient(herald.url, key) as client:
        seen = []
        async for event in client.drain(limit=2):
            seen.append(event.text)
            if len(seen) == 3:
                break  # a crash in the middle of the second batch
        again = [event.text async for event in client.drain(limit=2)]
    assert seen == ["e0", "e1", "e2"]
    assert again == ["e2", "e3", "e4"]  # the unfinished batch comes back; the first does not
    with herald.client(herald.admin_key) as admin:
        agents = admin.get("/v1/agents").json()["agents"]
    (batcher,) = [a for a in agents if a["handle"] == "batcher"]
    assert batcher["last_seq"] == 5


def test_herald_drain_prints_json_lines(herald: HeraldProcess) -> None:
    key = agent(herald, "printer")
    publish(herald, "printer", "to print")
    command = [sys.executable, "-m", "herald.cli", "drain", "--url", herald.url]
    env = {**os.environ, "HERALD_API_KEY": key}
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    assert json.loads(line)["text"] == "to print"
    again = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert again.stdout == ""  # acknowledged by the first run
    refused = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HERALD_API_KEY": "x"},
    )
    assert refused.returncode == 1 and "not known" in refused.stderr


async def test_a_key_over_its_publish_rate_gets_rate_limited_with_its_wait(
    tmp_path: Path,
) -> None:
    limited = HeraldProcess(
        f"sqlite:///{tmp_path / 'h.db'}",
        extra_args=("--publish-rate", "0.01", "--publish-burst", "2"),
    )
    try:
        key = agent(limited, "hasty")
        agent(limited, "calm")
        async with HeraldClient(limited.url, key) as client:
            await client.send_message("calm", "one")
            await client.ask_permission("calm", "abcde", "Bash")
            with pytest.raises(RateLimited) as refused:
                await client.send_message("calm", "three")
            assert refused.value.retry_after_s >= 1
            with pytest.raises(RateLimited):
                await client.ask_permission("calm", "fghij", "Bash")
    finally:
        limited.stop()


async def test_a_following_drain_rides_out_a_hub_restart(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'h.db'}"
    hub = HeraldProcess(store)
    port = int(hub.url.rsplit(":", 1)[1])
    key = agent(hub, "steady")
    publish(hub, "steady", "before")
    seen: asyncio.Queue[str] = asyncio.Queue()

    async def follow() -> None:
        async with HeraldClient(hub.url, key) as client:
            async for event in client.drain(follow=True, interval_s=0.05):
                seen.put_nowait(event.text)

    following = asyncio.create_task(follow())
    try:
        async with asyncio.timeout(30):
            assert await seen.get() == "before"
        hub.kill()
        hub = HeraldProcess(store, port=port)
        publish(hub, "steady", "after the restart")
        async with asyncio.timeout(30):
            assert await seen.get() == "after the restart"
        assert not following.done()
    finally:
        following.cancel()
        hub.stop()


async def test_a_following_drain_is_woken_by_the_stream_not_the_interval(tmp_path: Path) -> None:
    hub = HeraldProcess(f"sqlite:///{tmp_path / 'h.db'}")
    key = agent(hub, "woken")
    seen: asyncio.Queue[str] = asyncio.Queue()

    async def follow() -> None:
        async with HeraldClient(hub.url, key) as client:
            # A poll every 10 minutes: only the stream can bring the event within the wait below.
            async for event in client.drain(follow=True, interval_s=600):
                seen.put_nowait(event.text)

    following = asyncio.create_task(follow())
    try:
        first = publish(hub, "woken", "first")
        async with asyncio.timeout(30):
            assert await seen.get() == "first"
            # Acknowledged by the heartbeat that found nothing more: the drain waits now.
            while status(hub, first) != "delivered":
                await asyncio.sleep(0)
        publish(hub, "woken", "while it waits")
        async with asyncio.timeout(30):
            assert await seen.get() == "while it waits"
    finally:
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following  # its stream closed before the hub stops
        hub.stop()


def status(hub: HeraldProcess, event_id: str) -> str:
    with hub.client(hub.admin_key) as admin:
        return str(admin.get(f"/v1/events/{event_id}").json()["status"])
