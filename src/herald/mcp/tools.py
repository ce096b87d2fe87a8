"""herald's MCP tools: inbox, ack, reply, send_message. They run against an ``AgentApi``: the
hub itself (herald's own MCP server) or a hub over HTTP (the stdio bridge)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

import mcp_types as types
import pydantic_core

from herald import json_input
from herald.delivery import render
from herald.errors import HeraldError, InvalidInput
from herald.hub import Hub
from herald.models import Agent, Event, EventStatus, Published, Reply

log = logging.getLogger("herald.mcp")


class AgentApi(Protocol):
    """What one agent may do with its events."""

    async def inbox(self, limit: int) -> list[Event]:
        """The next open events, held for this reader; ``ack`` delivers them once shown."""
        ...

    async def ack(self, ids: Sequence[str], cursor: int | None) -> int: ...

    async def reply(self, event_id: str, text: str, data: dict[str, Any] | None) -> Reply: ...

    async def send_message(self, to: str, text: str, data: dict[str, Any] | None) -> Published: ...


class LocalApi:
    """An agent's operations on a hub in this process."""

    def __init__(self, hub: Hub, agent: Agent, session: str = "inbox") -> None:
        self.hub = hub
        self.agent = agent
        self.session = session

    async def inbox(self, limit: int) -> list[Event]:
        return await self.hub.inbox(self.agent, limit=limit, session=self.session)

    async def ack(self, ids: Sequence[str], cursor: int | None) -> int:
        return await self.hub.ack(self.agent, ids=ids, cursor=cursor)

    async def reply(self, event_id: str, text: str, data: dict[str, Any] | None) -> Reply:
        return await self.hub.reply(self.agent, event_id, text, data)

    async def send_message(self, to: str, text: str, data: dict[str, Any] | None) -> Published:
        return await self.hub.send_message(self.agent, to, text, data)


_EVENT_ID = {"type": "string", "description": "an event id, as in event_id=... of a notification"}

TOOLS = [
    types.Tool(
        name="inbox",
        description=(
            "Read your pending herald events, oldest first. Reading is delivery: the events "
            "returned are marked delivered. Call it when told events are waiting."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}
            },
            "additionalProperties": False,
        },
    ),
    types.Tool(
        name="ack",
        description=(
            "Acknowledge herald events you have handled, by ids or everything up to a seq "
            "(cursor). Unacknowledged events are sent again another way."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "ids": {"type": "array", "items": _EVENT_ID, "maxItems": 1000},
                "cursor": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "ack every event up to this seq",
                },
            },
            "additionalProperties": False,
        },
    ),
    types.Tool(
        name="reply",
        description="Answer a herald event; the answer goes back to whoever sent it.",
        input_schema={
            "type": "object",
            "properties": {
                "event_id": _EVENT_ID,
                "text": {"type": "string", "minLength": 1},
                "data": {
                    "type": "object",
                    "description": "structured answer, if the event asked for one",
                },
            },
            "required": ["event_id", "text"],
            "additionalProperties": False,
        },
    ),
    types.Tool(
        name="send_message",
        description="Send a message to another agent by its handle.",
        input_schema={
            "type": "object",
            "properties": {
                "to": {"type": "string", "description": "the other agent's handle"},
                "text": {"type": "string", "minLength": 1},
                "data": {"type": "object"},
            },
            "required": ["to", "text"],
            "additionalProperties": False,
        },
    ),
]
TOOL_NAMES = frozenset(tool.name for tool in TOOLS)


async def call(api: AgentApi, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    """Run one of herald's tools. Bad arguments come back as a tool error that
    says what to fix; nothing is changed. The arguments arrive parsed by the ``mcp`` SDK, so
    they are checked here as an HTTP body is (``herald.json_input``)."""
    try:
        json_input.check(arguments, "arguments")
        return await _dispatch(api, name, arguments)
    except HeraldError as exc:
        return error(exc.message, exc.code)


def error(message: str, code: str = "invalid_input") -> types.CallToolResult:
    """A tool error: its text for the model, and herald's error shape as structured content."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)],
        structured_content={"error": {"code": code, "message": message}},
        is_error=True,
    )


def text_result(text: str, structured: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured
    )


async def _dispatch(api: AgentApi, name: str, args: dict[str, Any]) -> types.CallToolResult:
    if name == "inbox":
        _only(args, {"limit"}, name)
        limit = _int(args, "limit", 1, 100, 20)
        return await _inbox(api, limit or 20)
    if name == "ack":
        _only(args, {"ids", "cursor"}, name)
        ids = args.get("ids") or []
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or len(ids) > 1000:
            raise InvalidInput("ids must be a list of at most 1000 event ids")
        cursor = _int(args, "cursor", 0, 2**62, None)
        if cursor is None and not ids:
            raise InvalidInput("give ids or a cursor (every event up to that seq)")
        acked = await api.ack(ids, cursor)
        return text_result(f"Acknowledged {acked} event(s).", {"acked": acked})
    if name == "reply":
        _only(args, {"event_id", "text", "data"}, name)
        event_id, text = _str(args, "event_id"), _str(args, "text")
        reply = await api.reply(event_id, text, _object(args, "data"))
        where = "to the agent that sent it" if reply.routed_event_id else "to the application"
        return text_result(f"Reply sent {where}.", reply.to_json())
    if name == "send_message":
        _only(args, {"to", "text", "data"}, name)
        published = await api.send_message(
            _str(args, "to"), _str(args, "text"), _object(args, "data")
        )
        return text_result(
            f"Message sent to @{args['to']}.",
            {"id": published.event.id, "seq": published.event.seq},
        )
    raise InvalidInput(f"unknown tool {name!r}; herald has {', '.join(sorted(TOOL_NAMES))}")


async def _inbox(api: AgentApi, limit: int) -> types.CallToolResult:
    """Reading is delivery, but only once the answer is built: the events are held while it is,
    and only those it shows are acknowledged. One that cannot be shown stays pending."""
    events = await api.inbox(limit)
    if not events:
        return text_result("No pending events.", {"events": [], "cursor": None})
    shown: list[tuple[Event, str, dict[str, Any]]] = []
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


def _only(args: dict[str, Any], allowed: set[str], tool: str) -> None:
    unknown = sorted(set(args) - allowed)
    if unknown:
        takes = ", ".join(sorted(allowed))
        raise InvalidInput(f"{tool} takes no argument(s) {', '.join(unknown)}; it takes {takes}")


def _str(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{name} is required and must be a non-empty string")
    return value


def _int(args: dict[str, Any], name: str, low: int, high: int, default: int | None) -> int | None:
    value = args.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{name} must be an integer from {low} to {high}")
    return value


def _object(args: dict[str, Any], name: str) -> dict[str, Any] | None:
    value = args.get(name)
    if value is not None and not isinstance(value, dict):
        raise InvalidInput(f"{name} must be an object when given")
    return value
