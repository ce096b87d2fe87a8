"""``GET /v1/stream``: the admin's live feed as Server-Sent Events, every publish, attempt,
acknowledgement, expiry and endpoint change as it happens, each exactly once, in one order
that every client and every resume sees alike (each agent's events in seq order), resumable
(``herald.feed`` says what each item holds). ``?agent=`` (an id or a handle) and ``?type=`` (an
event type or a glob) narrow it; ``Last-Event-ID`` (or ``?after=``) goes on after an item's id;
without, it starts from now. ``?max_rate=`` (items a second) is for a person reading (the
console's live tail): when more happen, the client gets the newest and a ``skipped`` item that
says where to read the rest from. Admin key only.

A client that stops reading is cut off once a write has waited ``send_timeout_s``; it resumes
from its last id. Each client reads the store at its own pace, one page at a time, so a slow
one holds no buffer that grows and slows no publisher."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from herald.errors import HeraldError
from herald.feed import FeedMatch
from herald.http import sse
from herald.http.auth import require_admin
from herald.http.described import ADMIN_ONLY, EVENT_STREAM, Answer, described
from herald.http.events import agent_id_named
from herald.http.io import error_headers, error_response
from herald.hub import Hub
from herald.hub.feed import FeedReader
from herald.inputs.feed import FeedInput
from herald.inputs.refusals import parse

RETRY_MS = 2000
KEEPALIVE_S = 15.0
POLL_S = 1.0
"""How often a feed that heard nothing looks at the store anyway: what another process
journaled without a publish (its attempts, acknowledgements, endpoint changes) shows by then."""
READ_EVERY_S = 0.05
"""The least time between two reads of the store for one client: under a stream of commits,
each read takes what came meanwhile at once, rather than one read per commit."""
PACED_EVERY_S = 0.25
"""The least time between two reads for a client that set ``max_rate``: a person's pace."""


@described(
    "The admin's live feed (Server-Sent Events)",
    method="GET",
    keys=ADMIN_ONLY,
    query=FeedInput,
    answers={
        200: Answer(
            "An endless text/event-stream: each item is a frame whose event is its kind"
            " (published, attempt, acked, expired, endpoint, gap, skipped), whose id is where"
            " to go on from, and whose data is the item as a JSON object. Comments keep it alive; a"
            " frame named error says the store failed (go on from the last id).",
            {EVENT_STREAM: str},
        )
    },
    description=(
        "Every publish, attempt, acknowledgement, expiry and endpoint change as it happens,"
        " each exactly once, in one order that every client and every resume sees alike, an"
        " agent's events in seq order (on PostgreSQL, of two changes made at the same time, the"
        " one committed second may come first); agent and type narrow it. The Last-Event-ID"
        " header (or after) goes on after an item; without, the feed starts from now. With"
        " max_rate, at most that many items a second: the newest, after a skipped item saying"
        " what was left out."
    ),
    tag="events",
    name="feed",
)
class FeedRoute:
    """The ASGI endpoint: one reader per client, and one task that notices when it goes away."""

    def __init__(
        self,
        hub: Hub,
        *,
        send_timeout_s: float = sse.SEND_TIMEOUT_S,
        keepalive_s: float = KEEPALIVE_S,
        poll_s: float = POLL_S,
        read_every_s: float = READ_EVERY_S,
    ) -> None:
        self.hub = hub
        self.send_timeout_s = send_timeout_s
        self.keepalive_s = keepalive_s
        self.poll_s = poll_s
        self.read_every_s = read_every_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        try:
            reader, max_rate = await self._open(request)
        except HeraldError as exc:
            await error_response(exc.code, exc.message, exc.http_status, error_headers(exc))(
                scope, receive, send
            )
            return
        await sse.while_connected(receive, self._stream(reader, max_rate, send))

    async def _open(self, request: Request) -> tuple[FeedReader, int | None]:
        await require_admin(self.hub, request)
        params: dict[str, Any] = dict(request.query_params)
        if last_event_id := request.headers.get("last-event-id"):
            params["after"] = last_event_id
        asked = parse(FeedInput, params)
        agent_id = await agent_id_named(self.hub, asked.agent) if asked.agent else None
        reader = await self.hub.feed.open(asked.after, FeedMatch(agent_id, asked.type))
        return reader, asked.max_rate

    async def _stream(self, reader: FeedReader, max_rate: int | None, send: Send) -> None:
        write = await sse.start(send, self.send_timeout_s)
        await write(f"retry: {RETRY_MS}\n\n")
        read_every_s, read = self.read_every_s, reader.read
        if max_rate is not None:
            read_every_s = max(read_every_s, PACED_EVERY_S, 1 / max_rate)
            # Whole items a read, rounded down: never more than max_rate a second.
            read = functools.partial(reader.read_newest, max(int(max_rate * read_every_s), 1))
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()
        while True:
            changed = self.hub.feed.changed()
            read_at = loop.time()
            try:
                items = await read()
            except HeraldError as exc:  # the store failed: the client resumes from its last id
                error = {"code": exc.code, "message": exc.message}
                await write(sse.frame("error", None, error))
                await sse.end(send)
                return
            if items:
                await write(
                    "".join(
                        sse.frame(item.kind, reader.id_of(item.cursor), item.data) for item in items
                    )
                )
                quiet_since = loop.time()
            if not reader.caught_up:
                continue
            keepalive_at = quiet_since + self.keepalive_s
            try:
                async with asyncio.timeout(max(min(self.poll_s, keepalive_at - loop.time()), 0)):
                    await changed.wait()
            except TimeoutError:
                if loop.time() >= keepalive_at:
                    await write(": keepalive\n\n")
                    quiet_since = loop.time()
                continue
            await asyncio.sleep(max(read_at + read_every_s - loop.time(), 0))
