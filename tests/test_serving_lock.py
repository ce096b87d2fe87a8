"""One ``herald serve`` per SQLite store: a second is refused at start, and the lock goes with
the process that held it, even when it crashes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.herald_process import HeraldProcess


def serve_once(store_url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``herald serve`` that is expected to refuse to start: it must exit by itself."""
    return subprocess.run(
        [sys.executable, "-m", "herald.cli", "serve", "--port", "0", "--store", store_url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def test_a_second_serve_on_a_sqlite_store_is_refused_in_one_line(tmp_path: Path) -> None:
    first = HeraldProcess(f"sqlite:///{tmp_path / 'herald.db'}")
    try:
        # The same file by another name: the lock is the file's, not the URL's.
        second = serve_once("sqlite:///herald.db", cwd=tmp_path)
        assert first.process.poll() is None
    finally:
        first.stop()
    assert second.returncode == 2
    assert second.stdout == ""
    assert second.stderr.splitlines() == [
        f"herald: herald.db is in use by another herald (pid {first.process.pid}); a SQLite store"
        " is served by one process: stop that one, or use PostgreSQL (--store postgresql://...)"
        " to run several"
    ]


def test_a_crashed_serve_leaves_no_lock_behind(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'herald.db'}"
    HeraldProcess(url).kill()
    after_the_crash = HeraldProcess(url)
    try:
        with after_the_crash.client() as client:
            assert client.get("/healthz").status_code == 200
    finally:
        after_the_crash.stop()
