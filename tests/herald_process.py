"""A real ``herald serve`` process for end-to-end tests."""

from __future__ import annotations

import os
import queue
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.serve_launcher import LAUNCHER, LaunchedProcess

ADMIN_KEY = "herald-test-admin-key-0123456789abcdef"
STARTUP_TIMEOUT_S = 120
"""How long ``herald serve`` may take to say it listens, in all: a loaded machine running the
suite on several processes takes seconds to import it; a start that holds is seen at once."""


SERVE = (sys.executable, "-m", "herald.cli", "serve")
"""The plain command that starts ``herald serve``: a fresh interpreter."""


class HeraldProcess:
    """Starts ``herald serve --port 0`` on a store URL and waits (bounded) for it to listen.

    By default it is forked from this test process's launcher (``tests.serve_launcher``), which
    has imported herald's libraries once: the child runs what ``python -m herald.cli serve``
    runs, at a fraction of the CPU. ``command`` (what starts ``herald serve``; the flags follow
    it) or ``fresh_interpreter`` start it the plain way instead, for a test of the installed
    entry point or of what a new interpreter does."""

    process: subprocess.Popen[str] | LaunchedProcess

    def __init__(
        self,
        store_url: str,
        *,
        admin_key: str | None = ADMIN_KEY,
        cwd: Path | None = None,
        extra_args: tuple[str, ...] = (),
        port: int = 0,
        file_limit: tuple[int, int] | None = None,
        command: tuple[str, ...] | None = None,
        fresh_interpreter: bool = False,
    ) -> None:
        env = {k: v for k, v in os.environ.items() if k != "HERALD_ADMIN_KEY"}
        if admin_key is not None:
            env["HERALD_ADMIN_KEY"] = admin_key
        self.admin_key = admin_key
        self.store_url = store_url
        flags = ["--port", str(port), "--store", store_url, "--log-level", "warning", *extra_args]
        if command is None and not fresh_interpreter:
            self.process = LAUNCHER.start(
                ["serve", *flags], env=env, cwd=cwd, file_limit=file_limit
            )
        else:
            self.process = subprocess.Popen(
                [*(command or SERVE), *flags],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
                cwd=cwd,
                preexec_fn=_limit_files(file_limit) if file_limit is not None else None,
            )
        self.lines: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.url = self._wait_for_listening()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _wait_for_listening(self) -> str:
        """The URL of the line that says it listens: its lines (or its end) are waited for, at
        most ``STARTUP_TIMEOUT_S`` in all."""
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.kill()
                raise RuntimeError(f"herald serve did not start; it said: {self.lines}") from None
            if line is None:
                raise RuntimeError(f"herald serve exited; it said: {self.lines}")
            self.lines.append(line)
            if "listening on " in line:
                return line.split("listening on ", 1)[1].split(" ", 1)[0]

    def wait_for_line(self, wanted: Callable[[str], bool], timeout_s: float = 30) -> str:
        """The first line from now on that is ``wanted``, waiting for it at most ``timeout_s``.

        Raises:
            TimeoutError: none came in time, or the process ended.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"no such line within {timeout_s} s: {self.lines}") from None
            if line is None:
                raise TimeoutError(f"herald serve ended without such a line: {self.lines}")
            self.lines.append(line)
            if wanted(line):
                return line

    def output(self) -> list[str]:
        """Every line the process has printed so far."""
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return self.lines
            if line is not None:
                self.lines.append(line)

    def client(self, key: str | None = None) -> httpx.Client:
        headers = {"authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as in a crash."""
        self.process.kill()
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def _limit_files(limit: tuple[int, int]) -> Callable[[], None]:
    """Run in the child before it starts: its open-file limit is ``limit`` (soft, hard)."""

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, limit)

    return limit_files
