"""The seam for ways of delivering: a Peer (the push side of one live session, and the push
paths its connection offers) and a Mechanism (one way of delivering, which says what it needs,
whether it waits for an answer, how it tells of a backlog, and sends one event)."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from herald.capabilities import DeliveryCapabilities
from herald.models import Event

NOTIFICATIONS = "notifications"
"""A push path: notifications sent at any time, unasked (an MCP session of the 2025 era)."""
REQUESTS = "requests"
"""A push path: requests sent at any time whose answer is awaited (an MCP form)."""
EVERY_PUSH_PATH = frozenset({NOTIFICATIONS, REQUESTS})
NO_PUSH_PATH: frozenset[str] = frozenset()
"""A connection that is only ever answered (a 2026-07-28 MCP session today): its events wait in
the store for its tool calls."""


@dataclass(frozen=True)
class FormAnswer:
    """What a person did with a form: ``accept`` (with content), ``decline`` or ``cancel``."""

    action: str
    content: dict[str, Any] | None = None


@dataclass(frozen=True)
class Notification:
    """One notification to push: its method and params."""

    method: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Backlog:
    """What waits for a session as it (re)connects, told in one summary when it is long:
    ``unread`` events it would be pushed, the ``oldest`` of them first, and apart from them
    ``not_pushed`` events that no way pushes (low priority, or of a type its agent muted),
    which wait in the inbox all the same."""

    unread: int
    oldest: Event
    not_pushed: int = 0


class Peer(Protocol):
    """The push side of one live session, whatever its transport. Whoever builds it knows what
    its connection can carry unasked (``push_paths``); the engine trusts that, never the era."""

    @property
    def push_paths(self) -> frozenset[str]:
        """The push paths the connection offers (``NOTIFICATIONS``, ``REQUESTS``, or a path a
        new peer and its mechanism agree on); empty: nothing can be pushed."""

    def ready(self) -> bool:
        """Whether a push can reach the client now (an HTTP client may not hold its stream open)."""

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification. Returning is no proof that anyone saw it."""

    async def elicit(self, message: str, schema: dict[str, Any], timeout_s: float) -> FormAnswer:
        """Ask the client to show a form and wait (bounded) for the answer.

        Raises:
            Exception: any failure (no back channel, a timeout, an error answer).
        """


class PushOutcome(enum.StrEnum):
    DELIVERED = "delivered"
    """Confirmed: the event is done."""
    SENT = "sent"
    """Pushed through a way that cannot confirm: delivered only on an ack."""
    FAILED = "failed"
    """Did not get through: the next way is tried."""


@dataclass(frozen=True)
class PushResult:
    """What came of one push: its outcome, the error that failed it, a form's answer."""

    outcome: PushOutcome
    error: str | None = None
    answer: FormAnswer | None = None


class Mechanism(ABC):
    """One way of delivering. Everything the cascade needs to know about it, it declares here:
    adding a way is a new subclass and a place in the list, never a new path through the engine.
    """

    name: ClassVar[str]
    """Recorded with every attempt."""
    needs: ClassVar[frozenset[str]] = frozenset({NOTIFICATIONS})
    """The push paths the session's peer must offer."""
    waits_for_answer: ClassVar[bool] = False
    """Its send holds until a person answers: the cascade runs it beside the session's loop, so
    the events behind it are not held up. Such a way asks; it does not keep a session told."""

    def fits(self, peer: Peer) -> bool:
        """Whether the peer's connection offers every push path this way needs."""
        return self.needs <= peer.push_paths

    @abstractmethod
    def reaches(self, caps: DeliveryCapabilities) -> bool:
        """Whether the session declared what this way needs (channel, forms, stream, logs)."""

    def can_serve(self, caps: DeliveryCapabilities, event: Event) -> bool:
        """Whether this way can carry this event to a session with these capabilities
        (default: any event, once it reaches the session)."""
        return self.reaches(caps)

    def backlog_summary(self, backlog: Backlog) -> Notification | None:
        """The one notification that tells a session it reaches of a long backlog, or None
        when this way cannot (the default)."""
        return None

    @abstractmethod
    async def send(self, peer: Peer, event: Event, cursor: str) -> PushResult:
        """Try once. Failures are returned as ``PushOutcome.FAILED``, not raised. ``cursor`` is
        the event's position in the store's history (``herald.cursors``): what
        the client sends to ``ack`` to acknowledge it and every event pushed before it."""
