"""Events as text, for every way that can only show text, and made safe for a ``<channel>`` tag."""

from __future__ import annotations

import json
import re

from herald.models import Event

MAX_DATA_CHARS = 4000
_META_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNSAFE_IN_META = re.compile(r"[^A-Za-z0-9_.:/@~-]")
"""What an attribute's value may not hold, each replaced by ``_``: a slash may stay (a topic's
name holds it, and it closes neither the attribute nor the tag)."""
# Angle brackets become look-alikes so that untrusted text can never close the tag or open a
# forged one; the model still reads them as brackets.
_TAG_SAFE = str.maketrans({"<": "‹", ">": "›"})


def headline(event: Event) -> str:
    sender = f" from @{event.sender}" if event.sender else ""
    return f"[{event.type}{sender}] {event.text}"


def as_text(event: Event) -> str:
    """The event as plain text: its line, its data, and for an interactive event how to answer."""
    lines = [headline(event)]
    data = event.data
    if data not in (None, {}, []):
        body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        if len(body) > MAX_DATA_CHARS:
            body = body[:MAX_DATA_CHARS] + "… (truncated: call inbox for the whole event)"
        lines.append(f"data: {body}")
    if event.interactive:
        lines.append(f"This asks for an answer: call reply with event_id {event.id}.")
    lines.append(f"(event {event.id}, seq {event.seq}: call ack once handled)")
    return "\n".join(lines)


def channel_content(event: Event) -> str:
    return as_text(event).translate(_TAG_SAFE)


def channel_meta(event: Event, cursor: str | None) -> dict[str, str]:
    """Tag attributes: identifiers only, each reduced to a safe alphabet. ``cursor`` is the
    event's position, which ``ack`` takes to acknowledge it and every event before it."""
    meta = {"event_id": event.id, "seq": str(event.seq), "type": event.type}
    if cursor:
        meta["cursor"] = cursor
    if event.sender:
        meta["from"] = event.sender
    if event.reply_to:
        meta["reply_to"] = event.reply_to
    if event.topic:
        meta["topic"] = event.topic
    if event.interactive:
        meta["needs_reply"] = "true"
    return {
        key: _UNSAFE_IN_META.sub("_", value)[:128]
        for key, value in meta.items()
        if _META_KEY.fullmatch(key)
    }


def summary(count: int, oldest: Event | None, not_pushed: int = 0) -> str:
    """A backlog told in one line: ``count`` events that would have been pushed, and apart from
    them the ``not_pushed`` ones (low priority, muted, or held by quiet hours or a digest), which
    the inbox holds too."""
    first = f" The oldest: {headline(oldest)}".translate(_TAG_SAFE) if oldest else ""
    also = f" (and {not_pushed} never pushed: low priority, muted or held)" if not_pushed else ""
    return (
        f"{count} unread herald events are waiting{also}.{first} Call inbox to read them, then ack."
    )


def unread_notice(count: int) -> str:
    noun = "event" if count == 1 else "events"
    return f"herald: {count} unread {noun}: call inbox to read, then ack."
