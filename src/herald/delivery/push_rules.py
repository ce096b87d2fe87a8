"""Which events are pushed: the one rule every way that pushes (an MCP session's cascade, an SSE
stream, a webhook's schedule in the store) keeps. An event that is not pushed is kept all the
same: it waits in the store to be drained (``POST /channel/heartbeat``, the MCP ``inbox`` tool
and resource, MCP Events), and no pushed position acknowledges it."""

from __future__ import annotations

from herald.models import Event, Priority


def is_pushed(event: Event) -> bool:
    """Whether the event may be pushed: a low one never is."""
    return event.priority is not Priority.LOW
