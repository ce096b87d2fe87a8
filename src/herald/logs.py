"""Log lines as ``herald serve --log-format`` writes them: ``text`` for people, ``json`` (one
object a line: time, level, logger, message and the fields the line was given with
``extra=``) for log collectors."""

from __future__ import annotations

import json
import logging
import sys

from herald.times import iso_ms

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
"""A record's own attributes: the rest came with ``extra=`` and are the line's fields."""


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": iso_ms(int(record.created * 1000)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in vars(record).items():
            if name not in _STANDARD and name not in line:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure_logging(level: str, log_format: str) -> None:
    """Send every log line to stderr at ``level`` and above, in ``log_format`` (text, json)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
