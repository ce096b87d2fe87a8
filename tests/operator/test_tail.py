"""``herald tail`` as a subprocess against a real ``herald serve``: it shows each publish and
attempt as it happens (JSON lines, or coloured lines for people), narrowed by agent and type,
follows again from its last item when the hub restarts, and ends cleanly on Ctrl-C."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.herald_process import HeraldProcess


class Tail:
    """``herald tail`` running, its stdout and stderr read line by line with bounded waits."""

    def __init__(self, herald: HeraldProcess, *args: str) -> None:
        env = {**os.environ, "HERALD_URL": herald.url, "HERALD_ADMIN_KEY": herald.admin_key or ""}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "herald.cli", "tail", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: queue.Queue[str] = queue.Queue()
        self.err: queue.Queue[str] = queue.Queue()
        self.said: list[str] = []
        assert self.process.stdout is not None and self.process.stderr is not None
        self._pumps = [
            threading.Thread(target=_pump, args=(stream, lines), daemon=True)
            for stream, lines in ((self.process.stdout, self.out), (self.process.stderr, self.err))
        ]
        for pump in self._pumps:
            pump.start()

    def line(self, timeout_s: float = 30) -> str:
        return self.out.get(timeout=timeout_s)

    def json_line(self) -> dict[str, Any]:
        return dict(json.loads(self.line()))

    def note(self, containing: str, timeout_s: float = 30) -> str:
        """The next line on stderr that holds ``containing``."""
        while True:
            said = self.err.get(timeout=timeout_s)
            self.said.append(said)
            if containing in said:
                return said

    def interrupt(self) -> int:
        """Ctrl-C; its exit code."""
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=30)

    def stderr_to_the_end(self) -> list[str]:
        """Every line it wrote on stderr, once it has ended."""
        self.process.wait(timeout=30)
        for pump in self._pumps:
            pump.join(timeout=30)
        while not self.err.empty():
            self.said.append(self.err.get_nowait())
        return self.said

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


def _pump(stream: IO[str], lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line.rstrip("\n"))


@pytest.fixture(scope="module")
def herald(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeraldProcess]:
    process = HeraldProcess(f"sqlite:///{tmp_path_factory.mktemp('tail') / 'hub.db'}")
    yield process
    process.stop()


def admin_call(herald: HeraldProcess, method: str, path: str, body: Any) -> Any:
    with herald.client(herald.admin_key) as admin:
        answer = admin.request(method, path, json=body)
        assert answer.status_code < 300, answer.text
        return answer.json()


def publish(herald: HeraldProcess, to: str, type: str) -> str:
    return str(
        admin_call(herald, "POST", "/v1/events", {"to": to, "type": type, "text": "x"})["id"]
    )


def test_tail_shows_publishes_and_attempts_as_json_lines_and_ends_on_ctrl_c(
    herald: HeraldProcess,
) -> None:
    alice = admin_call(herald, "POST", "/v1/agents", {"handle": "tail-alice"})
    admin_call(herald, "POST", "/v1/agents", {"handle": "tail-bob"})
    tail = Tail(herald, "--json", "--agent", "tail-alice")
    try:
        assert "following" in tail.note("/v1/stream from now")
        publish(herald, "tail-bob", "build.ok")  # another agent's: not shown
        event_id = publish(herald, "tail-alice", "build.failed")
        with herald.client(alice["api_key"]) as agent:
            agent.post("/channel/heartbeat", json={})  # taken at once: an attempt, delivered
        published, attempt = tail.json_line(), tail.json_line()
        assert published["kind"] == "published" and published["event"]["id"] == event_id
        assert published["agent"]["handle"] == "tail-alice" and published["id"]
        assert (attempt["kind"], attempt["way"], attempt["outcome"]) == (
            "attempt",
            "heartbeat",
            "delivered",
        )
        assert tail.interrupt() == 0
        assert not any("Traceback" in line for line in tail.stderr_to_the_end())
    finally:
        tail.stop()


def test_tail_prints_a_line_for_people_by_type(herald: HeraldProcess) -> None:
    admin_call(herald, "POST", "/v1/agents", {"handle": "tail-carol"})
    tail = Tail(herald, "--type", "deploy.*")
    try:
        assert "/v1/stream from now" in tail.line()  # for people, on stdout
        publish(herald, "tail-carol", "chat.message")  # not of the type: not shown
        event_id = publish(herald, "tail-carol", "deploy.started")
        line = tail.line()
        assert "published" in line and "tail-carol" in line and "deploy.started" in line
        assert event_id in line and "#2" in line
    finally:
        tail.stop()


def test_tail_at_a_rate_shows_the_newest_after_a_line_for_what_was_left_out(
    herald: HeraldProcess,
) -> None:
    admin_call(herald, "POST", "/v1/agents", {"handle": "tail-dave"})
    tail = Tail(herald, "--json", "--agent", "tail-dave", "--max-rate", "1")
    try:
        tail.note("/v1/stream from now")
        ten = [{"to": "tail-dave", "type": f"burst.{n}", "text": "x"} for n in range(10)]
        admin_call(herald, "POST", "/v1/events", ten)  # one commit: one item a second at most
        skipped, newest = tail.json_line(), tail.json_line()
        assert skipped["kind"] == "skipped" and "left out" in skipped["message"]
        assert (newest["kind"], newest["event"]["type"]) == ("published", "burst.9")
    finally:
        tail.stop()


def test_tail_refuses_what_the_hub_refuses_in_one_line(herald: HeraldProcess) -> None:
    tail = Tail(herald, "--agent", "nobody-at-all")
    try:
        assert tail.process.wait(timeout=30) == 1
        (said,) = tail.stderr_to_the_end()
        assert said.startswith("herald: GET /v1/stream: 422") and "names no agent" in said
    finally:
        tail.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_tail_follows_again_from_its_last_item_when_the_hub_restarts(tmp_path: Path) -> None:
    store, port = f"sqlite:///{tmp_path / 'hub.db'}", free_port()
    herald = HeraldProcess(store, port=port)
    admin_call(herald, "POST", "/v1/agents", {"handle": "tail-dave"})
    tail = Tail(herald, "--json")
    try:
        tail.note("/v1/stream from now")
        first = publish(herald, "tail-dave", "one")
        assert tail.json_line()["event"]["id"] == first
        herald.kill()
        tail.note("following again")
        tail.process.send_signal(signal.SIGSTOP)  # it cannot follow until the hub is back
        herald = HeraldProcess(store, port=port)
        second = publish(herald, "tail-dave", "two")  # while the tail was away
        tail.process.send_signal(signal.SIGCONT)
        assert tail.note("/v1/stream after ")  # from the first's id...
        assert tail.json_line()["event"]["id"] == second  # ...so nothing is missed
        third = publish(herald, "tail-dave", "three")
        assert tail.json_line()["event"]["id"] == third
    finally:
        tail.stop()
        herald.stop()


def test_tail_whose_reader_goes_away_ends_quietly_with_the_shells_code(
    herald: HeraldProcess,
) -> None:
    # `herald tail --json | head -1`: head reads one line and closes the pipe.
    admin_call(herald, "POST", "/v1/agents", {"handle": "tail-dora"})
    read_end, write_end = os.pipe()
    env = {**os.environ, "HERALD_URL": herald.url, "HERALD_ADMIN_KEY": herald.admin_key or ""}
    process = subprocess.Popen(
        [sys.executable, "-m", "herald.cli", "tail", "--json", "--agent", "tail-dora"],
        env=env,
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write_end)
    try:
        assert process.stderr is not None
        assert "following" in process.stderr.readline()
        publish(herald, "tail-dora", "note")
        with os.fdopen(read_end, "rb") as reader:
            assert json.loads(reader.readline())["kind"] == "published"
        publish(herald, "tail-dora", "note")  # written to a pipe no one reads
        assert process.wait(timeout=30) == 141
        assert process.stderr.read() == ""
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
