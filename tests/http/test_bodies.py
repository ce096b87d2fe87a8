"""Request bodies have deadlines: one that stops, or trickles in, is refused with 408 and its
connection closed, and a body left unread behind an early answer cannot hold its connection
either; what the HTTP parser refuses is answered in herald's shape too. herald's app on a real
uvicorn server with herald's connection guard, on loopback; the total deadline is read from a
clock the tests move."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from herald import Hub
from herald.config import HttpConfig
from herald.http import create_app
from herald.http.connections import ConnectionGuard, guarded_protocol
from herald.testing import ManualClock

pytestmark = pytest.mark.anyio

ADMIN_KEY = "herald-test-admin-key-0123456789abcdef"
WAIT_S = 30.0
"""Every wait is bounded by this; none of them is expected to take near as long."""
LONG_S = 600.0
"""A deadline far beyond any test: it never ends one."""


@dataclass
class Served:
    port: int
    clock: ManualClock

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port)


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, http: HttpConfig) -> AsyncIterator[Served]:
    """herald's app as ``herald serve`` runs it, with the body deadlines of ``http``."""
    clock = ManualClock()
    hub = Hub.from_url(f"sqlite:///{tmp_path / 'herald.db'}", clock=clock)
    await hub.open()
    await hub.setup_admin_key(ADMIN_KEY)
    guard = ConnectionGuard(64, LONG_S, http.body_timeout_s)
    app = create_app(hub, maintenance=False, http_config=http, connections=guard)
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="critical",
        http=guarded_protocol(guard),
        proxy_headers=False,
        timeout_graceful_shutdown=1,  # a request a test left hanging does not hold it up
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(WAIT_S):
            while not server.started:
                await asyncio.sleep(0.01)  # polling for the listening socket, bounded
        yield Served(server.servers[0].sockets[0].getsockname()[1], clock)
    finally:
        server.should_exit = True
        await task
        await hub.close()


def post_head(path: str, key: str | None, length: int) -> bytes:
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    return (
        f"POST {path} HTTP/1.1\r\nHost: herald\r\nContent-Type: application/json\r\n{auth}"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


async def read_until_closed(reader: asyncio.StreamReader) -> bytes:
    """All herald sends until it closes the connection; fails if it is still open in time."""
    try:
        async with asyncio.timeout(WAIT_S):
            return await reader.read(-1)
    except TimeoutError:
        pytest.fail("herald kept the connection open")
    except ConnectionResetError:
        return b""


def error_of(answer: bytes) -> dict[str, Any]:
    body = answer.partition(b"\r\n\r\n")[2]
    error: dict[str, Any] = json.loads(body)["error"]
    return error


async def new_agent_key(served: Served, handle: str) -> str:
    reader, writer = await served.connect()
    body = json.dumps({"handle": handle}).encode()
    writer.write(post_head("/v1/agents", ADMIN_KEY, len(body)).replace(b"1.1", b"1.0", 1) + body)
    answer = await read_until_closed(reader)
    writer.close()
    key: str = json.loads(answer.partition(b"\r\n\r\n")[2])["api_key"]
    return key


async def test_a_body_that_stops_is_refused_with_408_and_its_connection_closed(
    tmp_path: Path,
) -> None:
    http = HttpConfig(body_timeout_s=LONG_S, body_idle_timeout_s=0.2)
    async with serving(tmp_path, http) as served:
        agent_key = await new_agent_key(served, "alice")
        stalled = {  # each route that reads a body, half of which is sent
            "/v1/events": ADMIN_KEY,
            "/channel/heartbeat": agent_key,
            "/mcp": agent_key,
        }
        for path, key in stalled.items():
            reader, writer = await served.connect()
            writer.write(post_head(path, key, 100) + b'{"to": "alice", ')
            answer = await read_until_closed(reader)
            writer.close()
            assert answer.startswith(b"HTTP/1.1 408 "), (path, answer[:300])
            assert b"\r\nconnection: close\r\n" in answer
            assert error_of(answer)["code"] == "body_timeout"
            assert "sent nothing for 0.2 s" in error_of(answer)["message"]


async def test_a_body_that_trickles_in_is_refused_with_408_once_its_time_is_up(
    tmp_path: Path,
) -> None:
    http = HttpConfig(body_timeout_s=60, body_idle_timeout_s=LONG_S)
    async with serving(tmp_path, http) as served:
        reader, writer = await served.connect()
        writer.write(post_head("/v1/events", ADMIN_KEY, 1000) + b"[")
        answer = b""
        for _ in range(100):  # a byte, and a minute later another: the body never ends
            writer.write(b" ")
            served.clock.advance(61)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.1):
                    answer = await reader.read(65536)
            if answer:
                break
        answer += await read_until_closed(reader)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:300]
        assert error_of(answer)["code"] == "body_timeout"
        assert "did not arrive whole within 60 s" in error_of(answer)["message"]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_body_left_unread_after_an_early_answer_cannot_hold_its_connection(
    tmp_path: Path, chunked: bool
) -> None:
    http = HttpConfig(body_timeout_s=0.5, body_idle_timeout_s=LONG_S)
    async with serving(tmp_path, http) as served:
        reader, writer = await served.connect()
        head = post_head("/v1/events", None, 1000)  # no key: refused at once
        if chunked:
            head = head.replace(b"Content-Length: 1000", b"Transfer-Encoding: chunked")
        writer.write(head + (b"1\r\n[\r\n" if chunked else b"["))
        async with asyncio.timeout(WAIT_S):
            head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 401 "), head
        closed = asyncio.create_task(read_until_closed(reader))
        async with asyncio.timeout(WAIT_S):
            while not closed.done():  # the rest of the body, a byte now and then
                writer.write(b"1\r\n \r\n" if chunked else b" ")
                await asyncio.wait([closed], timeout=0.05)
        await closed
        writer.close()


async def test_a_request_the_http_parser_refuses_gets_400_in_heralds_shape(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path, HttpConfig()) as served:
        reader, writer = await served.connect()
        writer.write(
            b"POST /v1/events HTTP/1.1\r\nHost: herald\r\n"
            b"Content-Type: application/json\x01\r\nContent-Length: 2\r\n\r\n{}"
        )
        answer = await read_until_closed(reader)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:300]
        assert b"\r\ncontent-type: application/json\r\n" in answer
        assert error_of(answer)["code"] == "bad_request"
        assert "control character" in error_of(answer)["message"]
