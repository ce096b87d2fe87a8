"""``herald serve --workers N`` on PostgreSQL: N processes serve one port and share the work;
a worker that dies is replaced while the others serve, one that keeps dying as it starts stops
the whole; SIGTERM or SIGINT to the first stops them all, and so does its end; SQLite is refused
in one line."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from herald.workers import START_FAILURES
from tests.herald_process import HeraldProcess
from tests.http.test_mcp import new_agent, publish


def children_of(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it ended meanwhile
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def test_two_workers_serve_one_port_and_stop_together(postgres_database_url: str) -> None:
    herald = HeraldProcess(postgres_database_url, extra_args=("--workers", "2"))
    try:
        workers = children_of(herald.process.pid)
        assert len(workers) == 2
        agent = new_agent(herald)
        published = {publish(herald, agent["handle"], f"event {n}") for n in range(20)}
        with herald.client(agent["api_key"]) as client:
            drained = client.post("/channel/heartbeat", json={"limit": 100}).json()["events"]
        assert {event["id"] for event in drained} == published
    finally:
        herald.stop()
    assert herald.process.returncode == 0
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)


def test_workers_on_sqlite_are_refused_in_one_line(tmp_path: Path) -> None:
    store = tmp_path / "herald.db"
    done = subprocess.run(
        [sys.executable, "-m", "herald.cli", "serve", "--workers", "2", "--port", "0",
         "--store", f"sqlite:///{store}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2
    (said,) = done.stderr.splitlines()
    assert said.startswith("herald: --workers 2 needs a PostgreSQL store")
    assert not store.exists()


def test_a_sigint_to_the_first_process_alone_stops_every_worker(
    postgres_database_url: str,
) -> None:
    """As a supervisor that signals only the process it started does: no worker outlives it."""
    herald = HeraldProcess(postgres_database_url, extra_args=("--workers", "2"))
    try:
        workers = children_of(herald.process.pid)
        assert len(workers) == 2
        herald.process.send_signal(signal.SIGINT)
        herald.process.wait(timeout=30)
    finally:
        herald.stop()
        for pid in children_of(herald.process.pid):  # left running: not to outlive the test
            os.kill(pid, signal.SIGKILL)
    assert herald.process.returncode == 0
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)


def test_workers_end_when_the_first_process_is_killed_outright(
    postgres_database_url: str,
) -> None:
    """Killed outright (SIGKILL, the OOM killer), it can tell its workers nothing: the kernel
    does, and none serves on alone."""
    herald = HeraldProcess(postgres_database_url, extra_args=("--workers", "2"))
    workers = children_of(herald.process.pid)
    watched = {pid: os.pidfd_open(pid) for pid in workers}
    try:
        assert len(workers) == 2
        herald.kill()
        for pid, ended in watched.items():
            ready, _, _ = select.select([ended], [], [], 30)
            assert ready, f"worker {pid} still runs 30 s after the first process was killed"
    finally:
        for ended in watched.values():
            os.close(ended)
        for pid in workers:  # left running: not to outlive the test
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def start_workers(store_url: str, count: int) -> HeraldProcess:
    """``herald serve --workers count``, returned once every worker listens: a line said later
    is then a worker started later."""
    herald = HeraldProcess(store_url, extra_args=("--workers", str(count)))
    for _ in range(count - 1):  # the first one's line is read already
        herald.wait_for_line(lambda line: "listening on" in line)
    return herald


def answers_health(url: str) -> None:
    """``GET /healthz`` on a connection of its own (closed after), answered 200."""
    with httpx.Client(base_url=url, headers={"connection": "close"}, timeout=30) as client:
        response = client.get("/healthz")
    assert response.status_code == 200, response.text


def wait_for_end(pid: int) -> None:
    """Return once the process ``pid`` (not a child of this one) has ended (bounded)."""
    ended = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([ended], [], [], 30)
        assert ready, f"process {pid} still runs 30 s after it was killed"
    finally:
        os.close(ended)


def test_a_killed_worker_is_logged_and_replaced_while_the_others_keep_serving(
    postgres_database_url: str,
) -> None:
    herald = start_workers(postgres_database_url, 2)
    try:
        victim, survivor = sorted(children_of(herald.process.pid))
        answers_health(herald.url)
        os.kill(victim, signal.SIGKILL)
        wait_for_end(victim)
        for _ in range(10):  # the survivor serves meanwhile
            answers_health(herald.url)
        said = herald.wait_for_line(lambda line: f"worker {victim} ended" in line)
        assert "(SIGKILL)" in said and "starting another" in said
        herald.wait_for_line(lambda line: "listening on" in line)  # the new worker's
        (newcomer,) = children_of(herald.process.pid) - {survivor}
        assert newcomer != victim
        # With the survivor frozen, only the newcomer takes connections.
        os.kill(survivor, signal.SIGSTOP)
        try:
            for _ in range(5):
                answers_health(herald.url)
        finally:
            os.kill(survivor, signal.SIGCONT)
        agent = new_agent(herald)
        publish(herald, agent["handle"], "after the restart")
    finally:
        herald.stop()
    assert herald.process.returncode == 0
    assert not any(Path(f"/proc/{pid}").exists() for pid in (survivor, newcomer))


def test_workers_that_keep_dying_as_they_start_stop_herald_in_one_line() -> None:
    unreachable = "postgresql://herald@127.0.0.1:1/herald"
    done = subprocess.run(
        [sys.executable, "-m", "herald.cli", "serve", "--workers", "2", "--port", "0",
         "--store", unreachable, "--log-level", "warning"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    stops = [line for line in lines if "herald stops" in line]
    assert len(stops) == 1, lines
    assert "(exit code 2)" in stops[0] and f"{START_FAILURES} in a row" in stops[0]
    assert any("cannot open PostgreSQL store" in line for line in lines)
    assert sum("starting another" in line for line in lines) == START_FAILURES - 1
