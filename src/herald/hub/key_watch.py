"""Open streams whose key stops working are ended (``hub.key_watch``).

A request is refused once its key is rotated out, but a stream is authenticated once, when it
opens: without this, a stream opened with a leaked key would go on receiving the agent's events
after the key was replaced. Each stream registers its key's hash; the keys watched are checked
against the store in one read every ``period_s`` (so a rotation in another process ends its
streams within that), and at once after a rotation in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from herald.errors import StoreUnavailable
from herald.store import Store

CHECK_PERIOD_S = 5.0
KEY_ROTATED_OUT = "the key this stream was opened with no longer works (it was rotated out)"

log = logging.getLogger(__name__)

OnRevoked = Callable[[str], None]


class KeyWatch:
    """Which keys open streams hold, and what ends each stream when its key stops working."""

    def __init__(self, store: Store, period_s: float = CHECK_PERIOD_S) -> None:
        self._store = store
        self._period_s = period_s
        self._watchers: dict[str, set[OnRevoked]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def watch(self, key_hash: str, on_revoked: OnRevoked) -> Callable[[], None]:
        """Call ``on_revoked(reason)`` once the key stops working; returns what stops watching."""
        self._watchers.setdefault(key_hash, set()).add(on_revoked)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

        def unwatch() -> None:
            watchers = self._watchers.get(key_hash)
            if watchers is not None:
                watchers.discard(on_revoked)
                if not watchers:
                    del self._watchers[key_hash]

        return unwatch

    def check_soon(self) -> None:
        """Check now rather than at the next period (a key was rotated here)."""
        self._wake.set()

    async def check(self) -> None:
        """Read which watched keys still work, and end the streams of those that do not."""
        watched = list(self._watchers)
        if not watched:
            return
        working = await self._store.working_key_hashes(watched)
        for key_hash in watched:
            if key_hash not in working:
                for on_revoked in list(self._watchers.pop(key_hash, ())):
                    on_revoked(KEY_ROTATED_OUT)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while self._watchers:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._period_s):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self.check()
            except StoreUnavailable as exc:  # checked again at the next period
                log.warning("could not check the keys of open streams: %s", exc.message)
