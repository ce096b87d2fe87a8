"""Reading a Server-Sent Events stream the way the WHATWG HTML standard interprets one.

The stream is UTF-8 (a leading BOM is dropped, invalid bytes become U+FFFD). A line ends only at
CR, LF or CRLF, even when the CR and the LF arrive in different chunks: U+2028, U+2029 and U+0085
are ordinary characters of a value, not line ends. ``data`` lines are joined with LF, one space
after the colon is dropped, ``id`` carries on to later events, an event is dispatched at a blank
line, and an unfinished event at the end of the stream is dropped.
"""

from __future__ import annotations

import codecs
import re
from typing import NamedTuple

_LINE_END = re.compile(r"\r\n|\r|\n")


def _lines(text: str) -> list[str]:
    """``text`` cut at its line ends; the last piece is the start of a line still coming."""
    if "\r" in text:
        # CRLF alone is common (the MCP SDK's streams): str.split is several times faster than
        # the regex, and the same when every CR is part of a CRLF.
        text_lf = text.replace("\r\n", "\n")
        if "\r" in text_lf:
            return _LINE_END.split(text)
        text = text_lf
    return text.split("\n")


class ServerSentEvent(NamedTuple):
    """One dispatched event.

    ``last_event_id`` is the stream's last event id at dispatch: an event without an ``id``
    field carries the one before it. ``oversized``: the event went over the decoder's limit,
    so its data was dropped (``data`` is empty); it is still reported, so that a reader can
    say which event it skipped.
    """

    type: str
    data: str
    last_event_id: str
    oversized: bool = False


class SSEDecoder:
    """Turns an event stream's bytes, in chunks of any size, into events::

        decoder = SSEDecoder()
        async for chunk in response.aiter_bytes():
            for event in decoder.feed(chunk):
                ...

    Args:
        max_event_chars: the most characters one event may hold in memory (its data and the line
            being read); past it, the event's data is dropped and it is dispatched ``oversized``.
            None for no limit.
    """

    def __init__(self, max_event_chars: int | None = None) -> None:
        self.max_event_chars = max_event_chars
        self.last_event_id = ""
        self.retry_ms: int | None = None
        """The reconnection time the server asked for last, if it did."""
        self._text = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._after_cr = False
        self._line: list[str] = []
        self._line_chars = 0
        self._skipping_line = False
        self._type = ""
        self._data: list[str] = []
        self._data_chars = 0
        self._oversized = False

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """The events that ``chunk`` completes, in order."""
        text = self._text.decode(chunk)
        if not text:
            return []
        if self._after_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF whose CR ended the previous chunk
        self._after_cr = text.endswith("\r")
        lines = _lines(text)
        rest = lines.pop()  # the start of a line still coming
        events: list[ServerSentEvent] = []
        for line in lines:
            event = self._take(line)
            if event is not None:
                events.append(event)
        self._extend_line(rest)
        return events

    def _take(self, piece: str) -> ServerSentEvent | None:
        """The end of a line (its start may have come in earlier chunks): the event it
        dispatches, if it is a blank line ending one."""
        self._extend_line(piece)
        line = self._finish_line()
        if line is None:
            return None
        if not line:
            return self._dispatch()
        self._field(line)
        return None

    def _extend_line(self, piece: str) -> None:
        if self._skipping_line or not piece:
            return
        self._line.append(piece)
        self._line_chars += len(piece)
        if self._over_limit():
            self._drop_event()
            self._skipping_line = True  # until this line ends
            self._line.clear()
            self._line_chars = 0

    def _finish_line(self) -> str | None:
        """The line just ended, or None when it was dropped for being over the limit."""
        line = None if self._skipping_line else "".join(self._line)
        self._line.clear()
        self._line_chars = 0
        self._skipping_line = False
        return line

    def _over_limit(self) -> bool:
        limit = self.max_event_chars
        return limit is not None and self._data_chars + self._line_chars > limit

    def _drop_event(self) -> None:
        self._oversized = True
        self._data.clear()
        self._data_chars = 0

    def _field(self, line: str) -> None:
        """A line that is not blank: a field, or a comment."""
        if line.startswith(":"):
            return  # a comment
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            if not self._oversized:
                self._data.append(value)
                self._data_chars += len(value) + 1
                if self._over_limit():
                    self._drop_event()
        elif name == "event":
            self._type = value
        elif name == "id" and "\0" not in value:
            self.last_event_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry_ms = int(value)

    def _dispatch(self) -> ServerSentEvent | None:
        kind = self._type or "message"
        data, oversized = self._data, self._oversized
        self._type, self._data, self._data_chars, self._oversized = "", [], 0, False
        if oversized:
            return ServerSentEvent(kind, "", self.last_event_id, oversized=True)
        if not data:
            return None  # an event with no data is not dispatched
        return ServerSentEvent(kind, "\n".join(data), self.last_event_id)
