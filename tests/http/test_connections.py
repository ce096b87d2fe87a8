"""What no client can do to ``herald serve``'s connections: hold them without sending a request
(slowloris), open more than the process has files for, or send a request head without end; and
that each request finds its connection by its two ends, behind a proxy too."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import uvicorn

from herald import Hub
from herald.http import create_app
from herald.http.connections import ConnectionGuard, guarded_protocol
from tests.herald_process import HeraldProcess
from tests.waiting import WAIT_S, wait_until

FILE_LIMIT = 256
"""herald keeps 64 files of these for itself and 32 for bursts: 160 connections at most."""
SLOW_CONNECTIONS = 300
"""More slow connections than the process has files for, let alone connections."""
HEAD_START = b"GET /healthz HTTP/1.1\r\nHost: herald\r\nX-Slow: "
"""A request head begun and never finished."""


@pytest.fixture
def slow_sockets() -> Iterator[list[socket.socket]]:
    sockets: list[socket.socket] = []
    yield sockets
    for sock in sockets:
        sock.close()


def address(herald: HeraldProcess) -> tuple[str, int]:
    url = urlsplit(herald.url)
    assert url.hostname is not None and url.port is not None
    return url.hostname, url.port


def open_slow(herald: HeraldProcess, count: int, into: list[socket.socket]) -> None:
    for _ in range(count):
        sock = socket.create_connection(address(herald), timeout=WAIT_S)
        sock.sendall(HEAD_START)
        into.append(sock)


def drip(sockets: list[socket.socket]) -> None:
    """One more byte of the head on each connection, as a slowloris sends it."""
    for sock in sockets:
        with contextlib.suppress(OSError):  # herald closed it already
            sock.send(b"a")


def read_until_closed(sock: socket.socket, deadline: float) -> bytes:
    """Everything herald sends until it closes the connection; fails if it is still open at the
    deadline."""
    received = b""
    while True:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return received
        except TimeoutError:
            pytest.fail(f"herald kept the connection open; it sent {received[:200]!r}")
        if not chunk:
            return received
        received += chunk


def agent_keys(herald: HeraldProcess, count: int) -> list[str]:
    with herald.client(herald.admin_key) as admin:
        return [
            admin.post("/v1/agents", json={"handle": f"agent{n}"}).json()["api_key"]
            for n in range(count)
        ]


def stream_request(key: str) -> bytes:
    return (
        f"GET /channel/stream HTTP/1.1\r\nHost: herald\r\nAuthorization: Bearer {key}\r\n\r\n"
    ).encode()


def healthz(herald: HeraldProcess) -> int:
    """``GET /healthz`` on a connection of its own, as a new client would."""
    with httpx.Client(base_url=herald.url, timeout=WAIT_S) as client:
        return client.get("/healthz").status_code


def agents_status(herald: HeraldProcess) -> int | None:
    """The status of an admin's list of agents, or None when the connection is refused."""
    with contextlib.suppress(httpx.TransportError), herald.client(herald.admin_key) as admin:
        return admin.get("/v1/agents").status_code
    return None


def test_a_flood_of_slow_connections_cannot_keep_healthz_out(
    tmp_path: Path, slow_sockets: list[socket.socket]
) -> None:
    # A head timeout far beyond the test: only making room for new connections can close any.
    herald = HeraldProcess(
        f"sqlite:///{tmp_path / 'h.db'}",
        file_limit=(FILE_LIMIT, FILE_LIMIT),
        extra_args=("--head-timeout", "600"),
    )
    try:
        assert any("at most 160 open connections" in line for line in herald.lines), herald.lines
        while len(slow_sockets) < SLOW_CONNECTIONS:
            # A few at a time: more at once than the listen backlog would wait for SYN retries.
            open_slow(herald, 8, slow_sockets)
            drip(slow_sockets)
            assert healthz(herald) == 200
        deadline = time.monotonic() + WAIT_S
        oldest = slow_sockets[: SLOW_CONNECTIONS - 160]
        for sock in oldest:  # closed to make room, the longest waiting first
            read_until_closed(sock, deadline)
    finally:
        herald.stop()


def test_a_request_head_not_complete_in_time_closes_the_connection(
    tmp_path: Path, slow_sockets: list[socket.socket]
) -> None:
    herald = HeraldProcess(f"sqlite:///{tmp_path / 'h.db'}", extra_args=("--head-timeout", "1"))
    try:
        open_slow(herald, 20, slow_sockets)
        silent = socket.create_connection(address(herald), timeout=WAIT_S)
        slow_sockets.append(silent)
        deadline = time.monotonic() + WAIT_S
        answers = []
        for sock in slow_sockets[:20]:
            drip([sock])  # a byte now and then does not keep a connection
            answers.append(read_until_closed(sock, deadline))
        assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers), answers[0]
        assert b'"code":"head_timeout"' in answers[0]
        assert read_until_closed(silent, deadline) == b""  # it sent nothing: closed, no answer
        assert healthz(herald) == 200
    finally:
        herald.stop()


def test_a_kept_alive_connections_next_head_not_complete_in_time_is_answered_408(
    tmp_path: Path,
) -> None:
    # Its first request came whole in one read (no deadline was needed for it); the deadline of
    # the next head runs from that head's first byte.
    herald = HeraldProcess(f"sqlite:///{tmp_path / 'h.db'}", extra_args=("--head-timeout", "1"))
    try:
        with socket.create_connection(address(herald), timeout=WAIT_S) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: test\r\n\r\n")
            first = b""
            while b'"status"' not in first:
                chunk = sock.recv(4096)
                assert chunk, first
                first += chunk
            assert first.startswith(b"HTTP/1.1 200 "), first
            sock.sendall(HEAD_START)
            answer = read_until_closed(sock, time.monotonic() + WAIT_S)
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert b'"code":"head_timeout"' in answer
    finally:
        herald.stop()


def test_when_every_connection_has_a_request_in_flight_probes_are_answered_and_others_get_503(
    tmp_path: Path, slow_sockets: list[socket.socket]
) -> None:
    herald = HeraldProcess(
        f"sqlite:///{tmp_path / 'h.db'}",
        file_limit=(FILE_LIMIT, FILE_LIMIT),
        extra_args=("--streams-per-key", "0"),
    )
    try:
        # Five keys: one key may hold only a quarter of the 160 connections.
        keys = agent_keys(herald, 5)
        first_answers: list[bytes] = []
        for n in range(FILE_LIMIT):  # more than the cap; the old code ran out of files
            sock = socket.create_connection(address(herald), timeout=WAIT_S)
            slow_sockets.append(sock)
            sock.sendall(stream_request(keys[n % len(keys)]))
            answer = sock.recv(4096)
            if not answer.startswith(b"HTTP/1.1 200 "):
                first_answers.append(answer + read_until_closed(sock, time.monotonic() + WAIT_S))
                break
            first_answers.append(answer)
        assert 140 < len(first_answers) <= 161, len(first_answers)  # the cap, 160, and no more
        refusal = first_answers[-1]
        assert refusal.startswith(b"HTTP/1.1 503 "), refusal
        assert b"retry-after: 1\r\n" in refusal and b'"code":"server_busy"' in refusal
        for path in ("/healthz", "/readyz"):  # at the cap, probes are still answered
            with herald.client() as client:
                assert client.get(path).status_code == 200
        for sock in slow_sockets[:10]:  # streams end: room again
            sock.close()
        wait_until(lambda: agents_status(herald) == 200, "room after streams closed")
    finally:
        herald.stop()


def test_the_cap_is_below_the_hard_file_limit_and_said_at_start(tmp_path: Path) -> None:
    # The soft limit is raised to the hard one before the cap is taken from it.
    herald = HeraldProcess(f"sqlite:///{tmp_path / 'h.db'}", file_limit=(FILE_LIMIT, 1024))
    herald.stop()
    expected = "at most 640 open connections (the open-file limit is 1024)"
    assert any(expected in line for line in herald.lines), herald.lines


def test_a_request_head_over_64_kib_is_refused_with_431(herald: HeraldProcess) -> None:
    with socket.create_connection(address(herald), timeout=WAIT_S) as sock:
        sock.sendall(HEAD_START + b"a" * (65 * 1024) + b"\r\n\r\n")
        answer = read_until_closed(sock, time.monotonic() + WAIT_S)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert b'"code":"head_too_large"' in answer
    with socket.create_connection(address(herald), timeout=WAIT_S) as sock:
        long_url = b"GET /healthz?" + b"a" * (65 * 1024) + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        sock.sendall(long_url)
        answer = read_until_closed(sock, time.monotonic() + WAIT_S)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert b'"code":"head_too_large"' in answer
    with socket.create_connection(address(herald), timeout=WAIT_S) as sock:
        sock.sendall(HEAD_START + b"a" * (60 * 1024) + b"\r\nConnection: close\r\n\r\n")
        answer = read_until_closed(sock, time.monotonic() + WAIT_S)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]  # under the limit: served


def test_a_request_head_without_end_is_refused_without_reading_it_all(
    herald: HeraldProcess,
) -> None:
    with socket.create_connection(address(herald), timeout=WAIT_S) as sock:
        sock.sendall(HEAD_START)
        line = b"a" * 8190 + b"\r\nX-More: "
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            for _ in range(64 * 1024 * 1024 // len(line)):  # 64 MiB: far beyond any buffer
                sock.sendall(line)
        answer = read_until_closed(sock, time.monotonic() + WAIT_S)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert healthz(herald) == 200


def read_response(sock: socket.socket) -> bytes:
    """One whole response (head and its content-length body) from a kept-alive connection."""
    sock.settimeout(WAIT_S)
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        assert chunk, f"herald closed the connection; it sent {received[:200]!r}"
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head


def test_a_body_still_arriving_after_its_answer_is_not_taken_for_a_request_head(
    herald: HeraldProcess,
) -> None:
    with socket.create_connection(address(herald), timeout=WAIT_S) as sock:
        size = 300 * 1024
        sock.sendall(  # no key: refused before herald reads the body
            b"POST /v1/events HTTP/1.1\r\nHost: herald\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {size}\r\n\r\n".encode()
            + b"[" * 1024
        )
        assert read_response(sock).startswith(b"HTTP/1.1 401 ")
        sock.sendall(b" " * (size - 1024))  # the rest of that body, after its answer
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: herald\r\n\r\n")
        assert read_response(sock).startswith(b"HTTP/1.1 200 ")


def test_slow_bodies_of_one_key_cannot_keep_healthz_or_another_key_out(
    tmp_path: Path, slow_sockets: list[socket.socket]
) -> None:
    # Body deadlines far beyond the test: only the key's share of connections can keep room.
    herald = HeraldProcess(
        f"sqlite:///{tmp_path / 'h.db'}",
        file_limit=(FILE_LIMIT, FILE_LIMIT),
        extra_args=("--body-timeout", "600", "--body-idle-timeout", "600"),
    )
    try:
        assert any("one key may have 40 requests in flight" in line for line in herald.lines)
        (slow_key, other_key) = agent_keys(herald, 2)
        slow_body = (
            b"POST /channel/heartbeat HTTP/1.1\r\nHost: herald\r\nContent-Type: application/json"
            + f"\r\nAuthorization: Bearer {slow_key}\r\nContent-Length: 1000\r\n\r\n".encode()
            + b'{"cursor": '
        )
        while len(slow_sockets) < SLOW_CONNECTIONS:
            for _ in range(8):  # a few at a time, as the backlog allows
                sock = socket.create_connection(address(herald), timeout=WAIT_S)
                sock.sendall(slow_body)
                slow_sockets.append(sock)
            drip(slow_sockets)
            assert healthz(herald) == 200
            with herald.client(other_key) as other:
                assert other.post("/channel/heartbeat", json={}).status_code == 200
        refused = slow_sockets[-1]  # beyond the key's share: refused, its body unread
        head = read_response(refused)
        assert head.startswith(b"HTTP/1.1 429 "), head
        assert b"\r\nretry-after: 1" in head
    finally:
        herald.stop()


def test_a_request_a_trusted_proxy_forwards_keeps_its_connection_guarded_and_names_its_client(
    tmp_path: Path,
) -> None:
    # The access log reads a proxy's headers; the loopback client is a proxy trusted by default.
    herald = HeraldProcess(
        f"sqlite:///{tmp_path / 'h.db'}",
        extra_args=("--head-timeout", "1", "--access-log", "--log-level", "info"),
    )
    try:
        with socket.create_connection(address(herald), timeout=WAIT_S) as sock:
            sock.sendall(
                b"GET /healthz?forwarded HTTP/1.1\r\nHost: herald\r\n"
                b"X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Proto: https\r\n\r\n"
            )
            assert read_response(sock).startswith(b"HTTP/1.1 200 ")
            # The connection was told of its answer: the next request's head is timed again.
            sock.sendall(HEAD_START)
            answer = read_until_closed(sock, time.monotonic() + WAIT_S)
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        assert b'"code":"head_timeout"' in answer
        logged = herald.wait_for_line(lambda line: "/healthz?forwarded" in line)
        assert "203.0.113.7" in logged, logged  # the client the proxy named
    finally:
        herald.stop()


async def read_all(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection; fails if it is still open
    in time."""
    try:
        async with asyncio.timeout(WAIT_S):
            return await reader.read(-1)
    except TimeoutError:
        pytest.fail("herald kept the connection open")


@pytest.mark.anyio
async def test_a_request_started_in_a_fresh_context_still_finds_its_connection(
    tmp_path: Path,
) -> None:
    # uvicorn's reset_contextvars starts each request's task in a context of its own: nothing
    # the connection's wrapper sets around uvicorn's reading reaches the request.
    hub = Hub.from_url(f"sqlite:///{tmp_path / 'h.db'}")
    await hub.open()
    guard = ConnectionGuard(64, head_timeout_s=1)
    app = create_app(hub, maintenance=False, connections=guard)
    config = uvicorn.Config(
        app,
        log_level="critical",
        http=guarded_protocol(guard),
        proxy_headers=False,
        reset_contextvars=True,
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    listening = socket.create_server(("127.0.0.1", 0))
    serving = asyncio.create_task(server.serve(sockets=[listening]))
    try:
        host, port = listening.getsockname()
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: herald\r\n\r\n")
        async with asyncio.timeout(WAIT_S):
            head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 "), head
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        async with asyncio.timeout(WAIT_S):
            await reader.readexactly(length)
        # Told of its answer, the connection times the next request's head.
        writer.write(HEAD_START)
        answer = await read_all(reader)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    finally:
        server.should_exit = True
        await serving
        listening.close()
        await hub.close()
