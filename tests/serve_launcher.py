"""Starts ``herald serve`` processes for the tests without paying for an interpreter each time.

A fresh ``python -m herald.cli serve`` spends about 1.2 s of CPU importing its libraries
(mostly the MCP SDK's models) before it serves; the suite starts hundreds. Here one helper
process per test process imports them once (and starts nothing: no thread, no event loop) and
forks a child per start. The child is then made what the plain command would be (its argv,
environment, working directory, open-file limit, stdout and stderr) and runs the CLI's ``main``
as ``python -m herald.cli`` does, ending as that interpreter would. The helper reaps each child
and reports its exit code back.

What the helper imports leaves out the metrics library: ``herald serve --workers`` must import
it itself, after it has named the directory its workers share (``herald.workers``).

Run as ``python -m tests.serve_launcher`` it is the helper; ``Launcher`` and ``LaunchedProcess``
are the tests' side.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import resource
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

PRELOADED = (
    "mcp",
    "mcp.server",
    "mcp.client",
    "mcp.types",
    "mcp.server.auth.middleware.bearer_auth",
    "pydantic",
    "starlette.applications",
    "sse_starlette",
    "uvicorn.main",
    "uvicorn.protocols.http.httptools_impl",
    "httpx2",
    "asyncpg",
    "standardwebhooks",
    "herald.cli",
    "herald.cli_serve",
    "herald.config",
    "herald.capabilities",
    "herald.inputs.agents",
)
"""What the helper imports before it forks: what costs ``herald serve`` most to import, short
of the metrics library and what imports it."""

NOT_PRELOADED = "prometheus_client"
ROOT = Path(__file__).resolve().parent.parent
"""Where ``tests`` is a package the helper can be run from."""
REQUEST_BYTES = 1 << 20
"""The most a start request (its argv, environment and working directory, as JSON) may take."""
CODE = struct.Struct("!i")
"""A pid, then an exit code, as the helper reports them on a child's own socket."""


# The helper's side.


def preload() -> None:
    for name in PRELOADED:
        importlib.import_module(name)
    if NOT_PRELOADED in sys.modules:
        raise RuntimeError(f"{NOT_PRELOADED} was imported: herald serve --workers would refuse")
    if threading.active_count() != 1:
        raise RuntimeError("a thread started while importing: a fork would not carry it")


def serve_requests(control: socket.socket) -> dict[str, Any]:
    """Fork a child per request on ``control`` until it closes (then exit); returns only in a
    child, with the request it is to run, once every file of the helper is closed in it."""
    reporting: dict[int, socket.socket] = {}  # each child's pid, and where its end is told
    wake_read, wake_write = socket.socketpair()
    wake_write.setblocking(False)
    signal.set_wakeup_fd(wake_write.fileno())
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # a handler, so the fd is written
    chosen = selectors.DefaultSelector()
    chosen.register(control, selectors.EVENT_READ)
    chosen.register(wake_read, selectors.EVENT_READ)
    while True:
        for key, _ in chosen.select():
            if key.fileobj is wake_read:
                wake_read.recv(4096)
                report_ended(reporting)
                continue
            data, fds, flags, _ = socket.recv_fds(control, REQUEST_BYTES, 3)
            if not data:
                sys.exit(0)  # the tests' process is gone
            stdout, stderr, report_fd = fds
            report = socket.socket(fileno=report_fd)
            if flags & socket.MSG_TRUNC:
                raise RuntimeError("a start request longer than REQUEST_BYTES")
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.set_wakeup_fd(-1)
                for held in (chosen, control, wake_read, wake_write, report, *reporting.values()):
                    held.close()
                os.dup2(stdout, 1)
                os.dup2(stderr, 2)
                if stdout != stderr:
                    os.close(stderr)
                os.close(stdout)
                request: dict[str, Any] = json.loads(data)
                return request
            os.close(stdout)
            if stderr != stdout:
                os.close(stderr)
            report.sendall(CODE.pack(pid))
            reporting[pid] = report


def report_ended(reporting: dict[int, socket.socket]) -> None:
    """Reap every child that has ended and tell its exit code as ``subprocess`` would."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        report = reporting.pop(pid, None)
        if report is not None:
            with contextlib.suppress(OSError):  # its test may be done with it
                report.sendall(CODE.pack(os.waitstatus_to_exitcode(status)))
            report.close()


def run_as_herald(request: dict[str, Any]) -> None:
    """Become ``python -m herald.cli *argv`` started with this environment, in this directory."""
    os.environ.clear()
    os.environ.update(request["env"])
    if request["cwd"] is not None:
        os.chdir(request["cwd"])
    if request["file_limit"] is not None:
        resource.setrlimit(resource.RLIMIT_NOFILE, tuple(request["file_limit"]))
    import herald.cli

    sys.argv = [herald.cli.__file__, *request["argv"]]
    sys.path[0] = os.getcwd()  # as ``python -m`` puts it
    sys.exit(herald.cli.main())


# The tests' side.


class LaunchedProcess:
    """A forked ``herald serve``, with what the tests use of ``subprocess.Popen``."""

    def __init__(self, pid: int, report: socket.socket, stdout: IO[str]) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._report = report

    def poll(self) -> int | None:
        if self.returncode is None:
            self._report.setblocking(False)
            with contextlib.suppress(BlockingIOError):  # still running
                self._read_code()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._report.settimeout(timeout)
            try:
                self._read_code()
            except TimeoutError:
                raise subprocess.TimeoutExpired(f"herald serve (pid {self.pid})", timeout) from None
        assert self.returncode is not None
        return self.returncode

    def _read_code(self) -> None:
        data = self._report.recv(CODE.size, socket.MSG_WAITALL)
        if len(data) != CODE.size:
            raise RuntimeError(f"the launcher ended before herald serve (pid {self.pid})")
        (self.returncode,) = CODE.unpack(data)
        self._report.close()

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # not a pid since reaped, which another process may now have
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Launcher:
    """This process's helper, started on the first request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._helper: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None

    def start(
        self,
        argv: list[str],
        *,
        env: dict[str, str],
        cwd: Path | None,
        file_limit: tuple[int, int] | None,
    ) -> LaunchedProcess:
        """``python -m herald.cli *argv``, its stdout and stderr both to a pipe read as text."""
        request = {
            "argv": argv,
            "env": env,
            "cwd": None if cwd is None else str(cwd),
            "file_limit": file_limit,
        }
        read_end, write_end = os.pipe()
        report, report_there = socket.socketpair()
        try:
            with self._lock:
                control = self._started()
                socket.send_fds(
                    control,
                    [json.dumps(request).encode()],
                    [write_end, write_end, report_there.fileno()],
                )
        finally:
            os.close(write_end)
            report_there.close()
        report.settimeout(60)
        data = report.recv(CODE.size, socket.MSG_WAITALL)
        if len(data) != CODE.size:
            os.close(read_end)
            raise RuntimeError("the launcher could not start herald serve")
        (pid,) = CODE.unpack(data)
        return LaunchedProcess(pid, report, open(read_end, encoding=None))

    def _started(self) -> socket.socket:
        if self._control is None:
            control, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self._helper = subprocess.Popen(
                [sys.executable, "-m", "tests.serve_launcher", str(there.fileno())],
                pass_fds=(there.fileno(),),
                cwd=ROOT,
            )
            there.close()
            self._control = control
        return self._control

    def close(self) -> None:
        """End the helper (the processes it started live on, as ``subprocess``'s would)."""
        if self._control is not None and self._helper is not None:
            self._control.close()
            self._helper.wait(timeout=60)
            self._control = self._helper = None


LAUNCHER = Launcher()
"""This test process's launcher."""


if __name__ == "__main__":
    preload()
    run_as_herald(serve_requests(socket.socket(fileno=int(sys.argv[1]))))
