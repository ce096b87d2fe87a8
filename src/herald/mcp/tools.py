"""herald's MCP tools: inbox, ack, history, reply, send_message, and topics, subscribe and
unsubscribe. They run against an
``AgentApi``: the hub itself (herald's own MCP server) or a hub over HTTP (the stdio bridge)."""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import mcp_types as types
import pydantic_core

from herald import answers, json_input
from herald.delivery import render
from herald.errors import HeraldError, InvalidInput
from herald.hub import Hub
from herald.inputs.agents import PreferencesToolInput
from herald.inputs.channel import (
    DEFAULT_MESSAGE_TYPE,
    AckInput,
    HistoryInput,
    InboxInput,
    ReplyInput,
    SendMessageInput,
)
from herald.inputs.refusals import Input, parse
from herald.inputs.schema import tool_schema
from herald.inputs.topics import TopicsInput, TopicSubscribeInput
from herald.models import (
    Acknowledged,
    Agent,
    Event,
    EventStatus,
    History,
    Published,
    Reply,
    TopicSubscription,
)

log = logging.getLogger("herald.mcp")


class AgentApi(Protocol):
    """What one agent may do with its events."""

    async def inbox(self, limit: int) -> list[Event]:
        """The next open events, held for this reader; ``ack`` delivers them once shown."""
        ...

    async def ack(self, ids: Sequence[str], cursor: int | str | None) -> Acknowledged: ...

    async def history(
        self, before: str | None, type: str | None, limit: int, topic: str | None = None
    ) -> History:
        """A page of the acknowledged events, newest first; reading it changes nothing."""
        ...

    async def reply(self, event_id: str, text: str, data: dict[str, Any] | None) -> Reply: ...

    async def send_message(
        self,
        to: str,
        text: str,
        data: dict[str, Any] | None,
        *,
        reply: dict[str, Any] | None = None,
        type: str = DEFAULT_MESSAGE_TYPE,
        deliver_at: datetime.datetime | None = None,
        delay_s: float | None = None,
        priority: str | None = None,
    ) -> Published: ...

    async def topics(self) -> list[TopicSubscription]:
        """The topics (names or globs) the agent is subscribed to."""
        ...

    async def subscribe(self, topic: str) -> list[TopicSubscription]:
        """Subscribe to a topic's name or a glob of names; returns every subscription."""
        ...

    async def unsubscribe(self, topic: str) -> None: ...

    async def preferences(self, new: dict[str, Any] | None) -> dict[str, Any]:
        """The agent's preferences; with ``new``, replaced by them first."""
        ...


class LocalApi:
    """An agent's operations on a hub in this process."""

    def __init__(self, hub: Hub, agent: Agent, session: str = "inbox") -> None:
        self.hub = hub
        self.agent = agent
        self.session = session

    async def inbox(self, limit: int) -> list[Event]:
        return await self.hub.inbox(self.agent, limit=limit, session=self.session)

    async def ack(self, ids: Sequence[str], cursor: int | str | None) -> Acknowledged:
        return await self.hub.ack(self.agent, ids=ids, cursor=cursor)

    async def history(
        self, before: str | None, type: str | None, limit: int, topic: str | None = None
    ) -> History:
        # The cursor read as GET /channel/history reads it (the tool hands it on as given,
        # which is what the stdio bridge sends the route).
        position = parse(HistoryInput, {"before": before}).before if before is not None else None
        return await self.hub.acknowledged_events(
            self.agent, before=position, type=type, topic=topic, limit=limit
        )

    async def reply(self, event_id: str, text: str, data: dict[str, Any] | None) -> Reply:
        return await self.hub.reply(self.agent, event_id, text, data)

    async def send_message(
        self,
        to: str,
        text: str,
        data: dict[str, Any] | None,
        *,
        reply: dict[str, Any] | None = None,
        type: str = DEFAULT_MESSAGE_TYPE,
        deliver_at: datetime.datetime | None = None,
        delay_s: float | None = None,
        priority: str | None = None,
    ) -> Published:
        return await self.hub.send_message(
            self.agent,
            to,
            text,
            data,
            reply=reply,
            type=type,
            deliver_at=deliver_at,
            delay_s=delay_s,
            priority=priority,
        )

    async def topics(self) -> list[TopicSubscription]:
        return await self.hub.topics.of_agent(self.agent.id)

    async def subscribe(self, topic: str) -> list[TopicSubscription]:
        await self.hub.topics.subscribe(self.agent.id, topic)
        return await self.hub.topics.of_agent(self.agent.id)

    async def unsubscribe(self, topic: str) -> None:
        await self.hub.topics.unsubscribe(self.agent.id, topic)

    async def preferences(self, new: dict[str, Any] | None) -> dict[str, Any]:
        if new is not None:
            agent = await self.hub.preferences.put(self.agent.id, new)
        else:
            agent = await self.hub.get_agent(self.agent.id)
        return dict(agent.to_json()["preferences"])


TOOLS = [
    types.Tool(
        name="inbox",
        description=(
            "Read your pending herald events, oldest first. Reading is delivery: the events "
            "returned are marked delivered. Call it when told events are waiting."
        ),
        input_schema=tool_schema(InboxInput),
    ),
    types.Tool(
        name="ack",
        description=(
            "Acknowledge herald events you have handled: by ids, or everything up to an event"
            " with the cursor herald gave with it (the cursor attribute of its notification)."
            " Unacknowledged events are sent again another way."
        ),
        input_schema=tool_schema(AckInput),
    ),
    types.Tool(
        name="history",
        description=(
            "Read herald events you have already acknowledged, newest first, a page at a time:"
            " pass the next of one answer as before to read on. Reading changes nothing."
        ),
        input_schema=tool_schema(HistoryInput),
    ),
    types.Tool(
        name="reply",
        description="Answer a herald event; the answer goes back to whoever sent it.",
        input_schema=tool_schema(ReplyInput),
    ),
    types.Tool(
        name="send_message",
        description=(
            "Send a message to another agent by its handle; with reply (a form schema), ask it"
            " for a structured answer. priority low: never pushed to it, read when it drains."
        ),
        input_schema=tool_schema(SendMessageInput),
    ),
    types.Tool(
        name="topics",
        description="List the herald topics you are subscribed to (names, or globs of names).",
        input_schema=tool_schema(TopicsInput),
    ),
    types.Tool(
        name="subscribe",
        description=(
            "Subscribe to a herald topic by its name, or to every topic a glob matches"
            " (repo/*): each event published to it from now on comes to you as your own."
        ),
        input_schema=tool_schema(TopicSubscribeInput),
    ),
    types.Tool(
        name="unsubscribe",
        description="Unsubscribe from a herald topic, named as you subscribed (a name or a glob).",
        input_schema=tool_schema(TopicSubscribeInput),
    ),
    types.Tool(
        name="preferences",
        description=(
            "Read your herald preferences, or replace them with set: muted is a list of event"
            " types (or globs such as ci.*) herald keeps for you but never pushes; read them"
            " with inbox. quiet_hours {zone, start, end} (such as Europe/Berlin, 22:00, 07:00):"
            " nothing but urgent is pushed meanwhile, then one herald.summary says what"
            " arrived. digests [{types, window_s}]: the first event of a burst of those types is"
            " pushed, the rest of the window come as one herald.summary at its end. Every event"
            " stays in your inbox, to read and acknowledge on its own."
        ),
        input_schema=tool_schema(PreferencesToolInput),
    ),
]
TOOL_INPUTS: dict[str, type[Input]] = {
    "inbox": InboxInput,
    "ack": AckInput,
    "history": HistoryInput,
    "reply": ReplyInput,
    "send_message": SendMessageInput,
    "topics": TopicsInput,
    "subscribe": TopicSubscribeInput,
    "unsubscribe": TopicSubscribeInput,
    "preferences": PreferencesToolInput,
}
"""The model each tool's arguments are checked with, and its input schema made from."""
TOOL_NAMES = frozenset(tool.name for tool in TOOLS)


async def call(
    api: AgentApi, name: str, arguments: dict[str, Any], held_back: Collection[str] = ()
) -> types.CallToolResult:
    """Run one of herald's tools. Bad arguments come back as a tool error that
    says what to fix; nothing is changed. The arguments arrive parsed by the ``mcp`` SDK, so
    they are checked here as an HTTP body is (``herald.json_input``), then by the tool's model
    (``TOOL_INPUTS``). ``inbox`` neither shows nor delivers the events ``held_back`` (forms just
    answered or left open: they stay pending)."""
    try:
        json_input.check(arguments, "arguments")
        return await _dispatch(api, name, arguments, held_back)
    except HeraldError as exc:
        return error(exc.message, exc.code, exc.details())


def error(
    message: str, code: str = "invalid_input", details: Mapping[str, object] | None = None
) -> types.CallToolResult:
    """A tool error: its text for the model, and herald's error shape as structured content."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)],
        structured_content={"error": {"code": code, "message": message, **(details or {})}},
        is_error=True,
    )


def text_result(text: str, structured: Mapping[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=dict(structured)
    )


async def _dispatch(
    api: AgentApi, name: str, args: dict[str, Any], held_back: Collection[str] = ()
) -> types.CallToolResult:
    if name not in TOOL_INPUTS:
        raise InvalidInput(f"unknown tool {name!r}; herald has {', '.join(sorted(TOOL_NAMES))}")
    checked = parse(TOOL_INPUTS[name], args)  # refused as the same body over HTTP would be
    if isinstance(checked, InboxInput):
        return await _inbox(api, checked.limit, held_back)
    if isinstance(checked, AckInput):
        acked = await api.ack(checked.ids or [], checked.cursor)
        return text_result(_acknowledged(acked, checked.cursor), acked.to_json())
    if isinstance(checked, HistoryInput):
        before = args.get("before")  # as given: the API reads it as the route does
        page = await api.history(before, checked.type, checked.limit, checked.topic)
        return _history(page)
    if isinstance(checked, ReplyInput):
        reply = await api.reply(checked.event_id, checked.text, checked.data)
        where = "to the agent that sent it" if reply.routed_event_id else "to the application"
        return text_result(f"Reply sent {where}.", reply.to_json())
    if isinstance(checked, TopicsInput):
        return _subscriptions(await api.topics())
    if isinstance(checked, TopicSubscribeInput):
        if name == "unsubscribe":
            await api.unsubscribe(checked.topic)
            return _subscriptions(await api.topics(), f"Unsubscribed from {checked.topic}.")
        subscribed = await api.subscribe(checked.topic)
        return _subscriptions(subscribed, f"Subscribed to {checked.topic}.")
    if isinstance(checked, PreferencesToolInput):
        new = checked.set.model_dump(exclude_unset=True) if checked.set is not None else None
        current = await api.preferences(new)
        said = "Preferences replaced" if new is not None else "Your preferences"
        return text_result(f"{said}: {json.dumps(current)}", current)
    assert isinstance(checked, SendMessageInput)
    published = await api.send_message(
        checked.to,
        checked.text,
        checked.data,
        reply=checked.reply,
        type=checked.type,
        deliver_at=checked.deliver_at,
        delay_s=checked.delay_s,
        priority=checked.priority,
    )
    scheduled = checked.deliver_at is not None or checked.delay_s is not None
    return text_result(
        f"Message {'scheduled' if scheduled else 'sent'} to @{checked.to}.",
        {"id": published.event.id, "seq": published.event.seq},
    )


def _subscriptions(listed: list[TopicSubscription], done: str = "") -> types.CallToolResult:
    """The agent's subscriptions, after what was just ``done``."""
    said = ", ".join(s.pattern for s in listed) or "none"
    text = f"{done} Your topics: {said}.".lstrip()
    answer: answers.TopicSubscriptions = {"subscriptions": [s.to_json() for s in listed]}
    return text_result(text, answer)


def _acknowledged(acked: Acknowledged, cursor: int | str | None) -> str:
    """What an ``ack`` did, and why a cursor acknowledged nothing it might have been meant to."""
    text = f"Acknowledged {acked.count} event(s)."
    if acked.truncated:
        text += (
            " The cursor is from before herald's store was restored: it acknowledged nothing."
            " Acknowledge by event ids, or with the cursor of a notification received since."
        )
    elif isinstance(cursor, int) and not acked.count:
        text += (
            " A bare seq acknowledges only what a drain handed out: acknowledge pushed events"
            " with the cursor of their notification, or by event ids."
        )
    return text


def _history(page: History) -> types.CallToolResult:
    """The page for the model, each event as a line with its id, then where to read on (the
    whole events are in the structured content). One that cannot be shown is named instead,
    as ``inbox`` does, so that the answer can still be sent."""
    texts: list[str] = []
    views: list[answers.Event] = []
    for event in page.events:
        try:
            view = event.to_json()
            pydantic_core.to_json(view)  # what the SDK does to the answer, event by event
        except (ValueError, RecursionError) as exc:
            texts.append(
                f"Event {event.id} (seq {event.seq}) cannot be shown here ({exc}): read it with"
                f" GET /v1/events/{event.id}."
            )
            continue
        views.append(view)
        texts.append(f"{render.headline(event)}\n(event {event.id}, seq {event.seq})")
    if page.next is not None:
        texts.append(f"Older ones may follow: call history with before={page.next}.")
    text = "\n\n".join(texts) if texts else "No acknowledged events."
    return text_result(text, {"events": views, "next": page.next})


async def _inbox(
    api: AgentApi, limit: int, held_back: Collection[str] = ()
) -> types.CallToolResult:
    """Reading is delivery, but only once the answer is built: the events are held while it is,
    and only those it shows are acknowledged. One that cannot be shown stays pending."""
    events = [event for event in await api.inbox(limit) if event.id not in held_back]
    if not events:
        return text_result("No pending events.", {"events": [], "cursor": None})
    shown: list[tuple[Event, str, answers.Event]] = []
    notes: list[str] = []
    for event in events:
        try:
            view = replace(event, status=EventStatus.DELIVERED).to_json()  # once acknowledged
            pydantic_core.to_json(view)  # what the SDK does to the answer, event by event
            shown.append((event, render.as_text(event), view))
        except (ValueError, RecursionError) as exc:
            log.warning("inbox cannot show event %s (seq %s): %s", event.id, event.seq, exc)
            notes.append(
                f"Event {event.id} (seq {event.seq}) cannot be shown here ({exc}); it stays"
                f" pending: read it with GET /v1/events/{event.id}."
            )
    if shown:
        await api.ack([event.id for event, _, _ in shown], None)
    text = "\n\n".join([text for _, text, _ in shown] + notes)
    views = [view for _, _, view in shown]
    return text_result(text, {"events": views, "cursor": shown[-1][0].seq if shown else None})
