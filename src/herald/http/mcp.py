"""herald's MCP endpoint over streamable HTTP: agent keys, sessions, and knowing when a
session's stream is open (a push sent while it is closed would be dropped by the transport)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.jsonrpc import INVALID_REQUEST, JSONRPCError, JSONRPCMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herald import json_input
from herald.config import DEFAULTS, EventsConfig, SubscriptionConfig
from herald.delivery.engine import Notifier
from herald.delivery.fanout import Fanout
from herald.errors import HeraldError, RateLimited
from herald.http.auth import bearer_key, require_agent
from herald.http.described import AGENT_ONLY, EVENT_STREAM, JSON, Answer, described
from herald.http.mcp_refusals import refuse, request_id_of
from herald.http.mcp_sessions import SESSION_HEADER, McpSessions
from herald.keys import hash_key
from herald.mcp import webhooks as mcp_webhooks
from herald.mcp.events import (
    REVOCATION_SCOPE_KEY,
    PollAdmit,
    Streams,
    StreamSlot,
    no_limit,
    no_poll_limit,
)
from herald.mcp.server import AGENT_SCOPE_KEY, PublishCheck, agent_from_scope, create_server
from herald.models import Agent
from herald.subscriptions.stream import KeyRevocation
from herald.webhooks.worker import WebhookWorker

IDLE_TIMEOUT_S = 900.0


class StreamTracker:
    """Counts the open GET streams of each MCP session."""

    def __init__(self, on_change: Callable[[str], None]) -> None:
        self._open: Counter[str] = Counter()
        self._on_change = on_change

    def is_open(self, session_id: str) -> bool:
        return self._open[session_id] > 0

    def ready_check(self, session_id: str) -> Callable[[], bool]:
        return lambda: self.is_open(session_id)

    def wrap(self, app: ASGIApp) -> ASGIApp:
        async def tracked(scope: Scope, receive: Receive, send: Send) -> None:
            session_id = dict(scope["headers"]).get(SESSION_HEADER, b"").decode("latin-1")
            if scope.get("method") != "GET" or not session_id:
                await app(scope, receive, send)
                return
            opened = False

            async def watch(message: Message) -> None:
                nonlocal opened
                if message["type"] == "http.response.start" and message["status"] == 200:
                    opened = True
                    self._open[session_id] += 1
                await send(message)
                if opened and message["type"] == "http.response.start":
                    self._on_change(session_id)

            try:
                await app(scope, receive, watch)
            finally:
                if opened:
                    self._open[session_id] -= 1
                    if self._open[session_id] <= 0:
                        del self._open[session_id]
                    self._on_change(session_id)

        return tracked


_MCP = (
    "herald's MCP server, over MCP's streamable HTTP transport: an agent's client speaks"
    " JSON-RPC to it (initialize, tools/call, events/poll, events/stream...), as MCP says; the"
    " session it opens (the Mcp-Session-Id header) belongs to the key's agent."
)
_REFUSED = Answer(
    "Refused by the transport (a malformed message, a missing or unknown Mcp-Session-Id, an"
    " Accept header without the media types it needs): a JSON-RPC error.",
    {JSON: JSONRPCError},
)
_TRANSPORT_ERRORS = {400: _REFUSED, 404: _REFUSED, 405: _REFUSED, 406: _REFUSED, 415: _REFUSED}


def _herald_refusal(why: str) -> Answer:
    return Answer(
        f"{why}: a JSON-RPC error (its data.code is herald's error code), with the request's id"
        " when it could be read.",
        {JSON: JSONRPCError},
    )


_HERALD_REFUSALS = {
    401: _herald_refusal("No key, or a key herald does not know (WWW-Authenticate says why)"),
    403: _herald_refusal("A key that is not an agent's"),
    503: _herald_refusal("The store cannot be reached to check the key; retry after Retry-After"),
}
_SESSION_LIMIT = {429: _herald_refusal("The key has as many live MCP sessions as it may")}


@described(
    "Send an MCP message",
    method="POST",
    name="mcp_post",
    keys=AGENT_ONLY,
    body=JSONRPCMessage,
    answers={
        200: Answer(
            "The answer to a request: one JSON-RPC message, or a stream of them (notifications,"
            " then the answer) as text/event-stream.",
            {JSON: JSONRPCMessage, EVENT_STREAM: str},
        ),
        202: Answer("A notification or a response, taken."),
        **_TRANSPORT_ERRORS,
        **_HERALD_REFUSALS,
        **_SESSION_LIMIT,
    },
    description=_MCP,
    tag="mcp",
)
@described(
    "Open an MCP session's stream",
    method="GET",
    name="mcp_get",
    keys=AGENT_ONLY,
    answers={
        200: Answer(
            "The session's server-to-client messages (events pushed to the agent among them),"
            " as text/event-stream, for as long as the client holds it open.",
            {EVENT_STREAM: str},
        ),
        **_TRANSPORT_ERRORS,
        **_HERALD_REFUSALS,
        **_SESSION_LIMIT,
    },
    description=_MCP,
    tag="mcp",
)
@described(
    "End an MCP session",
    method="DELETE",
    name="mcp_delete",
    keys=AGENT_ONLY,
    answers={200: Answer("The session is ended."), **_TRANSPORT_ERRORS, **_HERALD_REFUSALS},
    description=_MCP,
    tag="mcp",
)
class McpRoute:
    """The ``/mcp`` ASGI endpoint: every request needs an agent's key; the MCP session it opens
    belongs to that agent (the SDK refuses its session id to any other key)."""

    def __init__(
        self,
        notifier: Notifier,
        *,
        sessions_per_key: int = 0,
        publish_check: PublishCheck | None = None,
        era: str = DEFAULTS.mcp.era,
        fanout: Fanout | None = None,
        events_config: EventsConfig = DEFAULTS.events,
        stream_slot: StreamSlot = no_limit,
        poll_admit: PollAdmit = no_poll_limit,
        webhooks: WebhookWorker | None = None,
        subscriptions_config: SubscriptionConfig = DEFAULTS.subscriptions,
    ) -> None:
        self.notifier = notifier
        self.events_config = events_config
        self.poll_admit = poll_admit
        self.streams = StreamTracker(notifier.wake_session)
        fanout = fanout or Fanout(notifier.hub)
        self.event_streams = Streams(notifier.hub, fanout, events_config, stream_slot)
        self.server = create_server(
            notifier,
            ready=self.streams.ready_check,
            publish_check=publish_check,
            era=era,
            fanout=fanout,
            events_config=events_config,
            stream_slot=stream_slot,
            poll_admit=poll_admit,
        )
        if webhooks is not None:
            # Webhook subscriptions are served where herald sends webhooks.
            mcp_webhooks.attach(
                self.server,
                notifier.hub,
                agent_from_scope,
                webhooks.sender,
                subscriptions_config,
                webhooks.wake,
            )
        # Every request carries an agent key, which a rebinding page cannot add.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        self.manager = StreamableHTTPSessionManager(
            app=self.server, security_settings=security, session_idle_timeout=IDLE_TIMEOUT_S
        )
        # A 2026-07-28 request whose answer is never a stream (events/poll) is answered by the
        # same server in the SDK's JSON mode: its answer is the same, without the SSE mode's
        # per-request task group, memory stream and disconnect watcher, which wait for
        # notifications such a request never sends (about 180 µs a request). A poll whose
        # client leaves is not cut short: it ends, and the same cursor gets its events again.
        self.answers = StreamableHTTPSessionManager(
            app=self.server, json_response=True, security_settings=security
        )
        self.sessions = McpSessions(sessions_per_key, IDLE_TIMEOUT_S)
        self._app = self.streams.wrap(self.manager.handle_request)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            async with self.manager.run(), self.answers.run():
                yield
        finally:
            self.sessions.end_all()  # the SDK has ended them all

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        try:
            agent = await require_agent(self.notifier.hub, request)
        except HeraldError as exc:
            await refuse(exc, scope, receive, send, body_unread=True)
            return
        # A request authenticated with a key that then stops working (rotated out) ends: a
        # session's stream or an events/stream would otherwise go on pushing the agent's events
        # to whoever held the old key. An events/stream ends itself, saying why (terminated);
        # anything else is cut. The client's next request is refused.
        handling = asyncio.current_task()
        revoked = False
        revocation = KeyRevocation()
        scope[REVOCATION_SCOPE_KEY] = revocation

        def end(reason: str) -> None:
            nonlocal revoked
            revoked = True
            if not revocation.revoke(reason) and handling is not None:
                handling.cancel(reason)

        unwatch = self.notifier.hub.key_watch.watch(hash_key(bearer_key(request)), end)
        try:
            await self._serve(agent, revocation, scope, receive, send)
        except asyncio.CancelledError:
            if not revoked:
                raise
        finally:
            unwatch()

    async def _serve(
        self, agent: Agent, revocation: KeyRevocation, scope: Scope, receive: Receive, send: Send
    ) -> None:
        if scope.get("method") == "POST":
            if not _sends_json(scope):
                await NOT_JSON(scope, receive, send)
                return
            # The SDK parses the message itself, keeping the last of a key given twice: a
            # message that holds one is refused before it does.
            body, receive = await _whole_body(scope, receive)
            _, fault = json_input.decoded(body)
            if fault is not None:
                await _duplicate_key(fault, body)(scope, receive, send)
                return
        scope[AGENT_SCOPE_KEY] = agent
        token = AccessToken(token=agent.key_hash, client_id=agent.id, scopes=["agent"])
        scope["user"] = AuthenticatedUser(token)
        if answered_whole(scope):
            await self.answers.handle_request(scope, receive, send)
            return
        try:
            await self.sessions.serve(agent.id, self._app, scope, receive, send)
        except RateLimited as exc:  # raised before the SDK is called
            await refuse(exc, scope, receive, send, body_unread=False)


NOT_JSON = JSONResponse(
    {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": INVALID_REQUEST,
            "message": "send the JSON-RPC message with Content-Type: application/json",
        },
    },
    415,
)
"""The answer to a POST that is not JSON, as a JSON-RPC error (the SDK's is plain text)."""


async def _whole_body(scope: Scope, receive: Receive) -> tuple[bytes, Receive]:
    """The body (read whole, as the SDK reads it), and the ``receive`` that gives it again."""
    body = await Request(scope, receive).body()
    given = False

    async def again() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, again


def _duplicate_key(fault: str, body: bytes) -> JSONResponse:
    """The answer to a message holding a key twice: a JSON-RPC error, with the request's id
    when it has one (the last given, as the SDK would have read it)."""
    error = {"code": INVALID_REQUEST, "message": fault}
    request_id = request_id_of(body)
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error}, 400)


ANSWERED_WHOLE = frozenset({"events/poll"})
"""The 2026-07-28 methods whose answer is always one JSON-RPC message, never a stream."""


def answered_whole(scope: Scope) -> bool:
    """Whether a request is a 2026-07-28 one of a method in ``ANSWERED_WHOLE``, as its routing
    headers say, that the SDK's SSE mode would take too (its Accept header names both media
    types): so its answer is the same in the SDK's JSON mode. (The SDK refuses a message whose
    method or version is not the one its headers name.)"""
    request = Request(scope)
    version = request.headers.get("mcp-protocol-version")
    if version not in MODERN_PROTOCOL_VERSIONS:
        return False
    if request.headers.get("mcp-method") not in ANSWERED_WHOLE:
        return False
    return _accepts_json_and_events(request.headers.get("accept", ""))


def _accepts_json_and_events(accept: str) -> bool:
    """Whether an Accept header names JSON and an event stream, wildcards included (RFC 9110
    12.5.1), as the SDK's SSE mode needs. (The SDK tests it with a helper of its transport
    module that is not part of its documented API: the same rule, herald's own.)"""
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    if "*/*" in kinds:
        return True
    return bool(kinds & _JSON_KINDS) and bool(kinds & _EVENT_KINDS)


_JSON_KINDS = frozenset({"application/json", "application/*"})
_EVENT_KINDS = frozenset({"text/event-stream", "text/*"})


def _sends_json(scope: Scope) -> bool:
    # The SDK's own test of the header, which it answers with a bare 400.
    content_type = Request(scope).headers.get("content-type", "")
    return content_type.lower().startswith("application/json")
