"""A client of a herald hub's agent API over HTTP: drain, acknowledge, read back what was
acknowledged, reply, send, stream.

Used by ``herald bridge``, and by any program that wants an agent's events without writing HTTP
code. Errors come back as herald's own (``HubUnreachable`` when the hub cannot be reached).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, overload
from urllib.parse import quote

import httpx2

from herald import errors
from herald.models import (
    Acknowledged,
    Drained,
    Event,
    History,
    Published,
    Reply,
    TopicSubscription,
)
from herald.sse import ServerSentEvent, SSEDecoder
from herald.times import ms_from_iso

_ERRORS: dict[int, type[errors.HeraldError]] = {
    400: errors.InvalidInput,
    401: errors.Unauthorized,
    403: errors.Forbidden,
    404: errors.NotFound,
    409: errors.Conflict,
    413: errors.TooLarge,
    422: errors.InvalidInput,
}


log = logging.getLogger("herald.client")

MCP_VERSION = "2026-07-28"
MCP_META = {
    "io.modelcontextprotocol/protocolVersion": MCP_VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "herald-client", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
"""What a 2026-07-28 request says of its client: herald's own, asking for nothing."""

MAX_BACKOFF_S = 10.0
"""The longest a following drain waits before it tries an unreachable hub again."""
MAX_STREAM_EVENT_CHARS = 16 * 1024 * 1024
"""Far over any event a hub sends (256 KiB of text and data, JSON-escaped); a bigger one is
reported as ``invalid`` instead of being held in memory."""


@dataclass(frozen=True)
class StreamItem:
    """One thing a stream said: an ``event``; ``truncated`` (``data`` says how many are missing,
    None when the resume point was from another history of the store, before a restore); or
    ``invalid``, an event that could not be read (``data``: its ``seq``, or None when the stream
    did not say, and the ``error``). An invalid event is skipped, never the end of the stream.
    ``position``: an event's (or an invalid one's) place in the stream, to resume after."""

    kind: str
    event: Event | None = None
    data: dict[str, Any] | None = None
    position: str | None = None


@dataclass(frozen=True)
class Receipt:
    """A published event: its id and its agent's seq; ``duplicate``: an event with the same
    ``dedupe_key`` was published to that agent before, and this is that one. ``deliver_at``
    (ms since the epoch): the event is scheduled, offered from then on (its ``seq`` until then
    is a placeholder below zero)."""

    id: str
    seq: int
    duplicate: bool
    deliver_at: int | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Receipt:
        due = data.get("deliver_at")
        return cls(
            str(data["id"]),
            int(data["seq"]),
            bool(data["duplicate"]),
            ms_from_iso(due) if due is not None else None,
        )


class HeraldClient:
    """An agent's view of a hub. Use as ``async with HeraldClient(url, key) as client``. With a
    publisher key (or the admin key) instead of an agent's, ``publish`` publishes."""

    def __init__(self, url: str, key: str, *, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._reader = f"inbox-{uuid.uuid4().hex[:12]}"
        self._http = httpx2.AsyncClient(
            base_url=self.url,
            headers={"authorization": f"Bearer {key}"},
            timeout=httpx2.Timeout(timeout_s),
        )

    async def __aenter__(self) -> HeraldClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def heartbeat(
        self, *, cursor: int | None = None, limit: int = 20, consumer: str | None = None
    ) -> Drained:
        """Drain: with ``cursor``, acknowledge up to it and lease the next events (at least
        once); without, take the next events as delivered (at most once)."""
        body: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            body["cursor"] = cursor
        if consumer is not None:
            body["consumer"] = consumer
        answer = await self._post("/channel/heartbeat", body)
        return Drained([Event.from_json(e) for e in answer["events"]], answer["cursor"])

    async def drain(
        self,
        *,
        consumer: str | None = None,
        limit: int = 100,
        follow: bool = False,
        interval_s: float = 5.0,
    ) -> AsyncIterator[Event]:
        """The agent's pending events, oldest first, at least once: a batch is acknowledged when
        the next one is asked for, so events handled before a crash are all that can come
        twice. With ``follow``, go on for ever: when none are left, wait on the agent's event
        stream for the next one (drained at once when it commits), or ``interval_s`` at most,
        riding out a hub that cannot be reached (a restart, say) or asks to slow down; else
        stop when none are left (everything yielded is then acknowledged)::

            async for event in client.drain():
                handle(event)

        Raises:
            HubUnreachable: without ``follow``, the hub cannot be reached.
            InvalidInput: the hub refused the cursor: its store lost events this drain had
                seen (restored, or wiped).
        """
        cursor = 0
        backoff = interval_s
        seen: str | int = 0
        """The position of the newest event the stream woke this drain for: the next wait
        starts after it, so an event leased to another consumer wakes it once, not again and
        again (what this drain acknowledged is no longer on the stream)."""
        while True:
            try:
                drained = await self.heartbeat(cursor=cursor, limit=limit, consumer=consumer)
            except (errors.HubUnreachable, errors.RateLimited) as exc:
                if not follow:
                    raise
                wait = exc.retry_after_s if isinstance(exc, errors.RateLimited) else backoff
                log.warning("%s; draining again in %.1fs", exc.message, wait)
                await asyncio.sleep(wait)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            backoff = interval_s
            for event in drained.events:
                yield event
            if drained.events:
                cursor = drained.cursor
                continue
            if not follow:
                return
            seen = await self._next_on_stream(seen, interval_s)

    async def _next_on_stream(self, after: str | int, timeout_s: float) -> str | int:
        """Wait until the agent's stream shows an event after the position ``after`` (returns
        its position), or ``timeout_s`` went by, or the stream failed (returns ``after``): the
        drain then looks again either way, so a stream that cannot be had costs only latency."""
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout_s
        try:
            async with asyncio.timeout_at(until):
                async for item in self.stream(after):
                    if item.event is not None and item.position is not None:
                        return item.position
        except TimeoutError:
            return after
        except errors.HeraldError as exc:
            log.debug("waiting on the stream failed (%s): waiting out the interval", exc.message)
        # The stream ended or failed before an event: the rest of the interval, as a poll would.
        await asyncio.sleep(max(until - loop.time(), 0))
        return after

    async def inbox(self, limit: int) -> list[Event]:
        """The next pending events, held for this client (leased, so at least once); they are
        delivered once acknowledged with ``ack(ids)``, after the reader has shown them."""
        return (await self.heartbeat(cursor=0, limit=limit, consumer=self._reader)).events

    async def ack(self, ids: Sequence[str] = (), cursor: int | str | None = None) -> Acknowledged:
        """Acknowledge events by id, and up to ``cursor``: the ``position`` of a stream item
        (every event up to it that was pushed), or a heartbeat's cursor (what that drain was
        handed). A position from before a restore of the store acknowledges nothing and comes
        back ``truncated``."""
        body: dict[str, Any] = {"ids": list(ids)}
        if cursor is not None:
            body["cursor"] = cursor
        return Acknowledged.from_json(await self._post("/channel/ack", body))

    async def history(
        self,
        before: str | None = None,
        type: str | None = None,
        limit: int = 50,
        topic: str | None = None,
    ) -> History:
        """A page of the agent's acknowledged events that the hub still keeps, newest first;
        ``before``: the ``next`` of the page before (None: the newest), ``type``: a type or a
        glob of one, ``topic``: the topic they were published to, or a glob of topics. Reading
        changes nothing."""
        asked: dict[str, Any] = {"limit": limit}
        if before is not None:
            asked["before"] = before
        if type is not None:
            asked["type"] = type
        if topic is not None:
            asked["topic"] = topic
        return History.from_json(await self._send("GET", "/channel/history", params=asked))

    async def reply(self, event_id: str, text: str, data: dict[str, Any] | None = None) -> Reply:
        body = {"event_id": event_id, "text": text, "data": data}
        return Reply.from_json(await self._post("/channel/reply", body))

    async def send_message(
        self,
        to: str,
        text: str,
        data: dict[str, Any] | None = None,
        *,
        reply: dict[str, Any] | None = None,
        type: str = "message.received",
        deliver_at: datetime.datetime | None = None,
        delay_s: float | None = None,
        priority: str | None = None,
    ) -> Published:
        """Write to another agent; with ``reply`` (a form schema), ask it for an answer. With
        ``deliver_at`` (an aware datetime) or ``delay_s`` (up to 30 days) the message is
        scheduled: the other agent is offered it from then on. ``priority``: ``low`` (never
        pushed, only drained), ``normal`` (the default), ``high`` or ``urgent``."""
        body: dict[str, Any] = {"to": to, "text": text, "data": data, "type": type}
        body |= _timing(deliver_at, delay_s, priority)
        answer = await self._post("/channel/send", {**body, "reply": reply})
        return Published(Event.from_json(answer), created=True)

    @overload
    async def publish(
        self,
        to: str,
        type: str,
        text: str,
        *,
        data: dict[str, Any] | list[Any] | None = None,
        dedupe_key: str | None = None,
        ttl_s: float | None = None,
        reply: dict[str, Any] | None = None,
        sender: str | None = None,
        deliver_at: datetime.datetime | None = None,
        delay_s: float | None = None,
        priority: str | None = None,
    ) -> Receipt: ...

    @overload
    async def publish(
        self,
        to: list[str],
        type: str,
        text: str,
        *,
        data: dict[str, Any] | list[Any] | None = None,
        dedupe_key: str | None = None,
        ttl_s: float | None = None,
        reply: dict[str, Any] | None = None,
        sender: str | None = None,
        deliver_at: datetime.datetime | None = None,
        delay_s: float | None = None,
        priority: str | None = None,
    ) -> list[Receipt]: ...

    async def publish(
        self,
        to: str | list[str],
        type: str,
        text: str,
        *,
        data: dict[str, Any] | list[Any] | None = None,
        dedupe_key: str | None = None,
        ttl_s: float | None = None,
        reply: dict[str, Any] | None = None,
        sender: str | None = None,
        deliver_at: datetime.datetime | None = None,
        delay_s: float | None = None,
        priority: str | None = None,
    ) -> Receipt | list[Receipt]:
        """Publish an event (``POST /v1/events``, with a publisher or the admin key) to the
        agent with handle ``to``; or, ``to`` a list of up to 1,000 handles, one event for each
        agent in one transaction, a receipt for each in the list's order (``dedupe_key``
        holds for each agent on its own). ``sender`` names the agent that gets the replies.
        ``deliver_at`` (an aware datetime) or ``delay_s`` (up to 30 days) schedules it (the
        receipt's ``deliver_at`` says when it is due); ``priority``: ``low`` (never pushed,
        only drained), ``normal`` (the default), ``high`` or ``urgent``.

        Raises:
            InvalidInput: a malformed field, or a list that names an agent twice or one that
                does not exist (nothing is published). NotFound: no agent has the handle
                ``to``. Forbidden: the key may not publish this event. HubUnreachable: the
                hub cannot be reached.
        """
        body: dict[str, Any] = {"to": to, "type": type, "text": text, "data": data}
        options = {"reply": reply, "dedupe_key": dedupe_key, "ttl_s": ttl_s, "from": sender}
        body |= {name: value for name, value in options.items() if value is not None}
        body |= _timing(deliver_at, delay_s, priority)
        answer = await self._post("/v1/events", body)
        if isinstance(to, str):
            return Receipt.from_json(answer)
        return [Receipt.from_json(receipt) for receipt in answer["events"]]

    async def topics(self) -> list[TopicSubscription]:
        """The topics (names or globs) the agent is subscribed to."""
        answer = await self._send("GET", "/channel/topics")
        return [TopicSubscription.from_json(s) for s in answer["subscriptions"]]

    async def subscribe(self, topic: str) -> list[TopicSubscription]:
        """Subscribe to a declared topic's name, or a glob of names (``repo/*``): each event
        published to a topic it matches from now on is the agent's own. Returns every
        subscription of the agent."""
        answer = await self._post("/channel/topics", {"topic": topic})
        return [TopicSubscription.from_json(s) for s in answer["subscriptions"]]

    async def unsubscribe(self, topic: str) -> None:
        """Remove the subscription to ``topic`` (a name or a glob, as subscribed)."""
        await self._send("DELETE", f"/channel/topics/{quote(topic, safe='/*')}")

    async def preferences(self, new: dict[str, Any] | None = None) -> dict[str, Any]:
        """The agent's preferences (``muted``: types never pushed; ``quiet_hours``: a zone,
        start and end, when only urgent events are pushed; ``digests``: types whose bursts are
        pushed as their first event and one summary); with ``new``, replaced by them first."""
        if new is None:
            return dict(await self._send("GET", "/channel/preferences"))
        return dict(await self._send("PUT", "/channel/preferences", json=new))

    async def ask_permission(
        self,
        to: str,
        request_id: str,
        tool_name: str,
        description: str = "",
        input_preview: str = "",
    ) -> Published:
        """Relay a Claude Code permission prompt to the agent ``to``, who allows or denies it
        with a reply; herald builds the ``permission.request`` event itself.

        Raises:
            InvalidInput: a malformed field (``request_id`` is 5 letters a-z without l; the
                limits are in ``herald.reserved``). NotFound: no agent has the handle ``to``.
            HubUnreachable: the hub cannot be reached.
        """
        body = {
            "to": to,
            "request_id": request_id,
            "tool_name": tool_name,
            "description": description,
            "input_preview": input_preview,
        }
        answer = await self._post("/channel/permission", body)
        return Published(Event.from_json(answer), created=True)

    async def stream(self, after: str | int = 0) -> AsyncIterator[StreamItem]:
        """The agent's events after ``after`` (the ``position`` of the last item the client
        has; 0: from the oldest), then live ones, until the connection ends. An event that
        cannot be read comes as an ``invalid`` item, and the stream goes on. A position from
        another history of the store (or a seq other than 0) starts from the oldest pending
        event, after a ``truncated`` item.

        Raises:
            HubUnreachable: the connection could not be made or broke, or the hub ended it.
        """
        headers = {"last-event-id": str(after), "accept": "text/event-stream"}
        timeout = httpx2.Timeout(30.0, read=None)
        try:
            async with self._http.stream(
                "GET", "/channel/stream", headers=headers, timeout=timeout
            ) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise _error(response)
                decoder = SSEDecoder(max_event_chars=MAX_STREAM_EVENT_CHARS)
                async for chunk in response.aiter_bytes():
                    for message in decoder.feed(chunk):
                        yield _item(message)
        except httpx2.HTTPError as exc:
            raise errors.HubUnreachable(f"the stream from {self.url} broke: {exc}") from exc

    async def mcp_messages(
        self, method: str, params: dict[str, Any], request_id: int | str = 1
    ) -> AsyncIterator[dict[str, Any]]:
        """One request to the hub's ``/mcp``, on the 2026-07-28 era (no session to keep): every
        JSON-RPC message of its answer as it comes, the request's notifications first and its
        response (a result or an error) last. Leaving early aborts the request.

        Raises:
            HubUnreachable: the hub could not be reached, or the connection broke.
            Unauthorized, Forbidden: the key was refused.
        """
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            "params": {**params, "_meta": MCP_META},
        }
        headers = {
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": MCP_VERSION,
            "mcp-method": method,
        }
        timeout = httpx2.Timeout(30.0, read=None)
        try:
            async with self._http.stream(
                "POST", "/mcp", json=body, headers=headers, timeout=timeout
            ) as response:
                if not response.headers.get("content-type", "").startswith("text/event-stream"):
                    await response.aread()
                    answer = _json_rpc(response)
                    if answer is None:
                        raise _error(response)
                    yield answer
                    return
                decoder = SSEDecoder(max_event_chars=MAX_STREAM_EVENT_CHARS)
                async for chunk in response.aiter_bytes():
                    for message in decoder.feed(chunk):
                        if message.data:
                            yield json.loads(message.data)
        except httpx2.HTTPError as exc:
            raise errors.HubUnreachable(f"the MCP request to {self.url} broke: {exc}") from exc

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        return await self._send("POST", path, json=body)

    async def _send(self, method: str, path: str, **request: Any) -> Any:
        try:
            response = await self._http.request(method, path, **request)
        except httpx2.HTTPError as exc:
            raise errors.HubUnreachable(
                f"the herald hub at {self.url} cannot be reached"
                f" ({exc or type(exc).__name__}); events wait there"
            ) from exc
        if response.status_code >= 400:
            raise _error(response)
        return None if response.status_code == 204 else response.json()


def _timing(
    deliver_at: datetime.datetime | None, delay_s: float | None, priority: str | None
) -> dict[str, Any]:
    """The fields of a publish or a message that say when it is due and how much it matters,
    those given (the hub refuses both times at once, saying so)."""
    fields: dict[str, Any] = {}
    if deliver_at is not None:
        fields["deliver_at"] = deliver_at.isoformat()
    if delay_s is not None:
        fields["delay_s"] = delay_s
    if priority is not None:
        fields["priority"] = priority
    return fields


def _item(message: ServerSentEvent) -> StreamItem:
    """What one SSE event of the hub says.

    Raises:
        HubUnreachable: the hub ended the stream with an ``error`` event.
    """
    seq = _seq(message.last_event_id)
    if message.type == "message" and message.last_event_id:
        return replace(_read(message, seq), position=message.last_event_id)
    return _read(message, seq)


def _read(message: ServerSentEvent, seq: int | None) -> StreamItem:
    if message.oversized:
        return _invalid(seq, f"the event is over {MAX_STREAM_EVENT_CHARS} characters")
    try:
        payload = json.loads(message.data)
    except (ValueError, RecursionError) as exc:
        return _invalid(seq, f"the event is not JSON: {exc}")
    if "\\u" in message.data and not _is_text(payload):
        return _invalid(seq, "the event holds a lone surrogate (\\ud800 to \\udfff), not text")
    if message.type == "error":
        said = payload.get("message") if isinstance(payload, dict) else payload
        raise errors.HubUnreachable(f"the hub ended the stream: {said}")
    if message.type != "message":
        if not isinstance(payload, dict):
            return _invalid(seq, f"a {message.type} event must hold a JSON object")
        return StreamItem(message.type, data=payload)
    try:
        return StreamItem("event", event=_event(payload))
    except ValueError as exc:
        return _invalid(seq, str(exc))


_EVENT_STRINGS = ("id", "agent", "type", "text", "created_at", "status")
_EVENT_OPTIONAL_STRINGS = ("from", "reply_to", "expires_at", "dedupe_key", "thread", "topic")


def _event(payload: Any) -> Event:
    """An event as the hub's stream shows it, checked field by field.

    Raises:
        ValueError: saying which field is missing or of the wrong type.
    """
    if not isinstance(payload, dict):
        raise ValueError("the event is not a JSON object")
    wrong = [name for name in _EVENT_STRINGS if not isinstance(payload.get(name), str)]
    wrong += [
        name
        for name in _EVENT_OPTIONAL_STRINGS
        if not isinstance(payload.get(name), (str, type(None)))
    ]
    seq = payload.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int):
        wrong.append("seq")
    if not isinstance(payload.get("reply"), (dict, type(None))):
        wrong.append("reply")
    if wrong:
        raise ValueError(f"the event has missing or malformed field(s): {', '.join(wrong)}")
    try:
        return Event.from_json(payload)
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"the event is malformed: {exc!r}") from exc


def _is_text(payload: Any) -> bool:
    """JSON can spell a lone surrogate ("\\ud800"), which is no character: nothing can show
    it, and writing it as UTF-8 fails (in an MCP SDK's writer, that ends the session)."""
    try:
        json.dumps(payload, ensure_ascii=False).encode()
    except (UnicodeEncodeError, RecursionError):
        return False
    return True


def _invalid(seq: int | None, error: str) -> StreamItem:
    return StreamItem("invalid", data={"seq": seq, "error": error})


def _seq(last_event_id: str) -> int | None:
    """The seq the stream's event id (a position, which the hub sets on every event) ends
    with, if it is one."""
    seq = last_event_id.rpartition("~")[2]
    if seq.isascii() and seq.isdigit() and len(seq) <= 18:
        return int(seq)
    return None


def _json_rpc(response: httpx2.Response) -> dict[str, Any] | None:
    """The JSON-RPC message a JSON answer holds, or None when it is herald's own error."""
    try:
        answer = response.json()
    except ValueError:
        return None
    return answer if isinstance(answer, dict) and answer.get("jsonrpc") == "2.0" else None


def _error(response: httpx2.Response) -> errors.HeraldError:
    try:
        error = response.json()["error"]
        message = error["message"]
    except (ValueError, KeyError, TypeError):
        error, message = {}, f"HTTP {response.status_code}"
    if response.status_code >= 500:
        return errors.HubUnreachable(f"the hub failed: {message}")
    if response.status_code == 429 and error.get("code") == errors.LoopGuardTripped.code:
        return errors.LoopGuardTripped(
            message,
            thread=str(error.get("thread")),
            limit=str(error.get("limit")),
            maximum=int(error.get("maximum", 0)),
            window_s=int(error.get("window_s", 0)),
            retry_after_s=_retry_after_s(response),
        )
    if response.status_code == 429:
        return errors.RateLimited(message, _retry_after_s(response))
    return _ERRORS.get(response.status_code, errors.InvalidInput)(message)


def _retry_after_s(response: httpx2.Response) -> float:
    """The answer's ``Retry-After`` in seconds (herald sends whole seconds); 1 if unreadable."""
    value = response.headers.get("retry-after", "")
    return float(value) if value.isascii() and value.isdigit() else 1.0
