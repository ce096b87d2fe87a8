"""The seam for ways of delivering: a Peer (the push side of one live session) and a Mechanism
(one way of delivering, which says whether it can serve a session and sends one event)."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from herald.capabilities import DeliveryCapabilities
from herald.models import Event


@dataclass(frozen=True)
class FormAnswer:
    """What a person did with a form: ``accept`` (with content), ``decline`` or ``cancel``."""

    action: str
    content: dict[str, Any] | None = None


class Peer(Protocol):
    """The push side of one live session, whatever its transport."""

    def ready(self) -> bool:
        """Whether a push can reach the client now (an HTTP client may not hold its stream open)."""

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification. Returning is no proof that anyone saw it."""

    async def elicit(self, message: str, schema: dict[str, Any], timeout_s: float) -> FormAnswer:
        """Ask the client to show a form and wait (bounded) for the answer.

        Raises:
            Exception: any failure (no back channel, a timeout, an error answer).
        """


class Outcome(enum.StrEnum):
    DELIVERED = "delivered"
    """Confirmed: the event is done."""
    SENT = "sent"
    """Pushed through a way that cannot confirm: delivered only on an ack."""
    FAILED = "failed"
    """Did not get through: the next way is tried."""


@dataclass(frozen=True)
class Result:
    outcome: Outcome
    error: str | None = None
    answer: FormAnswer | None = None


class Mechanism(ABC):
    """One way of delivering. Adding a client type means capabilities and a profile row, never
    a new path through the hub."""

    name: ClassVar[str]

    @abstractmethod
    def can_serve(self, caps: DeliveryCapabilities, event: Event) -> bool:
        """Whether this way can carry this event to a session with these capabilities."""

    @abstractmethod
    async def send(self, peer: Peer, event: Event) -> Result:
        """Try once. Failures are returned as ``Outcome.FAILED``, not raised."""
