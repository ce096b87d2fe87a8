"""Which events are pushed: the one rule every way that pushes (an MCP session's cascade, an SSE
stream, a webhook's schedule in the store) keeps. An event that is not pushed is kept all the
same: it waits in the store to be drained (``POST /channel/heartbeat``, the MCP ``inbox`` tool
and resource, MCP Events), and no pushed position acknowledges it."""

from __future__ import annotations

from herald.models import Event, Preferences, Priority

LOW = Priority.LOW
"""Read once: on Python 3.11 each ``Priority.LOW`` is a descriptor call on the enum's class,
about as costly as the rest of the rule, and the rule runs for every event of every stream."""


def is_pushed(event: Event, preferences: Preferences) -> bool:
    """Whether the event may be pushed: a low one never is, nor one of a type its agent muted
    (``preferences``, the hub's: ``hub.preferences.of``)."""
    return event.priority is not LOW and not preferences.mutes(event)


def pushed(events: list[Event], preferences: Preferences) -> list[Event]:
    """Those of ``events`` that may be pushed (``is_pushed``), in their order: ``events``
    itself when all may, as they mostly do. Each stream of an agent asks for each event it
    writes, so the usual answer costs a look at each event's priority and nothing more (a
    comprehension is a new function object each time on Python 3.11)."""
    if preferences.muted is None:
        for event in events:
            if event.priority is LOW:
                return [event for event in events if event.priority is not LOW]
        return events
    return [event for event in events if is_pushed(event, preferences)]
