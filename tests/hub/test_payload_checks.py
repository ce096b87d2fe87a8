"""The checker of data against payload schemas (``herald.hub.payload_checks``), in its child
process: checks that run away are refused in time, checks that wait too long for them too, and
the child is replaced so that the next check gets its own answer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from herald import InvalidInput, RateLimited
from herald.hub.payload_checks import Check, PayloadChecker

pytestmark = pytest.mark.anyio

WORD = json.dumps({"type": "string", "pattern": "^(a|a)+$"})
RUNAWAY = Check(WORD, json.dumps("a" * 40 + "!"), "event.data", "word.said")
"""Backtracking without end: 2**40 steps."""
GOOD = Check(WORD, json.dumps("aaaa"), "event.data", "word.said")
BAD = Check(WORD, json.dumps("ab"), "event.data", "word.said")
BAD_REFUSAL = (
    "event.data: 'ab' does not match '^(a|a)+$' (event type word.said declares a payload_schema)"
)


@pytest.fixture
async def checker() -> AsyncIterator[PayloadChecker]:
    checker = PayloadChecker(timeout_s=0.2)
    yield checker
    await checker.close()


async def refusal(checks: list[Check], checker: PayloadChecker) -> InvalidInput:
    with pytest.raises(InvalidInput) as refused:
        async with asyncio.timeout(30):
            await checker.check(checks)
    return refused.value


async def test_valid_data_passes_and_invalid_data_is_refused_naming_the_path(
    checker: PayloadChecker,
) -> None:
    await checker.check([GOOD, GOOD])
    assert (await refusal([GOOD, BAD, RUNAWAY], checker)).message == BAD_REFUSAL


async def test_a_check_that_runs_away_is_refused_and_the_next_is_checked_afresh(
    checker: PayloadChecker,
) -> None:
    refused = await refusal([GOOD, RUNAWAY._replace(where="events[1].data")], checker)
    assert refused.message == (
        "events[1].data: the event type word.said's payload_schema took over 0.2 s to check"
        " this data: simplify the schema (patterns, uniqueItems) or the data"
    )
    await checker.check([GOOD])
    assert (await refusal([BAD], checker)).message == BAD_REFUSAL


async def test_a_check_that_waits_too_long_for_another_is_refused_as_busy(
    checker: PayloadChecker,
) -> None:
    running = asyncio.create_task(checker.check([RUNAWAY]))
    waiting = asyncio.create_task(checker.check([GOOD]))
    async with asyncio.timeout(30):
        with pytest.raises(RateLimited, match=r"over 0\.2 s checking other events") as busy:
            await waiting
        with pytest.raises(InvalidInput, match=r"took over 0\.2 s"):
            await running
    assert busy.value.retry_after_s == 0.2
    await checker.check([GOOD])


async def test_a_check_cancelled_midway_leaves_no_answer_for_the_next() -> None:
    patient = PayloadChecker(timeout_s=5)
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(patient.check([RUNAWAY]), 0.5)
        await patient.check([GOOD])
        assert (await refusal([BAD], patient)).message == BAD_REFUSAL
    finally:
        await patient.close()
