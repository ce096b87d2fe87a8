"""A tiny real SSE server on loopback that serves a crafted ``/channel/stream``: what herald itself
never sends (invalid JSON, payloads that are not events), to prove that clients survive it."""

from __future__ import annotations

import json
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from herald.models import Event, EventStatus

HOLD_OPEN_S = 60.0


def event_frame(seq: int, text: str) -> bytes:
    """A well-formed event frame, as herald writes one."""
    event = Event(
        id=f"evt_crafted{seq:04d}",
        agent_id="agt_crafted",
        seq=seq,
        type="dm.received",
        text=text,
        data_json="null",
        created_at=1_700_000_000_000,
        status=EventStatus.PENDING,
    )
    return f"id: {seq}\ndata: {json.dumps(event.to_json())}\n\n".encode()


class CraftedStream:
    """The n-th ``GET /channel/stream`` gets the n-th list of frames, then its response ends;
    the last list's response is held open until ``close()``. ``resumed_from`` receives each
    request's ``Last-Event-ID``, in order."""

    def __init__(self, connections: list[list[bytes]]) -> None:
        self.resumed_from: queue.Queue[str | None] = queue.Queue()
        self._connections = list(connections)
        self._stop = threading.Event()
        crafted = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                crafted.serve(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def serve(self, request: BaseHTTPRequestHandler) -> None:
        self.resumed_from.put(request.headers.get("last-event-id"))
        frames = self._connections.pop(0) if self._connections else []
        request.send_response(200)
        request.send_header("content-type", "text/event-stream; charset=utf-8")
        request.end_headers()
        for frame in frames:
            request.wfile.write(frame)
            request.wfile.flush()
        if not self._connections:
            self._stop.wait(HOLD_OPEN_S)

    def close(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
