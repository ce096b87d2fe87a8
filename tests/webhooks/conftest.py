"""What the webhook worker's tests share: a hub on SQLite whose clock the test moves."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from herald import Hub
from herald.testing import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    # Real time as the start: receivers check signature timestamps against their own clock.
    return ManualClock(start=time.time())


@pytest.fixture
async def hub(tmp_path: Path, clock: ManualClock) -> AsyncIterator[Hub]:
    async with Hub.from_url(f"sqlite:///{tmp_path / 'h.db'}", clock=clock) as opened:
        yield opened
