"""``herald serve --workers N`` on PostgreSQL: N processes serve one port and share the work;
SIGTERM or SIGINT to the first stops them all, and so does its end; SQLite is refused in one
line."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

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
