"""The suite's one bounded wait: for what another process, thread or task does on its own, which
no event announces. The check is asked again every ``POLL_S`` until it gives a truthy value, and
for at most ``within_s``: then the wait fails, naming what it waited for and the last answer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

WAIT_S = 30.0
"""Long enough for a loaded machine running the suite on several processes; a wait that holds
returns as soon as its check does."""
POLL_S = 0.05
"""How often a check is asked again: a poll interval, not a synchronisation."""


def wait_until(check: Callable[[], T], what: str, within_s: float = WAIT_S) -> T:
    """The first truthy value of ``check()``, asked until ``within_s`` have passed."""
    deadline = time.monotonic() + within_s
    while not (value := check()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"gave up after {within_s:g} s waiting for {what}: {value!r}")
        time.sleep(POLL_S)
    return value


async def until(check: Callable[[], Awaitable[T]], what: str, within_s: float = WAIT_S) -> T:
    """``wait_until`` for a coroutine: the first truthy value of ``await check()``, the event
    loop free between two checks."""
    deadline = time.monotonic() + within_s
    while not (value := await check()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"gave up after {within_s:g} s waiting for {what}: {value!r}")
        await asyncio.sleep(POLL_S)
    return value
