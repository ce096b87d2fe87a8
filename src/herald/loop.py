"""Running a command's coroutine on uvloop (herald runs on POSIX, where uvloop always installs)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import uvloop


def run(coroutine: Coroutine[Any, Any, Any]) -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(coroutine)
