"""The entries an agent can subscribe to, and what a subscription to one of them takes.

``herald.event`` is every event addressed to the agent, narrowed by its arguments (type globs
and a sender); each event type the operator declares (``PUT /v1/event-types/{name}``) is an
entry too, the same subscription narrowed to that type, its payload described by the declared
schema.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from herald.errors import NotFound
from herald.hub import Hub
from herald.inputs.refusals import parse
from herald.inputs.schema import tool_schema
from herald.inputs.subscriptions import DeclaredTypeArguments, HeraldEventArguments
from herald.models import Event, EventMatch, EventType
from herald.times import iso_ms

HERALD_EVENT = "herald.event"
DELIVERY = ["poll", "push", "webhook"]
"""The modes herald serves each entry in (webhook where herald sends webhooks: ``herald
serve``)."""
PAGE_SIZE = 100


@dataclass(frozen=True)
class Subscription:
    """A resolved subscription: its entry, the agent's events it takes, and the key its polls
    lease events under (one per entry and arguments)."""

    name: str
    match: EventMatch
    key: str


def payload_schema(data_schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON Schema of an occurrence's ``data``: an event as its agent sees it."""
    return {
        "type": "object",
        "properties": {
            "type": {"type": "string", "description": "the event's type, e.g. dm.received"},
            "text": {"type": "string", "description": "what happened, for the agent to read"},
            "data": data_schema if data_schema is not None else {},
            "from": {
                "type": ["string", "null"],
                "description": "the handle of the agent that sent it, if an agent did",
            },
            "seq": {"type": "integer", "description": "its place among the agent's events"},
            "reply": {
                "type": "object",
                "description": "the form to answer it with (reply tool, or POST /channel/reply)",
            },
            "topic": {
                "type": "string",
                "description": "the topic it was published to, if it was (e.g. repo/herald)",
            },
        },
        "required": ["type", "text", "data", "from", "seq"],
    }


HERALD_EVENT_ENTRY: dict[str, Any] = {
    "name": HERALD_EVENT,
    "description": (
        "Every event addressed to you (direct messages, mentions, build results, questions that"
        " need an answer), oldest first; narrow it by type globs and by sender."
    ),
    "delivery": DELIVERY,
    "inputSchema": tool_schema(HeraldEventArguments),
    "payloadSchema": payload_schema(),
}


def declared_entry(event_type: EventType) -> dict[str, Any]:
    return {
        "name": event_type.name,
        "description": event_type.description,
        "delivery": DELIVERY,
        "inputSchema": tool_schema(DeclaredTypeArguments),
        "payloadSchema": payload_schema(event_type.payload_schema),
    }


async def page(hub: Hub, offset: int) -> tuple[list[dict[str, Any]], int | None]:
    """The entries from ``offset``, at most ``PAGE_SIZE``, and the offset of the next page."""
    entries = [HERALD_EVENT_ENTRY, *(declared_entry(t) for t in await hub.event_types.list())]
    end = offset + PAGE_SIZE
    return entries[offset:end], end if end < len(entries) else None


async def resolve(hub: Hub, name: str, arguments: dict[str, Any]) -> Subscription:
    """The subscription that ``name`` and ``arguments`` make.

    Raises:
        NotFound: no entry of that name.
        InvalidInput: arguments the entry does not take, named.
    """
    if name == HERALD_EVENT:
        args = parse(HeraldEventArguments, arguments)
        match = EventMatch(tuple(dict.fromkeys(args.types or ())), args.sender)
    else:
        try:
            await hub.event_types.get(name)
        except NotFound:
            raise NotFound(
                f"no entry {name!r} in the event catalogue: call events/list for the names"
            ) from None
        declared = parse(DeclaredTypeArguments, arguments)
        match = EventMatch((name,), declared.sender)
    identity = json.dumps([name, match.types, match.sender], separators=(",", ":"))
    return Subscription(name, match, "events:" + hashlib.sha256(identity.encode()).hexdigest()[:24])


def occurrence(event: Event, name: str) -> dict[str, Any]:
    """An event as an occurrence of entry ``name``: its id is herald's (the same whichever way
    it comes, so a client dedupes on it)."""
    data: dict[str, Any] = {
        "type": event.type,
        "text": event.text,
        "data": event.data,
        "from": event.sender,
        "seq": event.seq,
    }
    if event.reply_schema is not None:
        data["reply"] = event.reply_schema
    if event.topic is not None:
        data["topic"] = event.topic
    return {"eventId": event.id, "name": name, "timestamp": iso_ms(event.created_at), "data": data}
