"""A real ``herald serve`` subprocess on a scratch SQLite file (or a store it is given), and the
baseline servers (the bare publish and drain endpoint, the bare-SDK MCP server, the bare SSE
broadcast), each bound to 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.loadgen import Address, Connection, encode_request

HOST = "127.0.0.1"
# The baselines run as modules of this package, found from the project root.
PROJECT_ROOT = str(Path(__file__).resolve().parent.parent)
LISTENING = re.compile(r"listening on http://([0-9.]+):(\d+)")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


class ServerFailure(Exception):
    """herald serve did not start, or did not answer as expected."""


@dataclass(frozen=True)
class Server:
    """A running herald: where it listens, its admin key and its process id."""

    address: Address
    admin_key: str
    pid: int
    log_path: Path


async def _wait_listening(process: asyncio.subprocess.Process, log_path: Path) -> Address:
    assert process.stdout is not None
    seen: list[str] = []
    while True:
        raw = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S)
        if not raw:
            log = log_path.read_text(errors="replace")[-2000:]
            raise ServerFailure(f"herald serve exited before listening: {seen!r}\n{log}")
        line = raw.decode(errors="replace").strip()
        seen.append(line)
        match = LISTENING.search(line)
        if match:
            return Address(match.group(1), int(match.group(2)))


async def _drain(stream: asyncio.StreamReader | None) -> None:
    """Keep reading the server's stdout so that it can never block on a full pipe."""
    if stream is not None:
        while await stream.readline():
            pass


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()


@contextlib.asynccontextmanager
async def _subprocess(
    command: list[str], env: dict[str, str], log_path: Path
) -> AsyncIterator[tuple[Address, int]]:
    """Start a server that prints ``listening on http://HOST:PORT``; stop it (SIGINT) on exit."""
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.PIPE, stderr=log, env=env
        )
    drainer: asyncio.Task[None] | None = None
    try:
        address = await _wait_listening(process, log_path)
        drainer = asyncio.create_task(_drain(process.stdout))
        yield address, process.pid
    finally:
        await _stop(process)
        if drainer is not None:
            drainer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await drainer


@contextlib.asynccontextmanager
async def herald_server(
    workdir: Path, name: str, store: str | None = None, extra: Sequence[str] = ()
) -> AsyncIterator[Server]:
    """Run ``herald serve`` on ``store`` (default: ``workdir/name.db``) with a fresh admin key
    and ``extra`` flags; stop it on exit."""
    admin_key = "herald_admin_bench_" + secrets.token_urlsafe(16)
    store = store or f"sqlite:///{workdir / f'{name}.db'}"
    log_path = workdir / f"{name}.log"
    # The benchmarks measure herald, not its per-key limits: one key publishes every event and
    # one agent holds thousands of streams.
    command = [
        sys.executable, "-m", "herald.cli", "serve",
        "--store", store, "--host", HOST, "--port", "0", "--log-level", "warning",
        "--publish-rate", "0", "--streams-per-key", "0", "--requests-per-key", "0",
        "--sessions-per-key", "0", *extra,
    ]  # fmt: skip
    env = {**os.environ, "HERALD_ADMIN_KEY": admin_key}
    async with _subprocess(command, env, log_path) as (address, pid):
        yield Server(address, admin_key, pid, log_path)


@contextlib.asynccontextmanager
async def sdk_server(workdir: Path, name: str) -> AsyncIterator[Server]:
    """Run the bare-SDK MCP server of ``mcp_baseline.py`` (no herald, no store); it has no
    admin key (``admin_key`` is empty)."""
    log_path = workdir / f"{name}.log"
    command = [sys.executable, "-m", "benchmarks.mcp_baseline", "--host", HOST, "--port", "0"]
    async with _subprocess(command, _baseline_env(), log_path) as (address, pid):
        yield Server(address, "", pid, log_path)


@contextlib.asynccontextmanager
async def stream_server(workdir: Path, name: str) -> AsyncIterator[Server]:
    """Run the bare SSE broadcast of ``stream_baseline.py`` (no herald, no store)."""
    log_path = workdir / f"{name}.log"
    command = [sys.executable, "-m", "benchmarks.stream_baseline", "--host", HOST, "--port", "0"]
    async with _subprocess(command, _baseline_env(), log_path) as (address, pid):
        yield Server(address, "", pid, log_path)


@contextlib.asynccontextmanager
async def bare_server(workdir: Path, name: str, store: str | None = None) -> AsyncIterator[Server]:
    """Run the bare publish and drain endpoint of ``bare_server.py`` on ``store`` (default: a
    fresh ``workdir/name.db``); it checks no key (``admin_key`` is empty: an agent's key is its
    handle)."""
    store = store or f"sqlite:///{workdir / f'{name}.db'}"
    log_path = workdir / f"{name}.log"
    command = [
        sys.executable, "-m", "benchmarks.bare_server",
        "--store", store, "--host", HOST, "--port", "0",
    ]  # fmt: skip
    async with _subprocess(command, _baseline_env(), log_path) as (address, pid):
        yield Server(address, "", pid, log_path)


def _baseline_env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (PROJECT_ROOT, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


async def create_agent(server: Server, handle: str) -> str:
    """Create an agent through the API; returns its key."""
    body = json.dumps({"handle": handle}).encode()
    request = encode_request(
        "POST", "/v1/agents", server.address, token=server.admin_key, body=body
    )
    connection = await Connection.open(server.address)
    try:
        status, answer = await connection.call(request)
    finally:
        await connection.close()
    if status != 201:
        raise ServerFailure(f"POST /v1/agents answered {status}: {answer[:300]!r}")
    return str(json.loads(answer)["api_key"])


async def create_agents(server: Server, handles: list[str]) -> list[str]:
    """Create an agent of each handle through the API, on one connection; returns their keys."""
    connection = await Connection.open(server.address)
    keys = []
    try:
        for handle in handles:
            body = json.dumps({"handle": handle}).encode()
            request = encode_request(
                "POST", "/v1/agents", server.address, token=server.admin_key, body=body
            )
            status, answer = await connection.call(request)
            if status != 201:
                raise ServerFailure(f"POST /v1/agents answered {status}: {answer[:300]!r}")
            keys.append(str(json.loads(answer)["api_key"]))
    finally:
        await connection.close()
    return keys
