"""How herald's processes log: the HTTP client's own request lines stay quiet, whatever the
level (they carry each webhook URL whole, a token or a password in it included)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from herald.logs import ACCESS_LOGGER, QUIET_LOGGERS, QueryTokensHidden, configure_logging


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


@pytest.mark.parametrize(
    ("msg", "args"),
    [
        # As uvicorn's access log gives it today: the path with its query as an argument.
        (
            '%s - "%s %s HTTP/%s" %d',
            ("127.0.0.1:5", "GET", "/channel/stream?a=1&token=s3cr3t", "1.1", 401),
        ),
        # The same line written whole by the server, with no arguments to look into.
        ('127.0.0.1:5 - "GET /channel/stream?a=1&token=s3cr3t HTTP/1.1" 401', ()),
    ],
)
def test_a_stream_token_in_a_line_is_hidden_however_the_line_is_built(
    msg: str, args: tuple[object, ...]
) -> None:
    record = logging.makeLogRecord({"name": ACCESS_LOGGER, "msg": msg, "args": args})
    assert QueryTokensHidden().filter(record)
    assert record.getMessage() == (
        '127.0.0.1:5 - "GET /channel/stream?a=1&token=[hidden] HTTP/1.1" 401'
    )


def test_a_token_named_in_percent_escapes_is_hidden_and_other_parameters_are_kept() -> None:
    line = "GET /channel/stream?%74oken=s3cr3t&after=7 and /x?tokens=1&token"
    record = logging.makeLogRecord({"msg": line})
    QueryTokensHidden().filter(record)
    assert record.getMessage() == (
        "GET /channel/stream?%74oken=[hidden]&after=7 and /x?tokens=1&token"
    )
