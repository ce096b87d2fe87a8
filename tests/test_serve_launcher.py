"""The launcher's forked ``herald serve`` is the plain command's: same argv, environment,
working directory, limits, output and exit code."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.herald_process import HeraldProcess
from tests.serve_launcher import LAUNCHER, LaunchedProcess


def run_forked(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    process = LAUNCHER.start(argv, env=env, cwd=cwd, file_limit=None)
    said = process.stdout.read()
    return process.wait(timeout=60), said


def test_a_forked_command_sees_its_argv_environment_and_directory_as_a_fresh_one_does(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "HERALD_STORE": "sqlite:///from-the-variable.db", "HERALD_LEASE": "7"}
    argv = ["serve", "--check-config", "--webhook-allow", "loopback", "--config", "herald.toml"]
    (tmp_path / "herald.toml").write_text('log_format = "json"\n')
    fresh = subprocess.run(
        [sys.executable, "-m", "herald.cli", *argv],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
    )
    assert fresh.returncode == 0, fresh.stdout
    assert "from-the-variable.db" in fresh.stdout and 'log_format = "json"' in fresh.stdout
    assert run_forked(argv, env, tmp_path) == (0, fresh.stdout)


def test_a_forked_command_that_fails_says_so_on_its_output_with_its_exit_code(
    tmp_path: Path,
) -> None:
    code, said = run_forked(["serve", "--store", "mysql://x"], dict(os.environ), tmp_path)
    assert code == 2
    assert "unknown store URL" in said and "Traceback" not in said


def test_the_open_file_limit_asked_for_is_the_forked_servers(tmp_path: Path) -> None:
    """herald serve raises its soft limit to the hard one, which it tells."""
    herald = HeraldProcess(f"sqlite:///{tmp_path / 'h.db'}", file_limit=(700, 900))
    try:
        assert isinstance(herald.process, LaunchedProcess)
        assert any("the open-file limit is 900" in line for line in herald.lines), herald.lines
    finally:
        herald.stop()


def test_a_forked_server_is_signalled_polled_and_waited_for_as_a_subprocess_is(
    tmp_path: Path,
) -> None:
    herald = HeraldProcess(f"sqlite:///{tmp_path / 'h.db'}")
    assert herald.process.poll() is None
    with herald.client(herald.admin_key) as admin:
        assert admin.get("/v1/agents").status_code == 200
    herald.process.send_signal(signal.SIGKILL)
    assert herald.process.wait(timeout=30) == -signal.SIGKILL
    assert herald.process.poll() == -signal.SIGKILL
    herald.process.send_signal(signal.SIGTERM)  # ended and reaped: no pid to signal


def test_forked_servers_can_fork_workers_that_share_their_metrics(
    postgres_database_url: str,
) -> None:
    """The launcher has not imported the metrics library, which ``--workers`` sets up first."""
    herald = HeraldProcess(postgres_database_url, extra_args=("--workers", "2", "--metrics-open"))
    try:
        assert isinstance(herald.process, LaunchedProcess)
        with herald.client() as anyone:
            assert anyone.get("/metrics").status_code == 200
    finally:
        herald.stop()
    assert herald.process.returncode is not None
