"""``herald serve`` as a user starts it: its admin key, its defaults, its store URL errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.herald_process import HeraldProcess


def test_the_first_start_generates_an_admin_key_shows_it_once_and_stores_it_hashed(
    tmp_path: Path,
) -> None:
    store = tmp_path / "herald.db"
    first = HeraldProcess(f"sqlite:///{store}", admin_key=None)
    try:
        keys = [m.group(0) for line in first.lines if (m := re.search(r"herald_admin_\S+", line))]
        assert len(keys) == 1
        (key,) = keys
        with first.client(key) as admin:
            assert admin.post("/v1/agents", json={"handle": "alice"}).status_code == 201
    finally:
        first.stop()
    second = HeraldProcess(f"sqlite:///{store}", admin_key=None)
    try:
        assert not any("herald_admin_" in line for line in second.lines)
        with second.client(key) as admin:
            assert admin.get("/v1/agents").status_code == 200
    finally:
        second.stop()
    for path in tmp_path.iterdir():
        assert key.encode() not in path.read_bytes(), f"the admin key is in clear in {path.name}"
    assert not any(key in line for line in second.output())


def test_agent_keys_are_not_stored_in_clear(tmp_path: Path) -> None:
    herald = HeraldProcess(f"sqlite:///{tmp_path / 'herald.db'}")
    try:
        with herald.client(herald.admin_key) as admin:
            key = admin.post("/v1/agents", json={"handle": "alice"}).json()["api_key"]
    finally:
        herald.stop()
    for path in tmp_path.iterdir():
        assert key.encode() not in path.read_bytes()
    assert not any(key in line for line in herald.output())


def test_serve_defaults_to_a_sqlite_file_in_the_working_directory(tmp_path: Path) -> None:
    herald = HeraldProcess("sqlite:///herald.db", cwd=tmp_path)
    herald.stop()
    assert (tmp_path / "herald.db").exists()


def test_an_unknown_store_url_is_a_clear_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "herald.cli", "serve", "--store", "mysql://x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "unknown store URL" in result.stderr and "Traceback" not in result.stderr
