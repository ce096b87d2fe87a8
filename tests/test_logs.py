"""How herald's processes log: the HTTP client's own request lines stay quiet, whatever the
level (they carry each webhook URL whole, a token or a password in it included)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from herald.logs import QUIET_LOGGERS, configure_logging


@pytest.fixture
def restored_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, saved in levels.items():
        logging.getLogger(name).setLevel(saved)


@pytest.mark.parametrize("level", ["debug", "info", "warning"])
def test_the_http_clients_request_lines_are_never_shown(restored_logging: None, level: str) -> None:
    configure_logging(level, "text")
    # httpx2 logs each request with its URL at INFO; httpcore2 its traces at DEBUG.
    for name in ("httpx2", "httpcore2"):
        assert not logging.getLogger(name).isEnabledFor(logging.INFO), name
    assert logging.getLogger("herald.webhooks").isEnabledFor(logging.getLevelName(level.upper()))
