"""The check of published data against payload schemas, away from the event loop: in one child
process per hub, one check at a time, each publish's checks bounded in time.

Why a process and not a thread: jsonschema's ``pattern`` runs Python's ``re``, which holds the
GIL for the whole of a match, so a match that backtracks (``^(a|a)+$`` against 28 a's and a !
takes 19 s, twice that for each more a) would freeze the event loop from a thread as well; and a
thread cannot be stopped. A child that overruns is killed, and the next check starts another.
So the worst a hostile schema or data can cost is one core for ``timeout_s`` and a restart, and
the checks of other publishes that wait meanwhile (each refused once it has waited
``timeout_s``: a flood of hostile checks takes one core, never all of them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Sequence
from typing import NamedTuple

from herald.config import DEFAULTS
from herald.errors import HeraldError, InvalidInput, RateLimited

CHECK_TIMEOUT_S = DEFAULTS.hub.payload_check_s
"""How long the checks of one publish may take, and how long they may wait for the checker."""
START_TIMEOUT_S = 30.0
"""How long the child may take to start (it imports herald); not counted in a check's time."""
LEASH_S = 5.0
"""A child outlives a check by at most this beyond ``timeout_s``, should the hub die during it."""
READY = b'"ready"\n'


class Check(NamedTuple):
    """One event's data to check: called ``where`` (``events[3].data``) in a refusal."""

    schema_json: str
    data_json: str
    where: str
    type_name: str


class PayloadChecker:
    """Checks data against payload schemas in a child process (started at the first check).

    Args:
        timeout_s: how long the checks of one publish may take before they are refused, and how
            long they may wait for the checks of other publishes to end.
    """

    def __init__(self, timeout_s: float = CHECK_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._slot = asyncio.Lock()
        self._child: asyncio.subprocess.Process | None = None
        self._ended: list[asyncio.subprocess.Process] = []

    async def check(self, checks: Sequence[Check]) -> None:
        """Check each in turn; stop at the first refused.

        Raises:
            InvalidInput: data not valid against its schema (naming the path), or checks that
                took over ``timeout_s``, naming the one under way.
            RateLimited: other publishes' checks held the checker for ``timeout_s``.
            HeraldError: the child could not be started.
        """
        if not checks:
            return
        try:
            async with asyncio.timeout(self.timeout_s):
                await self._slot.acquire()
        except TimeoutError:
            raise RateLimited(
                f"herald spent over {self.timeout_s:g} s checking other events against payload"
                " schemas; nothing was published: retry in a moment",
                self.timeout_s,
            ) from None
        try:
            child = await self._started()
            under_way = checks[0]
            try:
                async with asyncio.timeout(self.timeout_s):
                    for under_way in checks:
                        refusal = await self._ask(child, under_way)
                        if refusal is not None:
                            raise InvalidInput(refusal)
            except TimeoutError:
                self._kill()
                raise InvalidInput(
                    f"{under_way.where}: the event type {under_way.type_name}'s payload_schema"
                    f" took over {self.timeout_s:g} s to check this data: simplify the schema"
                    " (patterns, uniqueItems) or the data"
                ) from None
            except asyncio.CancelledError:  # the answer under way would be read as the next's
                self._kill()
                raise
        finally:
            self._slot.release()

    async def close(self) -> None:
        self._kill()
        await self._reap()

    async def _ask(self, child: asyncio.subprocess.Process, check: Check) -> str | None:
        assert child.stdin is not None and child.stdout is not None
        line = json.dumps(list(check), ensure_ascii=False).encode() + b"\n"
        try:
            child.stdin.write(line)
            await child.stdin.drain()
            answer = await child.stdout.readline()
        except (ConnectionError, OSError):
            answer = b""
        if not answer:
            self._kill()
            return (
                f"{check.where} could not be checked against the payload_schema of event type"
                f" {check.type_name}: the checking process ended during the check; simplify the"
                " schema or the data, or try again"
            )
        refusal: str | None = json.loads(answer)
        return refusal

    async def _started(self) -> asyncio.subprocess.Process:
        await self._reap()
        if self._child is not None:
            return self._child
        leash = self.timeout_s + LEASH_S
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            f"from herald.payload_schemas import serve_checks; serve_checks({leash!r})",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert child.stdout is not None
        self._child = child
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                ready = await child.stdout.readline()
        except TimeoutError:
            ready = b""
        except asyncio.CancelledError:  # its "ready" would be read as the next check's answer
            self._kill()
            raise
        if ready != READY:
            self._kill()
            raise HeraldError(
                "herald could not start the process that checks data against payload schemas"
                f" within {START_TIMEOUT_S:g} s (see its log); try again"
            )
        return child

    def _kill(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            self._ended.append(child)

    async def _reap(self) -> None:
        """Wait for killed children to end (at once: SIGKILL), so none is left unwaited for."""
        while self._ended:
            await self._ended.pop().wait()
