"""A real ``herald serve`` on each backend, for tests that drive one server through many requests:
SQLite in a file of its own, PostgreSQL in a database of its own, dropped afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg

from tests.conftest import POSTGRES_ADMIN_URL
from tests.herald_process import HeraldProcess

BACKENDS = ["sqlite", "postgres"]


@contextlib.contextmanager
def serving(backend: str, directory: Path) -> Iterator[HeraldProcess]:
    """``herald serve`` on a fresh store of ``backend`` ("sqlite" or "postgres")."""
    with _store_url(backend, directory) as url:
        process = HeraldProcess(url)
        try:
            yield process
        finally:
            process.stop()


@contextlib.contextmanager
def _store_url(backend: str, directory: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{directory / 'herald.db'}"
        return
    name = f"herald_test_{uuid.uuid4().hex[:12]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    try:
        yield f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(POSTGRES_ADMIN_URL)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()
