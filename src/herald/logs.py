"""Log lines as ``herald serve --log-format`` writes them: ``text`` for people, ``json`` (one
object a line: time, level, logger, message and the fields the line was given with
``extra=``) for log collectors."""

from __future__ import annotations

import json
import logging
import re
import sys
from urllib.parse import unquote_plus

from herald.times import iso_ms

QUIET_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
"""A record's own attributes: the rest came with ``extra=`` and are the line's fields."""
_LEFT_OUT = _STANDARD | {"color_message"}
"""uvicorn's ``color_message`` is its message again, with terminal colours."""


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": iso_ms(int(record.created * 1000)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in vars(record).items():
            if name not in _LEFT_OUT and name not in line:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure_logging(level: str, log_format: str) -> None:
    """Send every log line to stderr at ``level`` and above, in ``log_format`` (text, json)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    # The HTTP client logs each request with its full URL at INFO: a webhook URL may carry a
    # token or a password, and herald logs each attempt itself (its URLs without a password).
    for client in QUIET_LOGGERS:
        logging.getLogger(client).setLevel(
            max(logging.WARNING, logging.getLevelNamesMapping()[level.upper()])
        )


HIDDEN_PARAMETER = "token"
"""The query parameter whose value no log line shows: a web page's stream token (``GET
/channel/stream?token=``)."""
ACCESS_LOGGER = "uvicorn.access"


class QueryTokensHidden(logging.Filter):
    """Hides the value of a ``token`` query parameter in a line: uvicorn's access log writes
    each request's path with its query, and a stream token travels there. (uvicorn has no
    setting for what its access line shows: a filter on its logger, the logging module's own
    hook, is the way in.) The line is looked at whole, as the logging module makes it
    (``getMessage``), not in the arguments uvicorn happens to build it from, which it does not
    document."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        hidden = _QUERY_PARAMETER.sub(_hidden, message)
        if hidden != message:
            record.msg, record.args = hidden, ()
        return True


_QUERY_PARAMETER = re.compile(r"(?<=[?&])([^=&?\s\"#]*)=([^&\s\"#]*)")
"""A ``name=value`` of a URL's query, wherever a URL is in a line."""


def _hidden(parameter: re.Match[str]) -> str:
    name = parameter.group(1)
    # The name as the app reads it (percent-decoded): %74oken= is hidden too.
    return f"{name}=[hidden]" if unquote_plus(name) == HIDDEN_PARAMETER else parameter.group(0)


def hide_query_tokens() -> None:
    """Keep stream tokens out of uvicorn's access log (once, however many servers start)."""
    access = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(found, QueryTokensHidden) for found in access.filters):
        access.addFilter(QueryTokensHidden())


def log_attempt(
    log: logging.Logger,
    event_id: str,
    way: str,
    target: str,
    outcome: str,
    next_try_ms: int | None = None,
    error: str | None = None,
) -> None:
    """One INFO line for what came of one delivery attempt, with its fields for ``json``. Called
    on every attempt: when INFO is off it costs one level check."""
    if not log.isEnabledFor(logging.INFO):
        return
    next_try = iso_ms(next_try_ms) if next_try_ms is not None else None
    fields = {"event": event_id, "way": way, "target": target, "outcome": outcome,
              "next_try": next_try, "error": error}  # fmt: skip
    log.info("%s by %s to %s: %s%s", event_id, way, target, outcome,
             f", next try {next_try}" if next_try else "", extra=fields)  # fmt: skip


def log_endpoint_state(
    log: logging.Logger, endpoint_id: str, way: str, state: str, why: str
) -> None:
    """One INFO line when an endpoint starts failing, recovers or is disabled."""
    log.info("%s %s %s: %s", way, endpoint_id, state, why,
             extra={"endpoint": endpoint_id, "way": way, "state": state, "why": why})  # fmt: skip


def webhook_deliveries(count: int) -> str:
    """``count`` with its noun and verb, for a line about deliveries: "1 webhook delivery was",
    "3 webhook deliveries were"."""
    return f"{count} webhook delivery was" if count == 1 else f"{count} webhook deliveries were"
