"""One error tree for everything herald raises to its users.

Each error carries a stable machine-readable ``code`` and the HTTP status the API answers with,
so the HTTP layer maps errors without knowing them one by one.
"""

from __future__ import annotations

import math


class HeraldError(Exception):
    """Root of every error herald raises on purpose."""

    code = "herald_error"
    http_status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def details(self) -> dict[str, object]:
        """What the error's answer carries besides its code and message (a field each)."""
        return {}


class InvalidInput(HeraldError):
    """The request or argument is malformed; the message says what to fix."""

    code = "invalid_input"
    http_status = 422


class CursorAhead(InvalidInput):
    """A cursor past the agent's newest event: acknowledging with it would acknowledge events
    not yet published. It comes from a restored or wiped store, a recreated agent, or a client
    bug; the message names the newest seq."""

    code = "cursor_ahead"

    def __init__(self, cursor: int, newest: int) -> None:
        super().__init__(
            f"cursor {cursor} is ahead of this agent's newest event (seq {newest}); send a cursor"
            " herald gave you, or 0 to start from the oldest pending event"
        )
        self.cursor = cursor
        self.newest = newest


class TooLarge(InvalidInput):
    """An event, a batch or a request body is over its limit."""

    code = "too_large"
    http_status = 413


class BodyTimeout(HeraldError):
    """A request body that stopped arriving, or did not end in time; its connection is closed."""

    code = "body_timeout"
    http_status = 408


class Unauthorized(HeraldError):
    """No key, or a key herald does not know."""

    code = "unauthorized"
    http_status = 401


class UnknownKey(Unauthorized):
    """A key was sent that herald does not know: mistyped, revoked, or rotated out."""


class Forbidden(HeraldError):
    """A known key that may not do this, such as an agent key on an admin route."""

    code = "forbidden"
    http_status = 403


class NotFound(HeraldError):
    """The agent or event does not exist (or is not visible to the caller)."""

    code = "not_found"
    http_status = 404


class NoSuchHandle(NotFound):
    """A publish is for a handle that no agent has; ``handle`` names it."""

    def __init__(self, handle: str) -> None:
        super().__init__(f"no agent has the handle {handle!r}; create it with POST /v1/agents")
        self.handle = handle


class NoSuchTopic(NotFound):
    """A publish or a subscription names a topic the operator has not declared; ``topic``
    names it."""

    def __init__(self, topic: str) -> None:
        super().__init__(
            f"no topic is named {topic!r}; the operator declares it with PUT /v1/topics/{topic}"
        )
        self.topic = topic


class Conflict(HeraldError):
    """The request clashes with what exists, such as a handle already taken."""

    code = "conflict"
    http_status = 409


class RateLimited(HeraldError):
    """A key is over one of its limits (open streams, live MCP sessions, publish rate); nothing
    was done. Retry after ``retry_after_s`` seconds, or ask the operator to raise the limit."""

    code = "rate_limited"
    http_status = 429

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class LoopGuardTripped(RateLimited):
    """A message between agents refused by a loop guard (``herald.loop_guard``): the two agents
    reached the exchanges allowed in a window, or the sender the messages allowed a minute.
    Nothing was stored. ``thread`` names the conversation, ``limit`` which one (exchanges or
    per_minute), ``maximum`` and ``window_s`` its value; retry after ``retry_after_s``."""

    code = "loop_guard"

    def __init__(
        self,
        message: str,
        *,
        thread: str,
        limit: str,
        maximum: int,
        window_s: int,
        retry_after_s: float,
    ) -> None:
        super().__init__(message, retry_after_s)
        self.thread = thread
        self.limit = limit
        self.maximum = maximum
        self.window_s = window_s

    def details(self) -> dict[str, object]:
        return {
            "thread": self.thread,
            "limit": self.limit,
            "maximum": self.maximum,
            "window_s": self.window_s,
            "retry_after_s": max(1, math.ceil(self.retry_after_s)),
        }


class LimitReached(HeraldError):
    """The caller already holds as many of something as the operator allows (``limit`` names
    what, ``maximum`` how many); nothing was done. End one first, or ask the operator to raise
    the limit."""

    code = "limit_reached"
    http_status = 429

    def __init__(self, message: str, limit: str, maximum: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.maximum = maximum


class SubscriptionLimitReached(LimitReached):
    """A new webhook subscription refused: the agent holds ``held`` live ones, as many as the
    operator allows (``maximum``). A refresh of one it holds is never refused."""

    def __init__(self, held: int, maximum: int) -> None:
        super().__init__(
            f"you hold {held} webhook subscriptions, as many as herald allows an agent"
            f" ({maximum}): end one with events/unsubscribe, or let one expire, before"
            " subscribing anew (refreshing one you hold is always taken)",
            "subscriptions",
            maximum,
        )
        self.held = held


class StoreUnavailable(HeraldError):
    """The store could not be reached or failed; nothing was changed. Retry later."""

    code = "store_unavailable"
    http_status = 503


class StoreInUse(Conflict):
    """A SQLite store is held by another process (a running ``herald serve``, or a restore):
    nothing was done. Stop that process first, or, to serve from several, use PostgreSQL."""

    code = "store_in_use"


class ExtraNotInstalled(HeraldError):
    """Something herald does only with an optional part of its package (an extra) that is not
    installed, such as a PostgreSQL store without ``herald[postgres]``; the message says what to
    install. Nothing was done."""

    code = "extra_not_installed"


class HubUnreachable(HeraldError):
    """A herald client could not reach its hub; events wait there until it is back."""

    code = "hub_unreachable"
    http_status = 503


class SubscriptionNotFound(NotFound):
    """No webhook subscription of the caller has that name, arguments and URL (an MCP Events
    ``events/unsubscribe``): it expired, was ended, or was never made."""


class Unsupported(HeraldError):
    """A well-formed request for something herald does not do, such as an MCP Events delivery
    mode it does not serve; ``feature`` and ``value`` name it."""

    code = "unsupported"
    http_status = 400

    def __init__(self, message: str, feature: str, value: object) -> None:
        super().__init__(message)
        self.feature = feature
        self.value = value


class CallbackEndpointError(HeraldError):
    """A webhook subscription's endpoint could not be verified: it could not be reached, or did
    not answer the challenge. ``reason`` is one of SEP-3415's kinds (``connection_refused``,
    ``timeout``, ``tls_error``, ``http_4xx``, ``http_5xx``, ``challenge_failed``). Nothing was
    stored."""

    code = "callback_endpoint_error"
    http_status = 502

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
