"""``serve()`` in this process, on a clock the test moves: the real server (uvicorn on a loopback
port, the hub, its loops) without starting an interpreter for it.

``serving_here`` runs it on the test's own event loop, for one test; ``serving_in_thread`` runs it
on an event loop of its own in a thread, so that one server outlives a test's event loop and a
module's tests share it (each with agents of its own)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import AsyncIterator, Iterator

from herald.config import ServeConfig
from herald.serve import serve
from herald.testing import ManualClock
from tests.herald_process import ADMIN_KEY

WAIT_S = 30.0
"""How long the server may take to listen, and to stop."""


@contextlib.asynccontextmanager
async def serving_here(config: ServeConfig, clock: ManualClock) -> AsyncIterator[str]:
    """``serve(config)`` on the running event loop with ``clock`` and the suite's admin key,
    while inside; its URL."""
    listening: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def announce(line: str) -> None:
        if (found := re.search(r"listening on (http://\S+)", line)) and not listening.done():
            listening.set_result(found.group(1))

    stop = asyncio.Event()
    running = asyncio.create_task(
        serve(config, admin_key=ADMIN_KEY, announce=announce, stop=stop, clock=clock)
    )
    try:
        async with asyncio.timeout(WAIT_S):
            # Whichever ends first: serve() that failed to start ends before it listens.
            await asyncio.wait([listening, running], return_when=asyncio.FIRST_COMPLETED)
        if not listening.done():
            running.result()  # raises what stopped it
            raise RuntimeError("serve() returned without listening")
        yield listening.result()
    finally:
        stop.set()
        async with asyncio.timeout(WAIT_S):
            await running


@contextlib.contextmanager
def serving_in_thread(config: ServeConfig, clock: ManualClock) -> Iterator[str]:
    """``serving_here`` on an event loop of its own, in a thread, while inside; its URL. The
    server runs between the tests too: a module-scoped fixture shares one among them."""
    urls: list[str] = []
    failures: list[BaseException] = []
    told = threading.Event()  # the URL, or what kept the server from listening
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def run() -> None:
        try:
            async with serving_here(config, clock) as url:
                urls.append(url)
                told.set()
                await stop.wait()
        except BaseException as exc:  # the caller raises it, in its own thread
            failures.append(exc)
        finally:
            told.set()

    thread = threading.Thread(target=loop.run_until_complete, args=(run(),), daemon=True)
    thread.start()
    try:
        if not told.wait(WAIT_S * 2):
            raise RuntimeError("serve() did not listen in time")
        if not urls:
            raise failures[0]
        yield urls[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(WAIT_S * 2)
        if not thread.is_alive():
            loop.close()
    if failures:  # serve() that listened failed as it stopped
        raise failures[0]
