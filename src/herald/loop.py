"""Running a command's coroutine: on uvloop where it is installed, asyncio's loop elsewhere."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


def run(coroutine: Coroutine[Any, Any, Any]) -> None:
    try:
        import uvloop
    except ImportError:  # uvloop is optional (not on Windows)
        asyncio.run(coroutine)
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(coroutine)
