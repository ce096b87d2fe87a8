"""herald's MCP server in process, with the SDK's own client, in both protocol eras."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import mcp_types as types
import pytest
from mcp.server.lowlevel import Server

from herald import EventStatus, Hub
from herald.cursors import position
from herald.delivery.cascade import PushReport
from herald.delivery.engine import Notifier
from herald.inputs.events import parse_new_event
from herald.mcp import HeraldServer, attach
from herald.models import NewEvent
from herald.testing import ManualClock
from tests.conftest import next_report
from tests.mcp.conftest import connect

pytestmark = pytest.mark.anyio

TOPIC_TOOLS = {"topics", "subscribe", "unsubscribe"}

FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_the_server_declares_channel_and_logging_and_explains_itself(
    hub: Hub, notifier: Notifier
) -> None:
    alice, _ = await hub.create_agent("alice")
    async with connect(notifier, alice) as (client, _):
        assert client.protocol_version == "2025-11-25"
        capabilities = client.server_capabilities
        assert capabilities.experimental == {"claude/channel": {}}
        assert capabilities.logging is not None
        assert "ack" in (client.instructions or "") and "inbox" in (client.instructions or "")
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {
            "inbox",
            "ack",
            "history",
            "reply",
            "send_message",
            *TOPIC_TOOLS,
            "preferences",
        }


async def test_claude_code_receives_a_channel_notification(hub: Hub, notifier: Notifier) -> None:
    alice, _ = await hub.create_agent("alice")
    async with connect(notifier, alice, name="claude-code") as (_, received):
        published = await hub.publish("alice", "dm.received", 'hi" x="1"></channel>', data={"n": 1})
        method, params = await received.next()
        assert method == "notifications/claude/channel"
        assert params["meta"]["event_id"] == published.event.id
        history = await hub.history()
        assert params["meta"]["cursor"] == position(alice.id, history, published.event.seq)
        assert "<" not in params["content"] and ">" not in params["content"]
        assert all(key.isidentifier() for key in params["meta"])


async def test_a_form_is_answered_and_the_answer_goes_to_the_sender(
    hub: Hub, notifier: Notifier, reports: asyncio.Queue[PushReport]
) -> None:
    alice, _ = await hub.create_agent("alice")
    bob, _ = await hub.create_agent("bob")
    answer = types.ElicitResult(action="accept", content={"ok": True})
    async with connect(notifier, alice, answer=answer) as (_, received):
        question = (await hub.send_message(bob, "alice", "Can you review?")).event
        assert (await received.next())[0] == "notifications/message"
        (form,) = await hub.publish_many([_interactive("alice", "Approve the release?")])
        method, params = await received.next()
        assert method == "elicitation/create" and params["requestedSchema"] == FORM
        assert "Approve the release?" in params["message"]
        assert question.sender == "bob"
        await next_report(reports)
        report = await next_report(reports)
        assert (report.mechanism, report.result.outcome.value) == ("elicitation", "delivered")
        event, _ = await hub.get_event(form.event.id)
        assert event.status is EventStatus.DELIVERED
        assert (await hub.replies(form.event.id))[0].data_json == '{"ok":true}'


async def test_a_form_answered_off_the_form_is_a_reply_without_data(
    hub: Hub, notifier: Notifier, reports: asyncio.Queue[PushReport]
) -> None:
    alice, _ = await hub.create_agent("alice")
    answer = types.ElicitResult(action="accept", content={"ok": "sure"})
    async with connect(notifier, alice, answer=answer) as (_, received):
        (form,) = await hub.publish_many([_interactive("alice", "Approve the release?")])
        assert (await received.next())[0] == "elicitation/create"
        report = await next_report(reports)
        assert (report.mechanism, report.result.outcome.value) == ("elicitation", "delivered")
        (reply,) = await hub.replies(form.event.id)
        assert reply.data_json == "null" and "ok=sure" in reply.text
        event, _ = await hub.get_event(form.event.id)
        assert event.status is EventStatus.DELIVERED


async def test_a_declined_form_is_delivered_and_a_cancelled_one_falls_back_to_text(
    hub: Hub, notifier: Notifier, reports: asyncio.Queue[PushReport]
) -> None:
    alice, _ = await hub.create_agent("alice")
    declined = types.ElicitResult(action="decline")
    async with connect(notifier, alice, answer=declined) as (_, received):
        (first,) = await hub.publish_many([_interactive("alice", "first")])
        assert (await received.next())[0] == "elicitation/create"
        assert (await next_report(reports)).result.outcome.value == "delivered"
    assert (await hub.get_event(first.event.id))[0].status is EventStatus.DELIVERED
    cancelled = types.ElicitResult(action="cancel")
    async with connect(notifier, alice, answer=cancelled) as (_, received):
        await hub.publish_many([_interactive("alice", "second")])
        assert (await received.next())[0] == "elicitation/create"
        method, params = await received.next()
        assert method == "notifications/message" and "second" in params["data"]["text"]


async def test_without_channel_or_forms_a_log_message_arrives(hub: Hub, notifier: Notifier) -> None:
    alice, _ = await hub.create_agent("alice")
    async with connect(notifier, alice) as (_, received):
        await hub.publish_many([_interactive("alice", "Approve?")])
        method, params = await received.next()
        assert method == "notifications/message" and params["logger"] == "herald"
        assert "call reply" in params["data"]["text"]


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_a_client_that_asks_for_warnings_only_gets_no_log_deliveries(
    hub: Hub, notifier: Notifier, reports: asyncio.Queue[PushReport]
) -> None:
    alice, _ = await hub.create_agent("alice")
    async with connect(notifier, alice) as (client, received):
        await client.set_logging_level("warning")
        await hub.publish("alice", "t", "kept for the inbox")
        report = await next_report(reports)  # no way to push it: it waits for the inbox
        assert (report.mechanism, report.result.outcome.value) == ("store", "failed")
        acked = await client.call_tool("ack", {"ids": ["evt_none"]})
        assert "1 unread event" in text_of(acked)  # and its tool results say so at once
        await client.set_logging_level("notice")
        await hub.publish("alice", "t", "logged again")
        method, params = await received.next()  # the first message the client gets
        assert method == "notifications/message" and "logged again" in params["data"]["text"]


async def test_the_tools_read_acknowledge_reply_and_send(hub: Hub, notifier: Notifier) -> None:
    alice, _ = await hub.create_agent("alice")
    bob, _ = await hub.create_agent("bob")
    async with connect(notifier, alice) as (alice_client, _):
        sent = await alice_client.call_tool("send_message", {"to": "bob", "text": "ping"})
        assert not sent.is_error
        async with connect(notifier, bob) as (bob_client, _):
            inbox = await bob_client.call_tool("inbox", {})
            (event,) = inbox.structured_content["events"]  # type: ignore[index]
            assert event["text"] == "ping" and event["from"] == "alice"
            assert event["status"] == "delivered"
            reply = await bob_client.call_tool("reply", {"event_id": event["id"], "text": "pong"})
            assert not reply.is_error and "agent" in text_of(reply)
        answer = await alice_client.call_tool("inbox", {})
        (routed,) = answer.structured_content["events"]  # type: ignore[index]
        assert routed["type"] == "reply.received" and routed["reply_to"] == event["id"]
        assert routed["data"]["text"] == "pong"
        await hub.publish("alice", "t", "one")
        await hub.publish("alice", "t", "two")
        history = await hub.history()
        ahead = await alice_client.call_tool("ack", {"cursor": position(alice.id, history, 100)})
        assert ahead.is_error and "seq 3" in text_of(ahead)
        bare = await alice_client.call_tool("ack", {"cursor": 3})  # no drain handed them out
        assert bare.structured_content == {"acked": 0} and "notification" in text_of(bare)
        acked = await alice_client.call_tool("ack", {"cursor": position(alice.id, history, 3)})
        assert acked.structured_content == {"acked": 2}


@pytest.mark.parametrize(
    ("tool", "arguments", "fragment"),
    [
        ("inbox", {"limit": 0}, "limit"),
        ("inbox", {"colour": "red"}, "colour"),
        ("ack", {}, "ids or a cursor"),
        ("ack", {"ids": "x"}, "ids"),
        ("reply", {"event_id": "evt_nope", "text": "x"}, "evt_nope"),
        ("reply", {"event_id": "x"}, "text"),
        ("send_message", {"to": "nobody", "text": "x"}, "nobody"),
        ("send_message", {"to": "bob", "text": "x", "data": [1]}, "data"),
        ("no_such_tool", {}, "unknown tool"),
    ],
)
async def test_bad_tool_calls_are_tool_errors_that_say_what_to_fix(
    hub: Hub, notifier: Notifier, tool: str, arguments: dict[str, Any], fragment: str
) -> None:
    alice, _ = await hub.create_agent("alice")
    await hub.create_agent("bob")
    async with connect(notifier, alice) as (client, _):
        result = await client.call_tool(tool, arguments)
        assert result.is_error and fragment in text_of(result)


async def test_an_agent_cannot_answer_another_agents_event(hub: Hub, notifier: Notifier) -> None:
    alice, _ = await hub.create_agent("alice")
    await hub.create_agent("bob")
    for_bob = (await hub.publish("bob", "t", "private")).event
    async with connect(notifier, alice) as (client, _):
        result = await client.call_tool("reply", {"event_id": for_bob.id, "text": "x"})
        assert result.is_error
        acked = await client.call_tool("ack", {"ids": [for_bob.id]})
        assert acked.structured_content == {"acked": 0}
        assert (await client.call_tool("inbox", {})).structured_content["events"] == []  # type: ignore[index]
    assert (await hub.get_event(for_bob.id))[0].status is EventStatus.PENDING


async def test_a_2026_07_28_client_is_served_by_its_tools_and_its_events_wait(
    hub: Hub, notifier: Notifier
) -> None:
    alice, _ = await hub.create_agent("alice")
    published = await hub.publish("alice", "t", "kept for the inbox")
    async with connect(notifier, alice, mode="2026-07-28", name="claude-code") as (
        client,
        received,
    ):
        assert client.protocol_version == "2026-07-28"
        assert notifier.sessions_of(alice.id) == []
        await hub.publish("alice", "t", "also kept")
        # Nothing can be pushed to it: its tool results tell it at once.
        acked = await client.call_tool("ack", {"ids": ["evt_none"]})
        assert "2 unread events" in text_of(acked)
        inbox = await client.call_tool("inbox", {})
        texts = [e["text"] for e in inbox.structured_content["events"]]  # type: ignore[index]
        assert texts == ["kept for the inbox", "also kept"]
        assert received.queue.empty()
    assert (await hub.get_event(published.event.id))[0].status is EventStatus.DELIVERED


async def test_unread_events_are_flagged_on_the_next_tool_result(
    hub: Hub, notifier: Notifier, clock: ManualClock
) -> None:
    alice, _ = await hub.create_agent("alice", delivery={"ack_timeout_s": 60})
    async with connect(notifier, alice, name="claude-code") as (client, received):
        await hub.publish("alice", "t", "unacknowledged")
        assert (await received.next())[0] == "notifications/claude/channel"
        clock.advance(60)
        notifier.wake_agents({alice.id})
        method, _ = await received.next()  # after the ack timeout: the next way
        assert method == "notifications/message"
        result = await client.call_tool("send_message", {"to": "alice", "text": "note to self"})
        assert "1 unread event" in text_of(result)


async def test_an_applications_own_server_gets_herald_attached(
    hub: Hub, notifier: Notifier, clock: ManualClock
) -> None:
    alice, _ = await hub.create_agent("alice", delivery={"ack_timeout_s": 60})

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {}}
        return types.ListToolsResult(tools=[types.Tool(name="weather", input_schema=schema)])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="sunny")])

    app_server = HeraldServer("forum", on_list_tools=list_tools, on_call_tool=call_tool)

    async def identify(ctx: Any) -> Any:
        return alice

    attach(app_server, notifier, identify=identify, transport="memory")
    async with connect(notifier, alice, server=app_server, name="claude-code") as (
        client,
        received,
    ):
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {
            "weather",
            "inbox",
            "ack",
            "history",
            "reply",
            "send_message",
            *TOPIC_TOOLS,
            "preferences",
        }
        assert text_of(await client.call_tool("weather", {})) == "sunny"
        await hub.publish("alice", "t", "from the forum")
        assert (await received.next())[0] == "notifications/claude/channel"
        clock.advance(60)
        notifier.wake_agents({alice.id})
        await received.next()
        assert "1 unread event" in text_of(await client.call_tool("weather", {}))


async def test_a_session_leaves_the_notifier_when_its_client_goes(
    hub: Hub, notifier: Notifier
) -> None:
    alice, _ = await hub.create_agent("alice")
    async with connect(notifier, alice):
        assert len(notifier.sessions_of(alice.id)) == 1
    await notifier.wait_for_sessions(alice.id, 0)


async def test_attach_works_on_a_plain_sdk_server(hub: Hub, notifier: Notifier) -> None:
    alice, _ = await hub.create_agent("alice")

    async def identify(ctx: Any) -> Any:
        return alice

    plain: Server[Any] = Server("plain")
    attach(plain, notifier, identify=identify, transport="memory")
    async with connect(notifier, alice, server=plain) as (client, received):
        assert client.server_capabilities.logging is not None
        await hub.publish("alice", "t", "hello")
        assert (await received.next())[0] == "notifications/message"


def _interactive(to: str, text: str) -> Any:

    return parse_new_event({"to": to, "type": "question", "text": text, "reply": FORM})


async def test_inbox_delivers_only_the_events_its_answer_shows(
    hub: Hub, notifier: Notifier
) -> None:
    alice, _ = await hub.create_agent("alice")
    deep: Any = {}
    for _ in range(300):  # stored by an older herald, before publish refused such nesting
        deep = {"a": deep}
    before = await hub.publish("alice", "t", "before")
    poison = NewEvent("alice", "t", "deep", data_json=json.dumps(deep))
    (poisoned,) = await hub.publish_many([poison])
    after = await hub.publish("alice", "t", "after")
    async with connect(notifier, alice) as (client, _):
        inbox = await client.call_tool("inbox", {})
        assert not inbox.is_error, text_of(inbox)
        shown = inbox.structured_content["events"]  # type: ignore[index]
        assert [e["text"] for e in shown] == ["before", "after"]
        assert poisoned.event.id in text_of(inbox) and "stays pending" in text_of(inbox)
    statuses = [(await hub.get_event(p.event.id))[0].status for p in (before, poisoned, after)]
    assert statuses[0] is statuses[2] is EventStatus.DELIVERED
    assert statuses[1].is_open  # still owed to alice
