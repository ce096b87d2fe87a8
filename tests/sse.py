"""A small SSE reader for tests: frames as they arrive, with bounded waits."""

from __future__ import annotations

import json
import queue
import threading
from dataclasses import dataclass
from typing import Any

import httpx

from herald.sse import SSEDecoder


@dataclass(frozen=True)
class Frame:
    event: str
    id: int | None
    """The seq of the stream's last event id at this frame (a frame without an ``id`` carries
    the one before it)."""
    data: Any
    raw_id: str = ""
    """The last event id as the stream wrote it, as the client would resume from it."""


class SSEReader:
    """Reads ``GET /channel/stream`` (or ``path``) in a thread; ``next()`` waits (bounded) for
    each frame."""

    def __init__(
        self,
        url: str,
        key: str | None,
        *,
        last_event_id: int | str | None = None,
        after: int | str | None = None,
        path: str = "/channel/stream",
        params: dict[str, str] | None = None,
    ) -> None:
        headers = {"authorization": f"Bearer {key}"} if key is not None else {}
        if last_event_id is not None:
            headers["last-event-id"] = str(last_event_id)
        params = {**(params or {}), **({"after": str(after)} if after is not None else {})}
        self._frames: queue.Queue[Frame | BaseException | None] = queue.Queue()
        self._client = httpx.Client(
            base_url=url, headers=headers, timeout=httpx.Timeout(30, read=60)
        )
        self._request = self._client.build_request("GET", path, params=params)
        self.status: int | None = None
        self.last_id = ""
        """The last event id of the last frame read: where the client would resume."""
        self.opened = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        assert self.opened.wait(30), "the stream did not open"

    def _read(self) -> None:
        try:
            response = self._client.send(self._request, stream=True)
            self.status = response.status_code
            self.opened.set()
            decoder = SSEDecoder()
            for chunk in response.iter_bytes():
                for event in decoder.feed(chunk):
                    raw = event.last_event_id
                    seq = raw.rpartition("~")[2]  # a position ends with its seq
                    event_id = int(seq) if seq.isdigit() else None
                    self._frames.put(Frame(event.type, event_id, json.loads(event.data), raw))
            self._frames.put(None)
        except BaseException as exc:  # handed to the test
            self.opened.set()
            self._frames.put(exc)

    def next(self, timeout_s: float = 20.0) -> Frame | None:
        """The next frame, or None when the server ended the stream."""
        item = self._frames.get(timeout=timeout_s)
        if isinstance(item, BaseException):
            raise item
        if item is not None:
            self.last_id = item.raw_id
        return item

    def close(self) -> None:
        self._client.close()
