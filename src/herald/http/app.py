"""The Starlette application that ``herald serve`` runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import herald
from herald.delivery.engine import Notifier
from herald.errors import HeraldError, InvalidInput
from herald.http.auth import admin_or_agent, require_admin, require_agent
from herald.http.endpoints import endpoint_routes, with_warning
from herald.http.fanout import Fanout
from herald.http.io import (
    AnswerUnexpectedErrors,
    herald_error,
    http_error,
    json_response,
    read_json,
    strict_object,
)
from herald.http.limits import ADMIN, KeyLimits, Limits
from herald.http.mcp import McpEndpoint
from herald.http.stream import StreamEndpoint
from herald.hub import Hub
from herald.reserved import PERMISSION_FIELDS
from herald.validation import parse_batch, parse_new_event
from herald.webhooks import manage
from herald.webhooks.addresses import AddressGuard
from herald.webhooks.worker import WebhookWorker

MAX_ACK_IDS = 1000


def create_app(
    hub: Hub,
    *,
    notifier: Notifier | None = None,
    fanout: Fanout | None = None,
    webhooks: WebhookWorker | None = None,
    maintenance: bool = True,
    limits: KeyLimits | None = None,
) -> Starlette:
    """The HTTP API and the ``/mcp`` endpoint over an opened hub. With ``maintenance``, expiry
    and pruning run in the background for as long as the app does. ``limits`` are what each
    key may hold or do at once (the defaults of ``KeyLimits`` when not given)."""
    notifier = notifier or Notifier(hub)
    per_key = Limits(limits)
    mcp = McpEndpoint(
        notifier, sessions_per_key=per_key.config.sessions, publish_check=per_key.publish.take
    )
    fanout = fanout or Fanout(hub)
    guard = webhooks.sender.guard if webhooks is not None else AddressGuard()

    async def healthz(request: Request) -> Response:
        return json_response({"status": "ok", "version": herald.__version__})

    async def readyz(request: Request) -> Response:
        await hub.check_ready()
        return json_response({"status": "ready"})

    async def create_agent(request: Request) -> Response:
        await require_admin(hub, request)
        body = strict_object(
            await read_json(request), {"handle", "webhook_url", "delivery"}, "agent"
        )
        handle = body.get("handle")
        if not isinstance(handle, str):
            raise InvalidInput("agent.handle is required: 1-64 characters of a-z, 0-9, _ and -")
        url = body.get("webhook_url")
        warning = await manage.admit(guard, url, "webhook_url") if url is not None else None
        agent, key = await hub.create_agent(handle, delivery=body.get("delivery"))
        if url is None:
            return json_response({**agent.to_json(), "api_key": key}, 201)
        webhook, secret = await manage.set_webhook(hub, agent.id, url)
        webhook_json = with_warning({**webhook.to_json(), "secret": secret}, warning)
        agent = await hub.get_agent(agent.id)
        return json_response({**agent.to_json(), "api_key": key, "webhook": webhook_json}, 201)

    async def list_agents(request: Request) -> Response:
        await require_admin(hub, request)
        return json_response({"agents": [agent.to_json() for agent in await hub.list_agents()]})

    async def get_agent(request: Request) -> Response:
        await require_admin(hub, request)
        return json_response((await hub.get_agent(request.path_params["agent_id"])).to_json())

    async def delete_agent(request: Request) -> Response:
        await require_admin(hub, request)
        await hub.delete_agent(request.path_params["agent_id"])
        return Response(status_code=204)

    async def publish(request: Request) -> Response:
        await require_admin(hub, request)
        body = await read_json(request)
        if isinstance(body, list):
            batch = parse_batch(body)
            per_key.publish.take(ADMIN, len(batch))
            results = await hub.publish_many(batch)
            status = 202 if any(r.created for r in results) else 200
            return json_response(
                {"events": [_receipt(r.event.id, r.event.seq, r.created) for r in results]}, status
            )
        event = parse_new_event(body)
        per_key.publish.take(ADMIN, 1)
        (published,) = await hub.publish_many([event])
        receipt = _receipt(published.event.id, published.event.seq, published.created)
        return json_response(receipt, 202 if published.created else 200)

    async def get_event(request: Request) -> Response:
        viewer = await admin_or_agent(hub, request)
        event, attempts = await hub.get_event(request.path_params["event_id"], viewer=viewer)
        replies = await hub.replies(event.id)
        return json_response(
            {
                **event.to_json(),
                "attempts": [a.to_json() for a in attempts],
                "replies": [r.to_json() for r in replies],
            }
        )

    async def heartbeat(request: Request) -> Response:
        agent = await require_agent(hub, request)
        body = strict_object(
            await read_json(request, optional=True) or {},
            {"cursor", "limit", "consumer"},
            "heartbeat",
        )
        if "cursor" in body and body["cursor"] is None:
            # Most likely a client's unset cursor: drained at most once, a crash would lose
            # the events. Leaving the field out says that on purpose.
            raise InvalidInput(
                "heartbeat.cursor is null: send 0 (or the cursor you got) to acknowledge what"
                " you handled, or leave cursor out to drain at most once"
            )
        drained = await hub.heartbeat(
            agent,
            cursor=_optional_int(body, "cursor", 0, 2**62),
            limit=_optional_int(body, "limit", 1, 100) or 20,
            consumer=_optional_consumer(body),
        )
        return json_response(
            {"events": [e.to_json() for e in drained.events], "cursor": drained.cursor}
        )

    async def ack(request: Request) -> Response:
        agent = await require_agent(hub, request)
        body = strict_object(await read_json(request), {"cursor", "ids", "consumer"}, "ack")
        cursor = _optional_int(body, "cursor", 0, 2**62)
        ids = body.get("ids", [])
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise InvalidInput("ack.ids must be a list of event ids")
        if len(ids) > MAX_ACK_IDS:
            raise InvalidInput(
                f"ack.ids holds at most {MAX_ACK_IDS} ids; ack up to a cursor instead"
            )
        if cursor is None and not ids:
            raise InvalidInput("ack needs a cursor (everything up to it) or ids")
        acked = await hub.ack(agent, ids=ids, cursor=cursor, consumer=_optional_consumer(body))
        return json_response({"acked": acked})

    async def agent_sessions(request: Request) -> Response:
        await require_admin(hub, request)
        agent = await hub.get_agent(request.path_params["agent_id"])
        sessions = [s.to_json() for s in notifier.sessions_of(agent.id)]
        return json_response({"sessions": sessions})

    async def set_delivery(request: Request) -> Response:
        await require_admin(hub, request)
        body = strict_object(await read_json(request), {"delivery"}, "agent")
        agent = await hub.set_delivery(request.path_params["agent_id"], body.get("delivery"))
        return json_response(agent.to_json())

    async def reply(request: Request) -> Response:
        agent = await require_agent(hub, request)
        body = strict_object(await read_json(request), {"event_id", "text", "data"}, "reply")
        event_id, text = body.get("event_id"), body.get("text")
        if not isinstance(event_id, str) or not isinstance(text, str) or not text:
            raise InvalidInput("reply needs event_id and a non-empty text")
        data = body.get("data")
        if data is not None and not isinstance(data, dict):
            raise InvalidInput("reply.data must be an object when given")
        per_key.publish.take(agent.id, 1)
        return json_response((await hub.reply(agent, event_id, text, data)).to_json(), 201)

    async def send_message(request: Request) -> Response:
        agent = await require_agent(hub, request)
        body = strict_object(
            await read_json(request), {"to", "text", "data", "reply", "type"}, "message"
        )
        to, text, data = body.get("to"), body.get("text"), body.get("data")
        if not isinstance(to, str) or not isinstance(text, str):
            raise InvalidInput("a message needs to (an agent's handle) and text")
        if data is not None and not isinstance(data, dict):
            raise InvalidInput("message.data must be an object when given")
        kind = body.get("type", "message.received")
        if not isinstance(kind, str):
            raise InvalidInput("message.type must be a string such as message.received")
        per_key.publish.take(agent.id, 1)
        published = await hub.send_message(
            agent, to, text, data, reply=body.get("reply"), type=kind
        )
        return json_response(published.event.to_json(), 202)

    async def ask_permission(request: Request) -> Response:
        agent = await require_agent(hub, request)
        body = strict_object(await read_json(request), set(PERMISSION_FIELDS), "permission")
        per_key.publish.take(agent.id, 1)
        published = await hub.ask_permission(
            agent,
            body.get("to", ""),  # the hub checks every field
            request_id=body.get("request_id", ""),
            tool_name=body.get("tool_name", ""),
            description=body.get("description", ""),
            input_preview=body.get("input_preview", ""),
        )
        return json_response(published.event.to_json(), 202)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(mcp.running())
            if maintenance:
                await stack.enter_async_context(hub.maintenance())
            if webhooks is not None:
                await stack.enter_async_context(_running(webhooks.run()))
            try:
                yield
            finally:
                await fanout.close()
                await notifier.close()

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/v1/agents", create_agent, methods=["POST"]),
        Route("/v1/agents", list_agents, methods=["GET"]),
        Route("/v1/agents/{agent_id}", get_agent, methods=["GET"]),
        Route("/v1/agents/{agent_id}", delete_agent, methods=["DELETE"]),
        Route("/v1/agents/{agent_id}", set_delivery, methods=["PATCH"]),
        Route("/v1/agents/{agent_id}/sessions", agent_sessions, methods=["GET"]),
        Route("/v1/events", publish, methods=["POST"]),
        Route("/v1/events/{event_id}", get_event, methods=["GET"]),
        Route("/channel/heartbeat", heartbeat, methods=["POST"]),
        Route("/channel/ack", ack, methods=["POST"]),
        Route("/channel/reply", reply, methods=["POST"]),
        Route("/channel/send", send_message, methods=["POST"]),
        Route("/channel/permission", ask_permission, methods=["POST"]),
        Route("/channel/stream", StreamEndpoint(hub, fanout, per_key.streams), methods=["GET"]),
        Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]),
        *endpoint_routes(hub, guard),
    ]
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(AnswerUnexpectedErrors)],
        exception_handlers={HeraldError: herald_error, HTTPException: http_error},
    )


@contextlib.asynccontextmanager
async def _running(work: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    task = asyncio.create_task(work)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _receipt(event_id: str, seq: int, created: bool) -> dict[str, Any]:
    return {"id": event_id, "seq": seq, "duplicate": not created}


def _optional_int(body: dict[str, Any], name: str, low: int, high: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{name} must be an integer from {low} to {high}")
    return value


def _optional_consumer(body: dict[str, Any]) -> str | None:
    value = body.get("consumer")
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= 128:
        raise InvalidInput("consumer must be a string of 1-128 characters naming the drainer")
    return value
