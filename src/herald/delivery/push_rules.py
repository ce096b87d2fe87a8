"""Which events are pushed: the one rule every way that pushes (an MCP session's cascade, an SSE
stream, a webhook's schedule in the store) keeps. An event that is not pushed is kept all the
same: it waits in the store to be drained (``POST /channel/heartbeat``, the MCP ``inbox`` tool
and resource, MCP Events), and no pushed position acknowledges it."""

from __future__ import annotations

from herald.models import Event, Preferences, Priority


def is_pushed(event: Event, preferences: Preferences) -> bool:
    """Whether the event may be pushed: a low one never is, nor one of a type its agent muted
    (``preferences``, the hub's: ``hub.preferences.of``), nor one its agent's quiet hours or a
    digest held (``held_by``, decided as it was stored: ``herald.push_windows``), which a
    ``herald.summary`` push counts instead."""
    return (
        event.priority is not Priority.LOW
        and event.held_by is None
        and not preferences.mutes(event)
    )
