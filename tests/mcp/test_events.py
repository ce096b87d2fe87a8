"""MCP Events on herald's server, in process, with the ``mcp`` SDK's client on both eras:
the catalogue, and polls whose cursors acknowledge."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import pydantic
import pytest
from mcp.shared.exceptions import MCPError

from herald import Hub
from herald.capabilities import CLIENT_PROFILES, ERROR_CODES_SKETCH, ClientProfile, EventsProfile
from herald.config import EventsConfig
from herald.delivery.engine import Notifier
from herald.http.limits import PollCost, StreamSlots
from herald.mcp import HeraldServer, create_server
from herald.mcp.events import EXTENSION, NOT_FOUND, RESOURCE_EXHAUSTED
from herald.models import Agent, EventStatus
from herald.testing import ManualClock
from mcp import Client
from tests.mcp.conftest import Received, connect

pytestmark = pytest.mark.anyio
ERAS = ["legacy", "auto"]


class RawParams(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")


class EventsRequest(types.Request[RawParams, str]):
    """An ``events/*`` request, which the SDK has no model for."""


ANY_RESULT: pydantic.TypeAdapter[dict[str, Any]] = pydantic.TypeAdapter(dict[str, Any])


async def call(client: Client, method: str, **params: Any) -> dict[str, Any]:
    request = EventsRequest(method=method, params=RawParams(**params))
    result = await client.session.send_request(request, ANY_RESULT)
    return {k: v for k, v in result.items() if k not in ("_meta", "resultType")}


async def poll(client: Client, cursor: str | None, **params: Any) -> dict[str, Any]:
    return await call(
        client, "events/poll", name="herald.event", arguments={}, cursor=cursor, **params
    )


@pytest.mark.parametrize("mode", ERAS)
async def test_events_are_advertised_under_both_keys(notifier: Notifier, mode: str) -> None:
    agent, _ = await notifier.hub.create_agent("alice")
    async with connect(notifier, agent, mode=mode) as (client, _):
        capabilities = client.server_capabilities
        assert capabilities.extensions is not None and EXTENSION in capabilities.extensions
        raw = client.session.discover_result or client.session.initialize_result
        assert raw is not None


@pytest.mark.parametrize("mode", ERAS)
async def test_the_catalogue_lists_herald_event_with_its_schemas(
    notifier: Notifier, mode: str
) -> None:
    agent, _ = await notifier.hub.create_agent("alice")
    async with connect(notifier, agent, mode=mode) as (client, _):
        listed = await call(client, "events/list")
    (entry,) = [e for e in listed["events"] if e["name"] == "herald.event"]
    assert entry["delivery"] == ["poll", "push", "webhook"]
    assert set(entry["inputSchema"]["properties"]) == {"types", "from"}
    assert entry["inputSchema"]["additionalProperties"] is False
    assert {"type", "text", "data", "from", "seq"} <= set(entry["payloadSchema"]["required"])
    assert "nextCursor" not in listed


@pytest.mark.parametrize("mode", ERAS)
async def test_a_null_cursor_starts_before_the_oldest_unacknowledged_event(
    notifier: Notifier, mode: str
) -> None:
    hub = notifier.hub
    agent, _ = await hub.create_agent("alice")
    first = await hub.publish("alice", "dm.received", "one")
    await hub.publish("alice", "dm.received", "two")
    await hub.ack(agent, ids=[first.event.id])
    async with connect(notifier, agent, mode=mode) as (client, _):
        start = await poll(client, None)
        assert start["events"] == [] and start["truncated"] is False
        assert start["hasMore"] is True and start["nextPollMs"] == 0
        page = await poll(client, start["cursor"])
    assert [e["data"]["text"] for e in page["events"]] == ["two"]
    (occurrence,) = page["events"]
    assert occurrence["name"] == "herald.event"
    assert occurrence["eventId"].startswith("evt_")
    assert occurrence["data"]["seq"] == 2 and occurrence["data"]["type"] == "dm.received"


async def test_the_cursor_acknowledges_what_came_before_it_and_a_repeat_gets_the_same_events(
    notifier: Notifier,
) -> None:
    hub = notifier.hub
    agent, _ = await hub.create_agent("alice")
    published = [await hub.publish("alice", "t", f"event {n}") for n in range(5)]
    async with connect(notifier, agent, mode="auto") as (client, _):
        start = await poll(client, None)
        page = await poll(client, start["cursor"], maxEvents=2)
        again = await poll(client, start["cursor"], maxEvents=2)  # the answer was lost
        assert again["events"] == page["events"] and again["cursor"] == page["cursor"]
        assert page["hasMore"] is True and page["nextPollMs"] == 0
        rest = await poll(client, page["cursor"], maxEvents=10)
        assert [e["data"]["text"] for e in rest["events"]] == ["event 2", "event 3", "event 4"]
        assert rest["hasMore"] is False and rest["nextPollMs"] > 0
        statuses = [(await hub.get_event(p.event.id))[0].status for p in published]
        assert statuses[:2] == [EventStatus.DELIVERED] * 2
        assert statuses[2:] == [EventStatus.PENDING] * 3
        done = await poll(client, rest["cursor"])
    assert done["events"] == [] and done["cursor"] == rest["cursor"]
    for p in published:
        assert (await hub.get_event(p.event.id))[0].status is EventStatus.DELIVERED


async def test_arguments_narrow_by_type_glob_and_sender_and_acknowledge_only_what_matches(
    notifier: Notifier,
) -> None:
    hub = notifier.hub
    agent, _ = await hub.create_agent("alice")
    bob, _ = await hub.create_agent("bob")
    red = await hub.publish("alice", "build.failed", "red")
    dm = await hub.send_message(bob, "alice", "hi alice", None, type="dm.received")
    anonymous = await hub.publish("alice", "dm.received", "from nobody")
    async with connect(notifier, agent, mode="auto") as (client, _):
        args = {"types": ["dm.*"], "from": "bob"}
        start = await call(client, "events/poll", name="herald.event", arguments=args)
        page = await call(
            client, "events/poll", name="herald.event", arguments=args, cursor=start["cursor"]
        )
        assert [e["eventId"] for e in page["events"]] == [dm.event.id]
        await call(
            client, "events/poll", name="herald.event", arguments=args, cursor=page["cursor"]
        )
    assert (await hub.get_event(dm.event.id))[0].status is EventStatus.DELIVERED
    for other in (red, anonymous):
        assert (await hub.get_event(other.event.id))[0].status is EventStatus.PENDING


async def test_max_age_skips_older_pending_events_and_says_truncated(
    notifier: Notifier, clock: ManualClock
) -> None:
    hub = notifier.hub
    agent, _ = await hub.create_agent("alice")
    await hub.publish("alice", "t", "old")
    clock.advance(120)
    await hub.publish("alice", "t", "new")
    async with connect(notifier, agent, mode="auto") as (client, _):
        start = await poll(client, None, maxAgeMs=60_000)
        assert start["truncated"] is True
        page = await poll(client, start["cursor"])
    assert [e["data"]["text"] for e in page["events"]] == ["new"]


async def test_a_cursor_outside_retention_is_answered_truncated_once(
    notifier: Notifier, clock: ManualClock
) -> None:
    hub = notifier.hub
    agent, _ = await hub.create_agent("alice")

    async def poll_t(client: Client, cursor: str | None) -> dict[str, Any]:
        return await call(client, "events/poll", name="herald.event", arguments=args, cursor=cursor)

    args = {"types": ["t"]}
    async with connect(notifier, agent, mode="auto") as (client, _):
        start = await poll_t(client, None)
        await hub.publish("alice", "t", "expires unseen", ttl_s=1)  # seq 1
        handled = await hub.publish("alice", "t", "acknowledged elsewhere")  # seq 2
        await hub.publish("alice", "other", "not matched, kept")  # seq 3
        await hub.publish("alice", "t", "still waiting")  # seq 4
        await hub.ack(agent, ids=[handled.event.id])
        clock.advance(8 * 24 * 3600)  # past the retention of a week
        assert await hub.maintain_once() == (1, 1)  # seq 1 expired, seq 2 pruned
        page = await poll_t(client, start["cursor"])
        assert [e["data"]["text"] for e in page["events"]] == ["still waiting"]
        assert page["truncated"] is True and page["cursor"] == f"{agent.id}~{await hub.history()}~4"
        again = await poll_t(client, page["cursor"])
        assert again["truncated"] is False
        # A cursor that passes only stored events, matched or not, passes no loss.
        await hub.publish("alice", "other", "not matched")  # seq 5
        await hub.publish("alice", "t", "next")  # seq 6
        after = await poll_t(client, again["cursor"])
    assert [e["data"]["text"] for e in after["events"]] == ["next"]
    assert after["truncated"] is False


@pytest.mark.parametrize(
    ("params", "code", "says"),
    [
        ({"name": "nope.none", "arguments": {}}, NOT_FOUND, "events/list"),
        ({"name": "herald.event", "arguments": {"kinds": []}}, -32602, "unknown argument(s) kinds"),
        (
            {"name": "herald.event", "arguments": {"types": ["a[b]"]}},
            -32602,
            "arguments.types must be a list of 1-20 event-type globs of 1-128 letters, digits"
            " and _ . : - each",
        ),
        ({"name": "herald.event", "arguments": {"from": 7}}, -32602, "arguments.from"),
        ({"name": "herald.event", "cursor": "garbage"}, -32602, "cursor"),
        ({"name": "herald.event", "cursor": "agt_OTHER~0"}, -32602, "another agent"),
        ({"name": "herald.event", "maxEvents": 101}, -32602, "maxEvents"),
        ({"name": "herald.event", "maxAgeMs": -1}, -32602, "maxAgeMs"),
        ({"name": "herald.event", "extra": 1}, -32602, "extra"),
    ],
)
async def test_bad_polls_are_refused_naming_what_to_change(
    notifier: Notifier, params: dict[str, Any], code: int, says: str
) -> None:
    agent, _ = await notifier.hub.create_agent("alice")
    async with connect(notifier, agent, mode="auto") as (client, _):
        with pytest.raises(MCPError) as refused:
            await call(client, "events/poll", **params)
    assert refused.value.code == code
    assert says in refused.value.message


async def test_a_cursor_ahead_of_the_newest_event_is_refused_and_acknowledges_nothing(
    notifier: Notifier,
) -> None:
    hub = notifier.hub
    agent, _ = await hub.create_agent("alice")
    published = await hub.publish("alice", "t", "kept")
    async with connect(notifier, agent, mode="auto") as (client, _):
        with pytest.raises(MCPError) as refused:
            await poll(client, f"{agent.id}~{await hub.history()}~5")
    assert refused.value.code == -32602
    assert (await hub.get_event(published.event.id))[0].status is EventStatus.PENDING


@pytest.mark.parametrize("history", ["0123456789abcdef~", ""])
async def test_a_cursor_of_another_history_acknowledges_nothing_and_gets_everything_pending(
    notifier: Notifier, history: str
) -> None:
    """A cursor given before a restore (another history), or by a herald whose cursors named
    none, is no place in this store: every pending event comes, with ``truncated``, though
    seqs this store handed out passed it."""
    hub = notifier.hub
    agent, _ = await hub.create_agent("alice")
    published = [(await hub.publish("alice", "t", f"e{n}")).event.id for n in range(4)]
    async with connect(notifier, agent, mode="auto") as (client, _):
        page = await poll(client, f"{agent.id}~{history}3")
        assert page["truncated"] is True
        assert [event["eventId"] for event in page["events"]] == published
        assert page["cursor"] == f"{agent.id}~{await hub.history()}~4"
    for event_id in published:
        assert (await hub.get_event(event_id))[0].status is EventStatus.PENDING


async def test_another_agents_cursor_is_refused(notifier: Notifier) -> None:
    hub: Hub = notifier.hub
    alice, _ = await hub.create_agent("alice")
    bob, _ = await hub.create_agent("bob")
    await hub.publish("bob", "t", "bob's")
    async with connect(notifier, bob, mode="auto") as (client, _):
        bobs = await poll(client, None)
    async with connect(notifier, alice, mode="auto") as (client, _):
        with pytest.raises(MCPError) as refused:
            await poll(client, bobs["cursor"])
    assert "another agent" in refused.value.message


@contextlib.asynccontextmanager
async def streaming(
    client: Client, cursor: str | None = None, **params: Any
) -> AsyncIterator[asyncio.Task[dict[str, Any]]]:
    """An ``events/stream`` request held open; leaving cancels it, as a client going away does."""
    request = EventsRequest(
        method="events/stream",
        params=RawParams(name="herald.event", arguments={}, cursor=cursor, **params),
    )
    task = asyncio.create_task(client.session.send_request(request, ANY_RESULT))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, MCPError):
            await task


async def next_of(received: Received, method: str) -> dict[str, Any]:
    """The next notification of the stream (others, such as the cascade's on the legacy era,
    are passed over), which must be a ``method``."""
    while True:
        got, params = await received.next()
        if got.startswith("notifications/events/"):
            assert got == method, (got, params)
            return params


def server_of(notifier: Notifier, agent: Agent, **options: Any) -> HeraldServer:
    """herald's MCP server in process, every request from ``agent``, with these options."""

    async def identify(ctx: Any) -> Agent:
        return agent

    return create_server(notifier, identify=identify, transport="memory", **options)


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("written_first", [True, False], ids=["written", "at-once"])
async def test_a_stream_says_active_then_pushes_the_backlog_and_live_events_as_sent(
    notifier: Notifier, mode: str, written_first: bool
) -> None:
    hub = notifier.hub
    agent, _ = await hub.create_agent("alice")
    waiting = await hub.publish("alice", "t", "waiting")
    async with (
        connect(notifier, agent, mode=mode) as (client, received),
        streaming(client) as _,
    ):
        active = await next_of(received, "notifications/events/active")
        assert active["truncated"] is False
        backlog = await next_of(received, "notifications/events/event")
        assert backlog["eventId"] == waiting.event.id and backlog["name"] == "herald.event"
        subscription_id = backlog["_meta"]["io.modelcontextprotocol/subscriptionId"]
        assert subscription_id == active["_meta"]["io.modelcontextprotocol/subscriptionId"]
        live = await hub.publish("alice", "t", "live")
        pushed = await next_of(received, "notifications/events/event")
        assert pushed["eventId"] == live.event.id
        assert pushed["data"]["text"] == "live"
        if written_first:
            await hub.pushes.written()  # recorded in the background, the stream going on
            for published in (waiting, live):
                event, attempts = await hub.get_event(published.event.id)
                assert event.status is EventStatus.SENT
                assert ("events.stream", "sent") in [(a.mechanism, a.outcome) for a in attempts]
        # The cursor of the last push, sent back on a poll, acknowledges both; also at once,
        # while the pushes are still to be written.
        async with connect(notifier, agent, mode=mode) as (other, _):
            assert (await poll(other, pushed["cursor"]))["events"] == []
    for published in (waiting, live):
        assert (await hub.get_event(published.event.id))[0].status is EventStatus.DELIVERED


async def test_a_stream_sends_a_heartbeat_with_its_cursor_when_nothing_comes(
    hub: Hub,
) -> None:
    notifier = Notifier(hub)
    agent, _ = await hub.create_agent("alice")
    server = server_of(notifier, agent, events_config=EventsConfig(heartbeat_s=0.05))
    await hub.publish("alice", "t", "one")
    async with (
        connect(notifier, agent, mode="auto", server=server) as (client, received),
        streaming(client) as _,
    ):
        await next_of(received, "notifications/events/active")
        pushed = await next_of(received, "notifications/events/event")
        beat = await next_of(received, "notifications/events/heartbeat")
        assert beat["cursor"] == pushed["cursor"]
    await notifier.close()


async def test_a_stream_with_a_cursor_acknowledges_up_to_it_and_pushes_only_what_follows(
    notifier: Notifier,
) -> None:
    hub = notifier.hub
    agent, _ = await hub.create_agent("alice")
    first = await hub.publish("alice", "t", "first")
    second = await hub.publish("alice", "t", "second")
    async with connect(notifier, agent, mode="auto") as (client, received):
        start = await poll(client, None)
        page = await poll(client, start["cursor"], maxEvents=1)  # the first is handed out
        async with streaming(client, page["cursor"]):
            await next_of(received, "notifications/events/active")
            pushed = await next_of(received, "notifications/events/event")
        assert pushed["eventId"] == second.event.id
    assert (await hub.get_event(first.event.id))[0].status is EventStatus.DELIVERED


async def test_a_cursor_never_acknowledges_what_its_subscription_was_not_handed(
    notifier: Notifier,
) -> None:
    hub = notifier.hub
    agent, _ = await hub.create_agent("alice")
    await hub.publish("alice", "a.x", "for the a subscription")
    for_b = await hub.publish("alice", "b.x", "for the b subscription")
    await hub.publish("alice", "a.y", "for the a subscription too")
    a_events = {"types": ["a.*"]}
    b_events = {"types": ["b.*"]}
    async with connect(notifier, agent, mode="auto") as (client, _):
        start = await call(client, "events/poll", name="herald.event", arguments=a_events)
        a_page = await call(
            client, "events/poll", name="herald.event", arguments=a_events, cursor=start["cursor"]
        )
        # The a subscription's cursor, sent by a client for the b subscription: nothing of b's
        # is acknowledged unseen, and b's own start still finds its event.
        await call(
            client, "events/poll", name="herald.event", arguments=b_events, cursor=a_page["cursor"]
        )
        b_start = await call(client, "events/poll", name="herald.event", arguments=b_events)
        b_page = await call(
            client, "events/poll", name="herald.event", arguments=b_events, cursor=b_start["cursor"]
        )
    assert [e["eventId"] for e in b_page["events"]] == [for_b.event.id]


async def test_a_bad_stream_request_is_refused_before_anything_is_pushed(
    notifier: Notifier,
) -> None:
    agent, _ = await notifier.hub.create_agent("alice")
    async with connect(notifier, agent, mode="auto") as (client, received):
        async with streaming(client, f"{agent.id}~{await notifier.hub.history()}~9") as task:
            with pytest.raises(MCPError) as refused:
                await task
        assert refused.value.code == -32602 and "ahead" in refused.value.message
        assert received.queue.empty()


async def test_a_stream_ends_with_terminated_when_the_agent_is_deleted(
    notifier: Notifier,
) -> None:
    hub = notifier.hub
    agent, _ = await hub.create_agent("alice")
    async with connect(notifier, agent, mode="auto") as (client, received):
        async with streaming(client) as task:
            await next_of(received, "notifications/events/active")
            await hub.delete_agent(agent.id)
            terminated = await next_of(received, "notifications/events/terminated")
            assert "deleted" in terminated["error"]["message"]
            assert terminated["error"]["code"] == -32024  # Forbidden: stop, do not resume
            result = await task
        assert "io.modelcontextprotocol/subscriptionId" in result.get("_meta", {})


async def test_a_stream_of_a_declared_type_ends_when_the_type_is_removed(
    notifier: Notifier,
) -> None:
    hub = notifier.hub
    agent, _ = await hub.create_agent("alice")
    await hub.event_types.put("build.failed", "A build of yours failed", None)
    async with connect(notifier, agent, mode="auto") as (client, received):
        request = EventsRequest(
            method="events/stream", params=RawParams(name="build.failed", cursor=None)
        )
        task = asyncio.create_task(client.session.send_request(request, ANY_RESULT))
        await next_of(received, "notifications/events/active")
        built = await hub.publish("alice", "build.failed", "red")
        assert (await next_of(received, "notifications/events/event"))["eventId"] == built.event.id
        await hub.event_types.put("build.passed", "Another type: the stream goes on", None)
        await hub.event_types.delete("build.failed")
        terminated = await next_of(received, "notifications/events/terminated")
        await task
    assert terminated["error"]["code"] == NOT_FOUND
    assert terminated["error"]["data"] == {"kind": "event"}


async def test_a_declared_type_is_an_entry_with_its_payload_schema_and_polls_its_events(
    notifier: Notifier,
) -> None:
    hub = notifier.hub
    agent, _ = await hub.create_agent("alice")
    schema = {"type": "object", "properties": {"build": {"type": "integer"}}}
    await hub.event_types.put("build.failed", "A build of yours failed", schema)
    async with connect(notifier, agent, mode="auto") as (client, _):
        listed = await call(client, "events/list")
        (entry,) = [e for e in listed["events"] if e["name"] == "build.failed"]
        assert entry["description"] == "A build of yours failed"
        assert entry["payloadSchema"]["properties"]["data"] == schema
        assert set(entry["inputSchema"]["properties"]) == {"from"}
        start = await call(client, "events/poll", name="build.failed", cursor=None)
        await hub.publish("alice", "dm.received", "not this one")
        built = await hub.publish("alice", "build.failed", "red", data={"build": 7})
        page = await call(client, "events/poll", name="build.failed", cursor=start["cursor"])
        with pytest.raises(MCPError) as refused:
            await call(client, "events/poll", name="build.failed", arguments={"types": ["*"]})
    assert [(e["eventId"], e["name"]) for e in page["events"]] == [(built.event.id, "build.failed")]
    assert page["events"][0]["data"]["data"] == {"build": 7}
    assert "unknown argument(s) types" in refused.value.message


async def test_an_agent_holds_at_most_its_stream_limit_of_streams_open(
    notifier: Notifier,
) -> None:
    agent, _ = await notifier.hub.create_agent("alice")
    server = server_of(notifier, agent, stream_slot=StreamSlots(1).acquire)
    async with connect(notifier, agent, mode="auto", server=server) as (client, received):
        async with streaming(client):
            await next_of(received, "notifications/events/active")
            async with streaming(client) as refused:
                with pytest.raises(MCPError) as exhausted:
                    await refused
        assert exhausted.value.code == RESOURCE_EXHAUSTED
        assert "streams-per-key" in exhausted.value.message
        async with streaming(client):  # the first one's slot is free again
            await next_of(received, "notifications/events/active")


@pytest.mark.parametrize("mode", ERAS)
async def test_a_poll_over_its_keys_limit_is_resource_exhausted_with_a_retry_time(
    notifier: Notifier, mode: str
) -> None:
    agent, _ = await notifier.hub.create_agent("alice")
    clock = ManualClock()
    limit = PollCost(rate=10, burst=notifier.hub.scan_events, clock=clock)
    server = server_of(notifier, agent, poll_admit=limit.admit)
    async with connect(notifier, agent, mode=mode, server=server) as (client, _):
        start = await poll(client, None)  # a start costs the most it may look at: the burst
        with pytest.raises(MCPError) as exhausted:
            await poll(client, start["cursor"])
        assert exhausted.value.code == RESOURCE_EXHAUSTED
        assert "--poll-rate" in exhausted.value.message
        assert exhausted.value.error.data == {"limit": "polls", "retryAfterMs": 100}
        clock.advance(0.2)  # the retry time, and some
        assert (await poll(client, start["cursor"]))["events"] == []


async def test_a_poll_passing_only_an_unmatched_event_that_expired_is_not_truncated(
    notifier: Notifier, clock: ManualClock
) -> None:
    hub = notifier.hub
    agent, _ = await hub.create_agent("alice")
    args = {"types": ["t"]}
    async with connect(notifier, agent, mode="auto") as (client, _):
        start = await call(client, "events/poll", name="herald.event", arguments=args, cursor=None)
        await hub.publish("alice", "other", "not matched, expires", ttl_s=1)  # seq 1
        await hub.publish("alice", "t", "matched")  # seq 2
        clock.advance(2)
        page = await call(
            client, "events/poll", name="herald.event", arguments=args, cursor=start["cursor"]
        )
    assert [e["data"]["text"] for e in page["events"]] == ["matched"]
    # Nothing this subscription takes was lost: an event of another type expiring is no gap.
    assert page["truncated"] is False


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize(("name", "code"), [("sketch-client", -32011), ("sep-client", NOT_FOUND)])
async def test_errors_come_in_the_band_of_codes_the_clients_profile_expects(
    notifier: Notifier, monkeypatch: pytest.MonkeyPatch, mode: str, name: str, code: int
) -> None:
    sketch = ClientProfile(events=EventsProfile(error_codes=ERROR_CODES_SKETCH))
    monkeypatch.setitem(CLIENT_PROFILES, "sketch-client", sketch)
    agent, _ = await notifier.hub.create_agent("alice")
    async with connect(notifier, agent, mode=mode, name=name) as (client, _):
        with pytest.raises(MCPError) as refused:
            await call(client, "events/poll", name="no.such", arguments={}, cursor=None)
        assert refused.value.code == code
        assert "events/list" in refused.value.message
        with pytest.raises(MCPError) as invalid:  # not the extension's: the same in every band
            await poll(client, None, maxEvents=0)
        assert invalid.value.code == -32602
