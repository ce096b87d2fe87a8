"""Where herald pushes to agents that hold no connection: a signed webhook (Standard Webhooks)
or an OpenClaw gateway's hooks. Their deliveries are scheduled in the store, so retries survive a
restart and exactly one process sends each attempt."""

from __future__ import annotations

import base64
import enum
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2

from herald.errors import InvalidInput
from herald.events import Attempt, iso_ms

SECRET_PREFIX = "whsec_"
DEFAULT_SCHEDULE_S = (0, 5, 300, 1800, 7200, 18000, 36000, 36000)
"""When to try: at once, then after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h (about 27.6 h)."""
_HOST = re.compile(r"[A-Za-z0-9_.-]+|[0-9A-Fa-f:.]+")
"""A host name (IDNA-encoded), an IPv4 address or an IPv6 one (without its brackets)."""


class Kind(enum.StrEnum):
    WEBHOOK = "webhook"
    OPENCLAW = "openclaw"


class State(enum.StrEnum):
    ACTIVE = "active"
    DISABLED = "disabled"


REFUSED_PREFIX = "address refused: "
"""How the ``disabled_reason`` of an endpoint disabled for its address begins: such an endpoint
is re-enabled once ``herald serve --webhook-allow`` allows its address."""


@dataclass(frozen=True)
class Endpoint:
    id: str
    agent_id: str
    kind: Kind
    url: str
    secret: str
    """A webhook's signing secret, or an OpenClaw gateway's hooks token. Never shown again."""
    created_at: int
    mode: str | None = None
    previous_secret: str | None = None
    previous_until: int | None = None
    state: State = State.ACTIVE
    disabled_reason: str | None = None
    failing_since: int | None = None
    last_error: str | None = None
    last_attempt_at: int | None = None

    def signing_secrets(self, now: int) -> list[str]:
        """The secrets that sign now: during a rotation, the new one and the previous one."""
        if self.previous_secret and self.previous_until and now < self.previous_until:
            return [self.secret, self.previous_secret]
        return [self.secret]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind.value,
            "url": self.url,
            "mode": self.mode,
            "state": self.state.value,
            "disabled_reason": self.disabled_reason,
            "failing_since": iso_ms(self.failing_since) if self.failing_since else None,
            "last_error": self.last_error,
            "last_attempt_at": iso_ms(self.last_attempt_at) if self.last_attempt_at else None,
            "rotating_until": iso_ms(self.previous_until) if self.previous_until else None,
        }


@dataclass(frozen=True)
class Delivery:
    """One event to one endpoint: how many tries so far, and when the next one is due."""

    endpoint_id: str
    event_id: str
    attempts: int
    next_at: int
    state: str
    last_error: str | None = None


@dataclass(frozen=True)
class Finished:
    """What came of one attempt at a delivery, for ``Store.finish_deliveries``."""

    delivery: Delivery
    attempt: Attempt
    next_at: int | None
    """When to try again; None: no more tries (the delivery is done if it succeeded, else dead)."""
    event_status: str | None
    """What the event becomes if it is still open (delivered or sent); None: unchanged."""
    endpoint_ok: bool
    disable_reason: str | None = None
    """Disable the endpoint for good (410 Gone, a forbidden address)."""
    disable_failing_since: int | None = None
    """Disable the endpoint if it has been failing since before this time."""

    @property
    def state(self) -> str:
        if self.next_at is not None:
            return "waiting"
        return "done" if self.endpoint_ok else "dead"


@dataclass(frozen=True)
class EndpointNote:
    """An endpoint's health after a batch of attempts: the last attempt decides."""

    endpoint_id: str
    ok: bool
    error: str | None
    recovered: bool
    """An attempt in the batch succeeded, so a failure after it starts a new failing span."""
    disable_reason: str | None
    disable_failing_since: int | None


def endpoint_notes(finished: Sequence[Finished]) -> list[EndpointNote]:
    """One note per endpoint of a batch, sorted by endpoint id: every process updates endpoint
    rows in that order, so two batches cannot deadlock."""
    notes: dict[str, EndpointNote] = {}
    for item in finished:
        endpoint_id = item.delivery.endpoint_id
        before = notes.get(endpoint_id)
        notes[endpoint_id] = EndpointNote(
            endpoint_id,
            item.endpoint_ok,
            None if item.endpoint_ok else item.attempt.error,
            item.endpoint_ok or (before is not None and before.recovered),
            item.disable_reason or (before.disable_reason if before else None),
            None if item.endpoint_ok else item.disable_failing_since,
        )
    return [notes[key] for key in sorted(notes)]


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def check_secret(secret: Any) -> str:
    """Raises: InvalidInput unless ``whsec_`` + base64 of at least 24 bytes."""
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        raise InvalidInput("a webhook secret starts with whsec_ followed by base64")
    try:
        raw = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except ValueError as exc:
        raise InvalidInput("a webhook secret is whsec_ followed by base64") from exc
    if len(raw) < 24:
        raise InvalidInput("a webhook secret needs at least 24 random bytes (32 is usual)")
    return secret


def check_url(url: Any, name: str) -> str:
    """Raises: InvalidInput unless an absolute http(s) URL with a valid host and port (where the
    host points is checked by ``herald.webhooks.addresses``)."""
    if not isinstance(url, str) or len(url) > 2048:
        raise InvalidInput(f"{name} must be an http or https URL of at most 2048 characters")
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise InvalidInput(f"{name} {url!r} must be an absolute http or https URL")
    try:
        httpx2.URL(url)
        parts.port  # noqa: B018 (it raises on a port out of range)
        host = parts.hostname.encode("idna").decode("ascii")
    except (httpx2.InvalidURL, ValueError, UnicodeError) as exc:
        raise InvalidInput(f"{name} {url!r} is not a URL herald can call: {exc}") from exc
    if not _HOST.fullmatch(host):
        raise InvalidInput(f"{name} {url!r} needs a host name of letters, digits, - and .")
    return url


def parse_schedule(text: str) -> tuple[int, ...]:
    """A retry schedule written as seconds, comma-separated (``0,5,300``).

    Raises:
        InvalidInput: not a list of whole seconds, or empty.
    """
    try:
        schedule = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise InvalidInput(f"a retry schedule is whole seconds with commas, not {text!r}") from exc
    if not schedule or any(delay < 0 for delay in schedule):
        raise InvalidInput("a retry schedule needs at least one delay, none negative")
    return schedule
