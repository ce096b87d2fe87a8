"""Helpers for testing code that uses herald: a clock you move by hand, a peer that records."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Any

from herald.delivery.base import EVERY_PUSH_PATH, FormAnswer


class ManualClock:
    """A clock for ``open_store(..., clock=...)`` and ``Hub``: time moves only when told.

    Lease expiry, ttl and pruning can then be tested without sleeping.
    """

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


class RecordingPeer:
    """A Peer for ``Notifier.connect`` that records what herald pushes and answers forms as told:
    test the cascade of your own application without an MCP client.

    Args:
        answer: what a form gets back (default: decline); an exception instance is raised instead.
        ready: whether pushes can reach it (flip ``peer.is_ready`` to change it later).
        push_paths: what its connection offers (default: notifications and forms, as an MCP
            session of the 2025 era); none, as a 2026-07-28 session: nothing is pushed to it.
    """

    def __init__(
        self,
        answer: FormAnswer | BaseException | None = None,
        ready: bool = True,
        push_paths: Iterable[str] = EVERY_PUSH_PATH,
    ) -> None:
        self.answer = answer if answer is not None else FormAnswer("decline")
        self.is_ready = ready
        self.push_paths = frozenset(push_paths)
        self.received: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()

    def ready(self) -> bool:
        return self.is_ready

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.received.put((method, params))

    async def elicit(self, message: str, schema: dict[str, Any], timeout_s: float) -> FormAnswer:
        await self.received.put(
            ("elicitation/create", {"message": message, "requestedSchema": schema})
        )
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer

    async def next(self, timeout_s: float = 10.0) -> tuple[str, dict[str, Any]]:
        """The next thing pushed, waiting at most ``timeout_s``."""
        async with asyncio.timeout(timeout_s):
            return await self.received.get()
