"""A real HTTP receiver for webhook tests: it records every request and answers from a script."""

from __future__ import annotations

import json
import queue
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HANG = -1
"""A scripted answer that never comes (until the test releases it): the sender times out."""


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    connection: int = 0
    """The sender's port: requests on one kept-alive connection share it."""

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Page:
    """What a GET of one path is answered with."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    stall: bool = False
    """Send the head and the first byte of the body, then hold the rest until the test
    releases the receiver (or the client gives up)."""


@dataclass
class Receiver:
    """Answers each request with the next scripted (status, headers); ``otherwise`` (200) when
    the script is out."""

    script: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    otherwise: int = 200
    """The status of every answer once the script is out: 500 keeps an endpoint failing for as
    long as the test looks at it, however long its retries take to come."""
    requests: list[Received] = field(default_factory=list)
    arrived: queue.Queue[Received] = field(default_factory=queue.Queue)
    release: threading.Event = field(default_factory=threading.Event)
    tls: ssl.SSLContext | None = None
    """Serve HTTPS with this context (its certificate and key loaded)."""
    server_names: list[str | None] = field(default_factory=list)
    """The TLS server name (SNI) each HTTPS client asked for."""
    on_request: Callable[[Received], None] | None = None
    """Called with each request before it is answered, in the receiver's thread: what happens
    while a request is in flight (a test's clock moving on, say)."""
    answers_challenges: bool = False
    """Answer an MCP Events ``verification`` POST as a subscriber's endpoint does: with its
    challenge (the script still decides the status)."""
    controls_ok: bool = False
    """Answer control envelopes (a body with a ``type``: gap, terminated, verification) with
    200, leaving the script to the events."""
    host: str = "127.0.0.1"
    """The loopback address to listen on (127.0.0.2 is another address of the same host)."""
    bind_port: int = 0
    """The port to listen on; 0: any free one."""
    pages: dict[str, Page] = field(default_factory=dict)
    """What a GET of each path is answered with (404 for any other)."""
    gets: list[str] = field(default_factory=list)
    """The path of every GET, in order (kept apart from the POSTs in ``requests``)."""

    def __post_init__(self) -> None:
        receiver = self
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real receivers do

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                got = Received(self.path, headers, body, self.client_address[1])
                with lock:
                    receiver.requests.append(got)
                    control = receiver.controls_ok and body.startswith(b'{"type":')
                    scripted = receiver.script and not control
                    otherwise = (receiver.otherwise, {})
                    status, headers = receiver.script.pop(0) if scripted else otherwise
                if receiver.on_request is not None:
                    receiver.on_request(got)
                receiver.arrived.put(got)
                if status == HANG:
                    receiver.release.wait(timeout=30)
                    status = 200
                answer = b"{}"
                if receiver.answers_challenges and body.startswith(b'{"type":"verification"'):
                    answer = json.dumps({"challenge": json.loads(body)["challenge"]}).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_GET(self) -> None:
                with lock:
                    receiver.gets.append(self.path)
                page = receiver.pages.get(self.path, Page(404))
                self.send_response(page.status)
                for name, value in page.headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(page.body)))
                self.end_headers()
                try:
                    if page.stall:
                        self.wfile.write(page.body[:1])
                        self.wfile.flush()
                        receiver.release.wait(timeout=30)
                        self.wfile.write(page.body[1:])
                    else:
                        self.wfile.write(page.body)
                except OSError:
                    self.close_connection = True  # the client stopped reading: it may

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((self.host, self.bind_port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        scheme = "http"
        if self.tls is not None:
            self.tls.sni_callback = lambda _conn, name, _context: receiver.server_names.append(name)
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        # Polled often for its shutdown: closing a receiver then takes milliseconds, not 0.5 s.
        threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True).start()
        self.url = f"{scheme}://{self.host}:{self.port}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
