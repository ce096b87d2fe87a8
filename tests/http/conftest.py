from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.backends import BACKENDS, serving
from tests.herald_process import ADMIN_KEY, HeraldProcess


@pytest.fixture(scope="session")
def herald(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeraldProcess]:
    """One real ``herald serve`` on a fresh SQLite store, shared by the tests of every module
    that asks for it (each test with agents, keys and topics of its own: what one test stores,
    another sees). A module whose tests need a store of their own makes its own."""
    path: Path = tmp_path_factory.mktemp("herald") / "herald.db"
    process = HeraldProcess(f"sqlite:///{path}")
    yield process
    process.stop()


@pytest.fixture
def admin(herald: HeraldProcess) -> Iterator[httpx.Client]:
    with herald.client(ADMIN_KEY) as client:
        yield client


@pytest.fixture(scope="module", params=BACKENDS)
def each_backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HeraldProcess]:
    """``herald serve`` on SQLite, then on PostgreSQL, for the module's tests."""
    with serving(request.param, tmp_path_factory.mktemp(request.param)) as process:
        yield process
