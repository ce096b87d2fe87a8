"""Driver errors at the boundary: which are expected, which may be retried, how they are told."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import asyncpg

from herald.errors import InvalidInput

DRIVER_ERRORS = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    OSError,
    TimeoutError,
)
RETRYABLE = (asyncpg.exceptions.DeadlockDetectedError, asyncpg.exceptions.SerializationError)


def retryable(exc: BaseException, transaction: bool) -> bool:
    """Whether an operation that failed was rolled back whole and may simply be run again."""
    if isinstance(exc, asyncpg.UniqueViolationError):
        # An append that lost a race for its dedupe key: run again, it finds the winner's event.
        return exc.constraint_name == "events_dedupe"
    return transaction and isinstance(exc, RETRYABLE)


def describe(exc: BaseException, limit: int = 300) -> str:
    """A driver error in one line of bounded length: some quote every argument of the query."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def without_password(url: str) -> str:
    """The URL to name in messages: no password, no query (which may hold one)."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":***"
    return repr(urlunsplit((parts.scheme, f"{userinfo}{at}{host}", parts.path, "", "")))


def refused() -> InvalidInput:
    return InvalidInput(
        "an event holds what PostgreSQL cannot store: a NUL character in its text or"
        " dedupe_key, \\u0000 or NaN in its data, or an unpaired surrogate"
    )
