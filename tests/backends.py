"""A real ``herald serve`` on each backend, for tests that drive one server through many requests:
SQLite in a file of its own, PostgreSQL in a database of its own, dropped afterwards."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import scratch_database
from tests.herald_process import HeraldProcess

BACKENDS = ["sqlite", "postgres"]


@contextlib.contextmanager
def serving(backend: str, directory: Path, *extra_args: str) -> Iterator[HeraldProcess]:
    """``herald serve`` on a fresh store of ``backend`` ("sqlite" or "postgres"), with
    ``extra_args`` for ``herald serve``."""
    with fresh_store_url(backend, directory) as url:
        process = HeraldProcess(url, extra_args=extra_args)
        try:
            yield process
        finally:
            process.stop()


@contextlib.contextmanager
def fresh_store_url(backend: str, directory: Path) -> Iterator[str]:
    """The URL of a fresh store of ``backend``, for a test that starts herald on it more than
    once (a restart)."""
    if backend == "sqlite":
        yield f"sqlite:///{directory / 'herald.db'}"
        return
    with scratch_database() as url:
        yield url
