"""The writer of herald's SSE answers: a write that waits for a client past its time ends that
stream alone, with ``TimeoutError``; any other cancellation stays one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from herald.http import sse

pytestmark = pytest.mark.anyio


async def test_a_write_the_client_does_not_take_times_out_and_others_go_on() -> None:
    blocked = asyncio.Event()
    taken: list[bytes] = []

    async def stuck(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            blocked.set()
            await asyncio.Event().wait()  # a client that reads nothing

    async def reading(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            taken.append(message["body"])

    async def stuck_stream() -> None:
        write = await sse.start(stuck, timeout_s=0.2)  # type: ignore[arg-type]
        await write("data: 1\n\n")

    async def reading_stream() -> None:
        write = await sse.start(reading, timeout_s=30)  # type: ignore[arg-type]
        await blocked.wait()
        for n in range(3):
            await write(f"data: {n}\n\n")

    async with asyncio.timeout(10):
        stuck_task = asyncio.create_task(stuck_stream())
        with pytest.raises(TimeoutError):
            await stuck_task
        await reading_stream()
    assert stuck_task.cancelling() == 0  # its timeout, not a cancellation left pending
    assert taken == [b"data: 0\n\n", b"data: 1\n\n", b"data: 2\n\n"]


async def test_a_write_cancelled_from_elsewhere_stays_cancelled() -> None:
    """The server stopping, or the client going away, cancels a waiting write: that is not
    the write's timeout, and goes on as a cancellation."""
    blocked = asyncio.Event()

    async def stuck(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            blocked.set()
            await asyncio.Event().wait()

    async def stream() -> None:
        write = await sse.start(stuck, timeout_s=30)  # type: ignore[arg-type]
        await write("data: 1\n\n")

    task = asyncio.create_task(stream())
    async with asyncio.timeout(10):
        await blocked.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
