"""``herald.serve.serve``: the hub that ``herald serve`` runs, started from Python with a
``ServeConfig`` and stopped with an event."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import pytest

from herald import ServeConfig
from herald.config import HttpConfig, KeyLimits
from herald.serve import serve

pytestmark = pytest.mark.anyio

ADMIN_KEY = "herald-test-admin-key-0123456789abcdef"


async def test_serve_runs_the_hub_its_config_describes_until_told_to_stop(
    tmp_path: Path,
) -> None:
    config = ServeConfig(
        store_url=f"sqlite:///{tmp_path / 'herald.db'}",
        log_level="warning",
        http=HttpConfig(port=0),
        limits=KeyLimits(publish_burst=2),
    )
    lines: list[str] = []
    listening = asyncio.Event()

    def announce(line: str) -> None:
        lines.append(line)
        if "listening on" in line:
            listening.set()

    stop = asyncio.Event()
    running = asyncio.create_task(serve(config, admin_key=ADMIN_KEY, announce=announce, stop=stop))
    try:
        async with asyncio.timeout(30):
            await listening.wait()
        (url,) = [m.group(1) for line in lines if (m := re.search(r"on (http://\S+)", line))]
        headers = {"authorization": f"Bearer {ADMIN_KEY}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=10) as admin:
            assert (await admin.post("/v1/agents", json={"handle": "alice"})).status_code == 201
            batch = [{"to": "alice", "type": "t", "text": f"e{n}"} for n in range(3)]
            over_burst = await admin.post("/v1/events", json=batch)
            assert over_burst.status_code == 413, over_burst.text
            assert (await admin.post("/v1/events", json=batch[:2])).status_code == 202
    finally:
        stop.set()
        async with asyncio.timeout(30):
            await running
    assert not any("new admin key" in line for line in lines)
