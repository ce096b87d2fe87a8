"""An agent's own routes: drain (heartbeat), acknowledge, read back what it acknowledged, reply,
write to another agent, relay a permission prompt. Each body (or query) is the model an MCP tool
takes for the same thing."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald import answers
from herald.http.auth import require_agent
from herald.http.described import AGENT_ONLY, described
from herald.http.io import json_response, read_json
from herald.http.services import services
from herald.inputs.agents import PreferencesInput
from herald.inputs.channel import (
    ChannelAckInput,
    HeartbeatInput,
    HistoryQuery,
    PermissionInput,
    ReplyInput,
    SendMessageInput,
)
from herald.inputs.refusals import parse


@described(
    "Drain the agent's next events",
    keys=AGENT_ONLY,
    body=HeartbeatInput,
    body_required=False,
    answers={200: answers.Drained},
    description=(
        "With cursor, acknowledges what this consumer was handed up to it, then leases the"
        " consumer the next pending events, oldest first (sending the same cursor again gets"
        " the same events). Without cursor, the events handed back are delivered at once: at"
        " most once."
    ),
)
async def heartbeat(request: Request) -> Response:
    hub = services(request).hub
    agent = await require_agent(hub, request)
    body = parse(HeartbeatInput, await read_json(request, if_empty={}))
    drained = await hub.drain(agent, cursor=body.cursor, limit=body.limit, consumer=body.consumer)
    answer: answers.Drained = {
        "events": [e.to_json() for e in drained.events],
        "cursor": drained.cursor,
    }
    return json_response(answer)


@described(
    "Acknowledge events",
    keys=AGENT_ONLY,
    body=ChannelAckInput,
    answers={200: answers.Acked},
    description=(
        "By id, or every event up to a cursor. The cursor herald gave with an event (the id of"
        " a GET /channel/stream event, the cursor of an MCP push) acknowledges it and every"
        " event before it that was pushed, or handed to this consumer; one given before a"
        " restore of the store acknowledges nothing and the answer says truncated: true. A bare"
        " seq (a heartbeat's cursor) acknowledges only what a heartbeat drain handed out: to"
        " consumer, or to the drain that named none."
    ),
)
async def ack(request: Request) -> Response:
    hub = services(request).hub
    agent = await require_agent(hub, request)
    body = parse(ChannelAckInput, await read_json(request))
    acked = await hub.ack(agent, ids=body.ids or [], cursor=body.cursor, consumer=body.consumer)
    return json_response(acked.to_json())


@described(
    "Read the agent's acknowledged events",
    keys=AGENT_ONLY,
    query=HistoryQuery,
    answers={200: answers.EventPage},
    description=(
        "The agent's own acknowledged (delivered) events that retention still keeps, newest"
        " first, a page at a time, as GET /v1/events pages them: before takes the next of the"
        " page before (an opaque cursor, not a seq or an event id; null next: the last page),"
        " type an event type or a glob of one, topic the topic events were published to or a"
        " glob of topics (direct events have none). A page looks through a bounded number of events"
        " (herald serve --scan-events): it may be short, even empty, and still have a next."
        " Reading changes nothing: no event is leased, acknowledged or attempted."
    ),
)
async def history(request: Request) -> Response:
    hub = services(request).hub
    agent = await require_agent(hub, request)
    asked = parse(HistoryQuery, dict(request.query_params))
    page = await hub.acknowledged_events(
        agent, before=asked.before, type=asked.type, topic=asked.topic, limit=asked.limit
    )
    return json_response(page.to_json())


@described(
    "Answer an event",
    keys=AGENT_ONLY,
    body=ReplyInput,
    answers={201: answers.Reply},
    errors=(404, 429),
    description=(
        "The reply goes to the event's sender (an agent gets it as an event), and answering"
        " the event acknowledges it. With a reply form, data must fill it in."
    ),
)
async def reply(request: Request) -> Response:
    hub, limits = services(request).hub, services(request).limits
    agent = await require_agent(hub, request)
    body = parse(ReplyInput, await read_json(request))
    limits.publish.take(agent.id, 1)
    return json_response(
        (await hub.reply(agent, body.event_id, body.text, body.data)).to_json(), 201
    )


@described(
    "Write to another agent",
    keys=AGENT_ONLY,
    body=SendMessageInput,
    answers={202: answers.Event},
    errors=(404, 429),
)
async def send_message(request: Request) -> Response:
    hub, limits = services(request).hub, services(request).limits
    agent = await require_agent(hub, request)
    body = parse(SendMessageInput, await read_json(request))
    limits.publish.take(agent.id, 1)
    published = await hub.send_message(
        agent,
        body.to,
        body.text,
        body.data,
        reply=body.reply,
        type=body.type,
        deliver_at=body.deliver_at,
        delay_s=body.delay_s,
        priority=body.priority,
    )
    return json_response(published.event.to_json(), 202)


@described(
    "Relay a permission prompt to another agent",
    keys=AGENT_ONLY,
    body=PermissionInput,
    answers={202: answers.Event},
    errors=(404, 429),
    description="A Claude Code permission prompt, for the agent named by to to allow or deny.",
)
async def ask_permission(request: Request) -> Response:
    hub, limits = services(request).hub, services(request).limits
    agent = await require_agent(hub, request)
    body = parse(PermissionInput, await read_json(request))
    limits.publish.take(agent.id, 1)
    published = await hub.ask_permission(
        agent,
        body.to,
        request_id=body.request_id,
        tool_name=body.tool_name,
        description=body.description,
        input_preview=body.input_preview,
    )
    return json_response(published.event.to_json(), 202)


@described(
    "Read the agent's preferences",
    keys=AGENT_ONLY,
    answers={200: answers.AgentPreferences},
    description="Its own rules for what is pushed to it, as it or the operator set them.",
)
async def preferences(request: Request) -> Response:
    hub = services(request).hub
    agent = await require_agent(hub, request)
    current = await hub.get_agent(agent.id)  # the key's record may be a second old
    return json_response(current.to_json()["preferences"])


@described(
    "Replace the agent's preferences",
    keys=AGENT_ONLY,
    body=PreferencesInput,
    answers={200: answers.AgentPreferences},
    description=(
        "Muted event types (globs) are kept and drained, never pushed. In quiet hours (an IANA"
        " zone, start and end) only urgent events are pushed, then one herald.summary event"
        " says what arrived; a digest pushes the first event of a burst of its types and sums"
        " up the rest of its window in one herald.summary. Held events stay in the inbox. The"
        " body replaces the preferences whole: a key left out is no rule."
    ),
)
async def set_preferences(request: Request) -> Response:
    hub = services(request).hub
    agent = await require_agent(hub, request)
    changed = await hub.preferences.put(agent.id, await read_json(request))
    return json_response(changed.to_json()["preferences"])


ROUTES = [
    Route("/channel/preferences", preferences, methods=["GET"]),
    Route("/channel/preferences", set_preferences, methods=["PUT"]),
    Route("/channel/heartbeat", heartbeat, methods=["POST"]),
    Route("/channel/ack", ack, methods=["POST"]),
    Route("/channel/history", history, methods=["GET"]),
    Route("/channel/reply", reply, methods=["POST"]),
    Route("/channel/send", send_message, methods=["POST"]),
    Route("/channel/permission", ask_permission, methods=["POST"]),
]
