"""Background work that lasts as long as a block: a hub's maintenance, the webhook worker."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any


@contextlib.asynccontextmanager
async def running(work: Coroutine[Any, Any, None], name: str) -> AsyncIterator[None]:
    """Run ``work`` in a task named ``name`` while the block lasts; at its end the task is
    cancelled and awaited, so nothing of it outlives the block."""
    task = asyncio.create_task(work, name=name)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
