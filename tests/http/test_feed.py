"""``GET /v1/stream``, the admin's live feed, against real ``herald serve`` processes on SQLite
and PostgreSQL: publishes, drains, acknowledgements, pushes, webhook attempts to a real
receiver and endpoint changes, in order; resumed with ``Last-Event-ID`` from any item with
exactly what followed; narrowed by agent and type; admin key only. A client that stops reading
is cut off, in process, while publishers go on."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from herald import Hub
from herald.client import HeraldClient
from herald.http.feed import FeedRoute
from tests.backends import BACKENDS, serving
from tests.herald_process import HeraldProcess
from tests.sse import Frame, SSEReader
from tests.webhooks.receiver import Receiver

ADMIN_KEY = "an-admin-key-chosen-for-the-feed-tests-01"


@pytest.fixture(scope="module", params=BACKENDS)
def herald(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HeraldProcess]:
    # Webhooks to loopback receivers; a failed delivery tried again only an hour later.
    directory = tmp_path_factory.mktemp(request.param)
    extra = ("--webhook-allow", "loopback", "--webhook-schedule", "0,3600")
    with serving(request.param, directory, *extra) as process:
        yield process


def new_agent(herald: HeraldProcess, name: str) -> dict[str, Any]:
    with herald.client(herald.admin_key) as admin:
        made = admin.post("/v1/agents", json={"handle": f"{name}-{uuid.uuid4().hex[:6]}"})
        assert made.status_code == 201, made.text
        return dict(made.json())


def publish(herald: HeraldProcess, handle: str, type: str, count: int = 1) -> list[str]:
    with herald.client(herald.admin_key) as admin:
        body = [{"to": handle, "type": type, "text": f"{type} {n}"} for n in range(count)]
        answer = admin.post("/v1/events", json=body)
        assert answer.status_code == 202, answer.text
        return [event["id"] for event in answer.json()["events"]]


def set_webhook(herald: HeraldProcess, agent: dict[str, Any], url: str) -> str:
    with herald.client(herald.admin_key) as admin:
        answer = admin.put(f"/v1/agents/{agent['id']}/webhook", json={"url": url})
        assert answer.status_code in {200, 201}, answer.text
        return str(answer.json()["id"])


def feed(herald: HeraldProcess, last_event_id: str | None = None, **params: str) -> SSEReader:
    reader = SSEReader(
        herald.url, herald.admin_key or "", path="/v1/stream", last_event_id=last_event_id,
        params=params,
    )  # fmt: skip
    assert reader.status == 200
    return reader


def next_of(reader: SSEReader, handles: set[str], count: int) -> list[Frame]:
    """The next ``count`` frames about these agents (other tests' agents are passed over)."""
    found: list[Frame] = []
    read: list[Frame] = []
    while len(found) < count:
        frame = reader.next()
        assert frame is not None, f"the feed ended; {as_read(read)}"
        read.append(frame)
        if frame.data.get("agent", {}).get("handle") in handles:
            found.append(frame)
    return found


def assert_seen(frames: list[Frame], expected: list[tuple[str, str, Any]]) -> None:
    """``seen`` of each frame is ``expected``; a failure lists the frames as read (``as_read``)."""
    assert [seen(frame) for frame in frames] == expected, as_read(frames)


def as_read(frames: list[Frame]) -> str:
    """The frames in the order read, each with its id (the feed's cursor: the journal row's
    position, the item in it) and all its data: what a frame out of order or missing is told
    by."""
    return "the frames read, in order:\n" + "\n".join(
        f"{frame.raw_id} {frame.event} {frame.data}" for frame in frames
    )


def seen(frame: Frame) -> tuple[str, str, Any]:
    """A frame's kind, agent handle, and its event's type (or the endpoint's new state)."""
    data = frame.data
    detail = data["event"]["type"] if "event" in data else data["state"]
    return frame.event, data["agent"]["handle"], detail


def test_the_feed_shows_each_change_in_order_and_resumes_with_exactly_what_followed(
    herald: HeraldProcess,
) -> None:
    failing = Receiver(script=[(500, {})] * 5)
    gone = Receiver(script=[(410, {})])
    reader = feed(herald)
    try:
        alice, bob, dave = (new_agent(herald, name) for name in ("alice", "bob", "dave"))
        handles = {alice["handle"], bob["handle"], dave["handle"]}
        frames: list[Frame] = []

        alice_endpoint = set_webhook(herald, alice, failing.url)
        frames += next_of(reader, handles, 1)
        (alice_event,) = publish(herald, alice["handle"], "build.failed")
        frames += next_of(reader, handles, 3)  # published, tried, failing
        bob_endpoint = set_webhook(herald, bob, gone.url)
        publish(herald, bob["handle"], "build.ok")
        frames += next_of(reader, handles, 4)  # created, published, tried, disabled
        with herald.client(herald.admin_key) as admin:
            assert admin.post(f"/v1/endpoints/{bob_endpoint}/enable").status_code == 200
        frames += next_of(reader, handles, 1)
        publish(herald, dave["handle"], "chat.message", count=2)
        with herald.client(dave["api_key"]) as agent:
            assert len(agent.post("/channel/heartbeat", json={"cursor": 0}).json()["events"]) == 2
            assert agent.post("/channel/heartbeat", json={"cursor": 2}).json()["events"] == []
        frames += next_of(reader, handles, 6)  # two published, leased, acked

        a, b, d = alice["handle"], bob["handle"], dave["handle"]
        assert_seen(
            frames,
            [
                ("endpoint", a, "created"),
                ("published", a, "build.failed"),
                ("attempt", a, "build.failed"),
                ("endpoint", a, "failing"),
                ("endpoint", b, "created"),
                ("published", b, "build.ok"),
                ("attempt", b, "build.ok"),
                ("endpoint", b, "disabled"),
                ("endpoint", b, "enabled"),
                ("published", d, "chat.message"),
                ("published", d, "chat.message"),
                ("attempt", d, "chat.message"),
                ("attempt", d, "chat.message"),
                ("acked", d, "chat.message"),
                ("acked", d, "chat.message"),
            ],
        )
        failed = frames[2].data
        assert failed["event"]["id"] == alice_event
        assert (failed["way"], failed["outcome"], failed["endpoint"]) == (
            "webhook",
            "failed",
            alice_endpoint,
        )
        assert "500" in failed["error"] and failed["next_attempt_at"] is not None
        assert frames[3].data["endpoint"] == {"id": alice_endpoint, "kind": "webhook"}
        undeliverable = frames[6].data
        assert (undeliverable["outcome"], undeliverable["next_attempt_at"]) == (
            "undeliverable",
            None,
        )
        assert "410" in frames[7].data["reason"]
        assert [frames[n].data["outcome"] for n in (11, 12)] == ["leased", "leased"]
        assert [frames[n].data["by"] for n in (13, 14)] == ["default", "default"]
        assert [f.data["event"]["seq"] for f in frames[9:11]] == [1, 2]
        assert all("text" not in f.data.get("event", {}) for f in frames)
        assert all("secret" not in str(f.data) and "whsec_" not in str(f.data) for f in frames)
        ids = [frame.raw_id for frame in frames]
        assert len(set(ids)) == len(ids)

        # From any item (one alone in its transaction, or in the middle of a batch): exactly
        # what followed it, then what happens next.
        for start in (0, 2, 9, 11):
            resumed = feed(herald, last_event_id=frames[start].raw_id)
            try:
                again = next_of(resumed, handles, len(frames) - start - 1)
                assert [(f.event, f.raw_id, f.data) for f in again] == [
                    (f.event, f.raw_id, f.data) for f in frames[start + 1 :]
                ]
                publish(herald, dave["handle"], f"sentinel.{start}")
                (sentinel,) = next_of(resumed, handles, 1)
                assert seen(sentinel) == ("published", d, f"sentinel.{start}")
                frames.append(sentinel)  # what the next one resumes to see too
            finally:
                resumed.close()
    finally:
        reader.close()
        failing.close()
        gone.close()


def test_the_feed_is_narrowed_by_agent_and_by_event_type(herald: HeraldProcess) -> None:
    alice, bob = new_agent(herald, "alice"), new_agent(herald, "bob")
    reader = feed(herald)
    publish(herald, alice["handle"], "build.failed")
    (start,) = next_of(reader, {alice["handle"]}, 1)
    reader.close()
    publish(herald, bob["handle"], "build.ok")
    publish(herald, alice["handle"], "chat.message")
    publish(herald, bob["handle"], "chat.message")
    publish(herald, alice["handle"], "build.fixed")
    of_alice = feed(herald, start.raw_id, agent=alice["handle"])
    builds = feed(herald, start.raw_id, type="build.*")
    by_id = feed(herald, start.raw_id, agent=bob["id"], type="chat.*")
    try:
        everyone = {alice["handle"], bob["handle"]}
        assert_seen(
            next_of(of_alice, everyone, 2),
            [
                ("published", alice["handle"], "chat.message"),
                ("published", alice["handle"], "build.fixed"),
            ],
        )
        assert_seen(
            next_of(builds, everyone, 2),
            [
                ("published", bob["handle"], "build.ok"),
                ("published", alice["handle"], "build.fixed"),
            ],
        )
        assert_seen(next_of(by_id, everyone, 1), [("published", bob["handle"], "chat.message")])
    finally:
        for reader in (of_alice, builds, by_id):
            reader.close()


def test_a_client_that_sets_a_rate_gets_the_newest_after_a_skipped_item(
    herald: HeraldProcess,
) -> None:
    """``max_rate=4``: one item a quarter of a second at most, however many happened."""
    dave = new_agent(herald, "dave")
    reader = feed(herald)
    publish(herald, dave["handle"], "first")
    (start,) = next_of(reader, {dave["handle"]}, 1)
    reader.close()
    publish(herald, dave["handle"], "note", count=30)  # one commit of 30
    paced = feed(herald, start.raw_id, agent=dave["handle"], max_rate="4")
    try:
        skipped, newest = paced.next(), paced.next()
        assert skipped is not None and newest is not None
        assert skipped.event == "skipped" and skipped.data["after"] == start.raw_id
        assert "after=" + start.raw_id in skipped.data["message"]
        assert (newest.event, newest.data["event"]["seq"]) == ("published", 31)
        publish(herald, dave["handle"], "last")
        after = paced.next()
        assert after is not None and (after.event, after.data["event"]["type"]) == (
            "published",
            "last",
        )
    finally:
        paced.close()
    everything = feed(herald, start.raw_id, agent=dave["handle"])
    try:
        left_out = next_of(everything, {dave["handle"]}, 29)
        assert [frame.data["event"]["seq"] for frame in left_out] == list(range(2, 31))
        assert left_out[-1].raw_id == skipped.raw_id  # where the skipped item resumes
    finally:
        everything.close()


@pytest.mark.anyio
async def test_a_push_to_a_live_stream_is_an_attempt_on_the_feed(herald: HeraldProcess) -> None:
    carol = new_agent(herald, "carol")
    reader = await asyncio.to_thread(feed, herald)
    try:
        async with HeraldClient(herald.url, carol["api_key"]) as client:
            params = {"name": "herald.event", "cursor": None}
            messages = client.mcp_messages("events/stream", params, "feed-stream")
            active = await anext(messages)
            assert active["method"] == "notifications/events/active"
            (event_id,) = await asyncio.to_thread(publish, herald, carol["handle"], "ping")
            pushed = await anext(messages)
            assert pushed["params"]["eventId"] == event_id
            await messages.aclose()
        frames = await asyncio.to_thread(next_of, reader, {carol["handle"]}, 2)
    finally:
        reader.close()
    assert_seen(
        frames,
        [
            ("published", carol["handle"], "ping"),
            ("attempt", carol["handle"], "ping"),
        ],
    )
    assert (frames[1].data["way"], frames[1].data["outcome"]) == ("events.stream", "sent")
    assert frames[1].data["session"] and frames[1].data["endpoint"] is None


def test_the_feed_takes_only_the_admin_key_and_says_what_to_send(herald: HeraldProcess) -> None:
    agent = new_agent(herald, "erin")
    with herald.client() as nobody:
        assert nobody.get("/v1/stream").status_code == 401
    with herald.client(agent["api_key"]) as own:
        refused = own.get("/v1/stream")
        assert refused.status_code == 403
        assert "needs the admin key" in refused.json()["error"]["message"]
    reader = feed(herald)
    publish(herald, agent["handle"], "t")
    first = reader.next()
    reader.close()
    assert first is not None
    history = first.raw_id.rpartition("~")[0]
    with herald.client(herald.admin_key) as admin:
        for params, headers, said in (
            ({"after": "not-a-cursor"}, {}, "query.after must be the id of an item"),
            ({}, {"last-event-id": "1.2.3.4"}, "query.after must be the id of an item"),
            ({"after": "NOT A HISTORY~1.2"}, {}, "query.after must be the id of an item"),
            ({"after": f"{history}~{2**62}.1"}, {}, "ahead of anything this herald's stream gave"),
            ({"agent": "nobody-here"}, {}, "query.agent names no agent"),
            ({"type": "no spaces"}, {}, "query.type must be an event type, or a glob"),
            ({"since": "x"}, {}, "unknown parameter(s) since"),
            ({"max_rate": "0"}, {}, "query.max_rate must be a whole number of items a second"),
            ({"max_rate": "fast"}, {}, "query.max_rate must be a whole number of items a second"),
            ({"max_rate": "9" * 30}, {}, "query.max_rate must be a whole number of items a second"),
            ({"max_rate": "١٢"}, {}, "query.max_rate must be a whole number of items a second"),
        ):
            answer = admin.get("/v1/stream", params=params, headers=headers)
            assert answer.status_code == 422, (params, answer.text)  # as every refused input
            assert said in answer.json()["error"]["message"]


@pytest.mark.anyio
async def test_a_client_that_stops_reading_is_cut_off_while_publishers_go_on(
    store_url: str,
) -> None:
    async with Hub.from_url(store_url) as hub:
        await hub.setup_admin_key(ADMIN_KEY)
        await hub.create_agent("alice")
        route = FeedRoute(hub, send_timeout_s=0.5, poll_s=0.05)
        bodies: list[bytes] = []
        opened, stuck = asyncio.Event(), asyncio.Event()

        async def send(message: dict[str, Any]) -> None:
            if message["type"] != "http.response.body":
                return
            bodies.append(message["body"])
            if len(bodies) == 1:
                opened.set()
                return
            stuck.set()  # the client took the first page, and reads no more
            await asyncio.Event().wait()

        async def receive() -> dict[str, Any]:
            await asyncio.Event().wait()  # it never says it went away
            return {"type": "http.disconnect"}

        scope = {
            "type": "http",
            "method": "GET",
            "path": "/v1/stream",
            "query_string": b"",
            "headers": [(b"authorization", f"Bearer {ADMIN_KEY}".encode())],
        }
        streaming = asyncio.create_task(route(scope, receive, send))  # type: ignore[arg-type]
        async with asyncio.timeout(10):
            await opened.wait()
            await hub.publish("alice", "note", "first")
            await stuck.wait()
            for n in range(200):  # none of these waits for the stuck client
                await hub.publish("alice", "note", f"more {n}")
            await streaming  # cut off once a write waited past the send timeout
        assert b"event: published" in bodies[1]
