"""``GET /channel/stream``: an agent's events as Server-Sent Events, resumable without gap or
duplicate. The SSE ``id`` of each event is its position (``herald.cursors``: its agent,
the store's history, its ``seq``); a reconnect sends it back as ``Last-Event-ID`` (or
``?after=`` on a first connect). A position from another history (before a restore) resumes
from the oldest pending event, announced by a ``truncated`` frame. A resume position is not an
acknowledgement: events are acknowledged with ``POST /channel/ack``."""

from __future__ import annotations

from collections import OrderedDict

from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from herald import cursors
from herald.delivery.fanout import Fanout, Subscription, TooSlow
from herald.delivery.push_rules import pushed
from herald.errors import CursorAhead, HeraldError, InvalidInput
from herald.http import sse
from herald.http.auth import bearer_key, require_agent
from herald.http.described import AGENT_ONLY, EVENT_STREAM, Answer, described
from herald.http.io import error_headers, error_response
from herald.http.limits import StreamSlots
from herald.http.stream_tokens import QUERY, agent_for_token
from herald.hub import Hub
from herald.inputs.channel import BARE_SEQ, ResumeInput
from herald.keys import hash_key
from herald.models import Agent, Event

BACKLOG_PAGE = 200
"""Open events one read of the store takes while a stream replays its backlog: each is framed
and written to one client before the next read."""
RETRY_MS = 2000
WAY = "sse"
"""What the metrics call this way of delivering."""
KEEPALIVE_S = 15.0
OTHER_HISTORY = {
    "after": 0,
    "missing": None,
    "reason": "the resume point is from another history of this store (before a restore, or"
    " a bare seq): every pending event comes again, from the oldest",
}
"""What the ``truncated`` frame says to a stream resumed from no place in this history: how many
events it missed is not known."""


@described(
    "Stream the agent's events (Server-Sent Events)",
    method="GET",
    keys=AGENT_ONLY,
    query=ResumeInput,
    answers={
        200: Answer(
            "An endless text/event-stream. Each event is a frame whose id is its position (to"
            " resume after) and whose data is the event (an Event, as JSON); a frame named"
            " truncated says which events were gone (missing: null when the resume point was"
            " from another history of the store), error that the stream was closed. Comments"
            " keep it alive.",
            {EVENT_STREAM: str},
        )
    },
    errors=(429,),
    description=(
        "Replays the agent's open events after the resume point (the Last-Event-ID header, else"
        " ?after=), then streams new ones as they come, without gap or duplicate. A web page's"
        " EventSource, which cannot send Authorization, sends ?token= instead, a token of POST"
        " /channel/stream-token. A resume"
        " point is not an acknowledgement: acknowledge with POST /channel/ack, sending an"
        " event's id as cursor (it and every pushed event before it)."
    ),
    tag="channel",
    name="stream_events",
)
class StreamRoute:
    """The ASGI endpoint. Each stream holds one subscription and one task that notices when
    the client goes away; every buffer on the way is bounded."""

    def __init__(self, hub: Hub, fanout: Fanout, slots: StreamSlots | None = None) -> None:
        self.hub = hub
        self.fanout = fanout
        self.slots = slots or StreamSlots(0)
        self.frames = FrameCache()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        try:
            agent, key_hash = await _caller(self.hub, request)
            history = await self.hub.history()
            cursor = _resume_point(request, agent, history)
            # Read now: the key's agent record may be a second old, and a position is checked
            # against, and the stream starts from, the newest seq there is.
            newest = (await self.hub.get_agent(agent.id)).last_seq
            if cursor is not None and cursor > newest:
                raise CursorAhead(cursor, newest)
            release_slot = self.slots.acquire(agent.id)
        except HeraldError as exc:
            await error_response(exc.code, exc.message, exc.http_status, error_headers(exc))(
                scope, receive, send
            )
            return
        subscription = self.fanout.subscribe(agent.id, newest)
        unwatch = self.hub.key_watch.watch(key_hash, subscription.close)
        try:
            await sse.while_connected(
                receive, self._stream(agent, history, cursor, subscription, send)
            )
        finally:
            unwatch()
            self.fanout.unsubscribe(subscription)
            release_slot()

    async def _stream(
        self,
        agent: Agent,
        history: str,
        cursor: int | None,
        subscription: Subscription,
        send: Send,
    ) -> None:
        write = await sse.start(send)
        await write(f"retry: {RETRY_MS}\n\n")
        if cursor is None:
            await write(sse.frame("truncated", None, OTHER_HISTORY))
            cursor = 0
        elif gone := await self.hub.missing_after(agent, cursor):
            await write(sse.frame("truncated", None, {"after": cursor, "missing": gone}))
        last = cursor
        while page := await self.hub.open_events(agent.id, last, BACKLOG_PAGE):
            kept = pushed(page, await self.hub.preferences.of(agent.id))
            if last == cursor and kept:
                # The first event replayed is handed out again: a client that crashes on an
                # event resumes from before it and meets it first, each time, until it dies.
                # Those behind it are counted once the client is past it (and acknowledges
                # them, or meets them first in its turn). Live pushes are first hand-outs.
                await self.hub.count_handed_out(agent.id, [kept[0].id])
            for event in kept:
                await write(self.frames.frame(event, history))
            self._count(kept)
            last = page[-1].seq
        # Everything open up to where the subscription began was in that backlog; what is not
        # open (delivered, expired) is not streamed. So the stream goes on from there, also
        # when the agent's events were all drained before it opened.
        last = max(last, subscription.covered_through)
        while True:
            try:
                events = await subscription.next_after(last, KEEPALIVE_S)
            except (TooSlow, ConnectionAbortedError) as exc:
                closed = {"code": "stream_closed", "message": str(exc)}
                await write(sse.frame("error", None, closed))
                await sse.end(send)
                return
            if not events:
                await write(": keepalive\n\n")
                continue
            preferences = self.hub.preferences.remembered(agent.id)
            if preferences is None:  # not remembered (the first event, or just changed): read
                preferences = await self.hub.preferences.of(agent.id)
            kept = pushed(events, preferences)
            if kept:
                await write("".join(self.frames.frame(event, history) for event in kept))
                self._count(kept)
            last = events[-1].seq

    def _count(self, written: list[Event]) -> None:
        """Events written to a stream are sent: no attempt is recorded (the stream resumes from
        its position instead), but the metrics count them."""
        metrics = self.hub.metrics
        metrics.delivered(WAY, "sent", len(written))
        metrics.sent(WAY, [event.created_at for event in written], self.hub.now())


async def _caller(hub: Hub, request: Request) -> tuple[Agent, str]:
    """The agent whose stream it is, and the hash of the key that must go on working for the
    stream to: the key sent, or, for a page's ``?token=``, the agent's key it was made under.

    Raises:
        Unauthorized: no key or token, or one herald refuses.
        Forbidden: a key that is not an agent's.
        InvalidInput: a key and a token both.
    """
    token = request.query_params.get(QUERY)
    if token is None:
        return await require_agent(hub, request), hash_key(bearer_key(request))
    if "authorization" in request.headers:
        raise InvalidInput("send a key (Authorization) or a stream token (?token=), not both")
    agent = await agent_for_token(hub, token)
    return agent, agent.key_hash


def _resume_point(request: Request, agent: Agent, history: str) -> int | None:
    """The seq the stream resumes after; None when the position sent is no place in the
    store's ``history``: given in another (before a restore), or a bare seq other than 0.

    A bare seq (what herald gave before its ids carried their history, or one a client took
    from an event) says no history: it may come from before a restore, where reading it as a
    place could skip events without a word. Taken as none, it costs the client at most events
    it saw once more, after the announcement that history was lost. A bare 0 is the oldest
    event of any history.

    Raises:
        InvalidInput: not a position herald gives, or one of another agent.
    """
    raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    if BARE_SEQ.fullmatch(raw):
        return 0 if int(raw) == 0 else None
    fix = "send the id of the last event the stream gave, or 0 to start from the oldest"
    if not cursors.POSITION.fullmatch(raw):
        raise InvalidInput(f"Last-Event-ID (or ?after=) is not an id herald gave: {fix}")
    return cursors.decode(raw, agent, history, what="Last-Event-ID (or ?after=)", fix=fix)


class FrameCache:
    """Frames of recent events by event id, bounded by bytes: every stream of an agent sends
    the same live event, so it is encoded once, not once per stream; an event too large to be
    worth keeping is encoded each time."""

    def __init__(self, max_bytes: int = 8 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._frames: OrderedDict[str, str] = OrderedDict()

    def frame(self, event: Event, history: str) -> str:
        """The frame of ``event``, its id the event's position in ``history`` (one per hub:
        the event's id is key enough)."""
        cached = self._frames.get(event.id)
        if cached is not None:
            self._frames.move_to_end(event.id)
            return cached
        text = sse.frame(
            None, cursors.position(event.agent_id, history, event.seq), event.to_json()
        )
        if len(text) <= self.max_bytes // 64:
            self._frames[event.id] = text
            self.size += len(text)
            while self.size > self.max_bytes:
                _, gone = self._frames.popitem(last=False)
                self.size -= len(gone)
        return text
