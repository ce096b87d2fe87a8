"""herald's MCP tools as a client sees them: the input schema each advertises is made from the
model its arguments are checked with, and send_message takes what POST /channel/send takes."""

from __future__ import annotations

import json

import mcp_types as types
import pytest

from herald import Hub
from herald.delivery.engine import Notifier
from herald.inputs.schema import tool_schema
from herald.mcp.tools import TOOL_INPUTS
from herald.testing import ManualClock
from tests.mcp.conftest import connect

pytestmark = pytest.mark.anyio


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_each_tool_advertises_the_schema_of_the_model_that_checks_it(
    hub: Hub, notifier: Notifier
) -> None:
    alice, _ = await hub.create_agent("alice")
    async with connect(notifier, alice) as (client, _):
        advertised = {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}
    assert set(advertised) == set(TOOL_INPUTS)
    for name, schema in advertised.items():
        assert schema == tool_schema(TOOL_INPUTS[name]), name
        assert schema["type"] == "object" and schema["additionalProperties"] is False, name
        text = json.dumps(schema)
        assert "$ref" not in text and "$defs" not in text and '"null"' not in text, name
    assert set(advertised["send_message"]["properties"]) == {
        "to",
        "text",
        "data",
        "reply",
        "type",
        "deliver_at",
        "delay_s",
        "priority",
    }


async def test_send_message_takes_a_type_and_a_reply_form(hub: Hub, notifier: Notifier) -> None:
    alice, _ = await hub.create_agent("alice")
    bob, _ = await hub.create_agent("bob")
    form = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    async with connect(notifier, alice) as (client, _):
        arguments = {"to": "bob", "text": "ship it?", "type": "release.asked", "reply": form}
        sent = await client.call_tool("send_message", arguments)
        assert not sent.is_error, text_of(sent)
        plain = await client.call_tool("send_message", {"to": "bob", "text": "hi"})
        assert not plain.is_error, text_of(plain)
    asked, hello = (await hub.drain(bob, cursor=0)).events
    assert (asked.type, asked.sender, asked.reply_schema) == ("release.asked", "alice", form)
    assert (hello.type, hello.reply_schema) == ("message.received", None)


async def test_send_message_schedules_a_message_for_later(
    hub: Hub, notifier: Notifier, clock: ManualClock
) -> None:
    alice, _ = await hub.create_agent("alice")
    bob, _ = await hub.create_agent("bob")
    async with connect(notifier, alice) as (client, _):
        later = await client.call_tool("send_message", {"to": "bob", "text": "hi", "delay_s": 60})
        assert not later.is_error and text_of(later) == "Message scheduled to @bob.", text_of(later)
        both = {"to": "bob", "text": "hi", "delay_s": 60, "deliver_at": "2099-01-01T00:00:00Z"}
        refused = await client.call_tool("send_message", both)
        assert refused.is_error and "not both" in text_of(refused)
    assert (await hub.drain(bob, cursor=0)).events == []
    clock.advance(60)
    (released,) = await hub.release_due()
    assert (released.sender, released.seq) == ("alice", 1)
    assert [e.id for e in (await hub.drain(bob, cursor=0)).events] == [released.id]


async def test_send_message_with_priority_low_is_not_pushed_to_the_other_agent_but_kept(
    hub: Hub, notifier: Notifier
) -> None:
    alice, _ = await hub.create_agent("alice")
    bob, _ = await hub.create_agent("bob")
    async with connect(notifier, alice) as (client, _), connect(notifier, bob) as (_, received):
        quiet = {"to": "bob", "text": "by the way", "priority": "low"}
        assert not (await client.call_tool("send_message", quiet)).is_error
        loud = {"to": "bob", "text": "look now", "priority": "urgent"}
        assert not (await client.call_tool("send_message", loud)).is_error
        wrong = await client.call_tool("send_message", {"to": "bob", "text": "x", "priority": "!"})
        assert wrong.is_error and "message.priority must be one of low" in text_of(wrong)
        # Offered in seq order: had the low one been pushed, it would have come first.
        _, pushed = await received.next()
        assert "look now" in json.dumps(pushed) and "by the way" not in json.dumps(pushed)
    drained = (await hub.drain(bob, cursor=0)).events
    assert [(e.text, e.priority.value) for e in drained] == [
        ("by the way", "low"),
        ("look now", "urgent"),
    ]


@pytest.mark.parametrize("kind", ["reply.received", "permission.request", "HERALD.backlog"])
async def test_send_message_refuses_the_types_only_herald_sends(
    hub: Hub, notifier: Notifier, kind: str
) -> None:
    alice, _ = await hub.create_agent("alice")
    bob, _ = await hub.create_agent("bob")
    async with connect(notifier, alice) as (client, _):
        refused = await client.call_tool("send_message", {"to": "bob", "text": "x", "type": kind})
    assert refused.is_error and "message.type" in text_of(refused)
    assert "reserved" in text_of(refused)
    assert (await hub.drain(bob, cursor=0)).events == []


async def test_an_agent_subscribes_with_the_tool_and_a_topic_publish_comes_to_its_inbox(
    hub: Hub, notifier: Notifier
) -> None:
    alice, _ = await hub.create_agent("alice")
    await hub.create_agent("bob")
    await hub.topics.put("repo/herald", "pushes to herald")
    async with connect(notifier, alice) as (client, _):
        subscribed = await client.call_tool("subscribe", {"topic": "repo/*"})
        assert not subscribed.is_error, text_of(subscribed)
        assert "Subscribed to repo/*" in text_of(subscribed)
        listed = await client.call_tool("topics", {})
        assert listed.structured_content is not None
        assert [s["topic"] for s in listed.structured_content["subscriptions"]] == ["repo/*"]
        (published,) = await hub.publish_topic("repo/herald", "repo.pushed", "a push")
        inbox = await client.call_tool("inbox", {})
        assert inbox.structured_content is not None
        assert [e["id"] for e in inbox.structured_content["events"]] == [published.event.id]
        gone = await client.call_tool("unsubscribe", {"topic": "repo/*"})
        assert "Your topics: none" in text_of(gone)
        assert await hub.publish_topic("repo/herald", "repo.pushed", "another") == []
        refused = await client.call_tool("subscribe", {"topic": "repo/never"})
        assert refused.is_error and "no topic is named 'repo/never'" in text_of(refused)
        bad = await client.call_tool("subscribe", {"topic": "a b"})
        assert bad.is_error and "subscription.topic must be" in text_of(bad)
