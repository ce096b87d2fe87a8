"""A stand-in for a hub on loopback, for what a real hub will not do on cue: answer late, or go
away in the middle of a command. Each test gives the handler of its POSTs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from herald.operator.api import AdminApi


class PostHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def read_body(self) -> bytes:
        return self.rfile.read(int(self.headers["content-length"]))

    def answer_json(self, answer: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def api_of(handler: type[PostHandler]) -> Iterator[AdminApi]:
    """An ``AdminApi`` of a loopback server whose POSTs ``handler`` answers."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api = AdminApi(f"http://127.0.0.1:{server.server_address[1]}", "herald_admin_key")
    try:
        yield api
    finally:
        api.close()
        server.shutdown()
        server.server_close()
