"""Which events are pushed: the one rule every way that pushes (an MCP session's cascade, an SSE
stream, a webhook's schedule in the store) keeps. An event that is not pushed is kept all the
same: it waits in the store to be drained (``POST /channel/heartbeat``, the MCP ``inbox`` tool
and resource, MCP Events), and no pushed position acknowledges it."""

from __future__ import annotations

from collections.abc import Sequence

from herald.models import Event, Preferences, Priority

LOW = Priority.LOW
"""Read once: on Python 3.11 each ``Priority.LOW`` is a descriptor call on the enum's class,
about as costly as the rest of the rule, and the rule runs for every event of every stream."""


def is_pushed(event: Event, preferences: Preferences) -> bool:
    """Whether the event may be pushed: a low one never is, nor one of a type its agent muted
    (``preferences``, the hub's: ``hub.preferences.of``)."""
    return event.priority is not LOW and not preferences.mutes(event)


def pushed(events: Sequence[Event], preferences: Preferences) -> list[Event]:
    """Those of ``events`` that may be pushed (``is_pushed``), in their order."""
    muted = preferences.muted
    if muted is None:
        return [event for event in events if event.priority is not LOW]
    return [event for event in events if event.priority is not LOW and not muted.matches(event)]
