"""The README's Python examples run as written: each one is claimed by a test here that runs it
(against a real ``herald serve`` where it talks to one), and an example no test claims fails."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.herald_process import HeraldProcess
from tests.http.test_mcp import new_agent, publish

ROOT = Path(__file__).resolve().parents[1]
README_URL = "http://127.0.0.1:8787"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def python_examples() -> list[str]:
    return PYTHON_BLOCK.findall((ROOT / "README.md").read_text())


def example(marker: str) -> str:
    """The one Python example of the README that contains ``marker``."""
    (found,) = [code for code in python_examples() if marker in code]
    return found


CLAIMED = ("client.drain(", "attach(server, notifier", "hub.drain(agent")
"""What each test below looks for in the example it runs."""


def run(code: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run an example as a script of its own, as a reader would; returns what it printed."""
    script = cwd / "example.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def herald(tmp_path: Path) -> Iterator[HeraldProcess]:
    process = HeraldProcess(f"sqlite:///{tmp_path / 'hub.db'}")
    yield process
    process.stop()


def test_every_python_example_is_run_by_a_test() -> None:
    examples = python_examples()
    assert examples
    for code in examples:
        assert sum(marker in code for marker in CLAIMED) == 1, code


def test_the_drain_example_prints_the_pending_events_and_acknowledges_them(
    herald: HeraldProcess, tmp_path: Path
) -> None:
    agent = new_agent(herald)
    publish(herald, agent["handle"], "first")
    publish(herald, agent["handle"], "second")
    code = example("client.drain(").replace(README_URL, herald.url)
    printed = run(code, tmp_path, {"HERALD_API_KEY": agent["api_key"]})
    assert printed.splitlines() == ["t first", "t second"]
    assert run(code, tmp_path, {"HERALD_API_KEY": agent["api_key"]}) == ""  # acknowledged


def test_the_mcp_attach_example_builds_a_server(tmp_path: Path) -> None:
    run(example("attach(server, notifier"), tmp_path)


def test_the_python_api_example_publishes_and_drains_in_a_file_of_its_own(
    tmp_path: Path,
) -> None:
    printed = run(example("hub.drain(agent"), tmp_path)
    assert printed.strip() == "['hello']"
    assert (tmp_path / "example.db").exists() and not (tmp_path / "herald.db").exists()


SHELL_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)


def commands(block: str) -> list[tuple[str, str | None]]:
    """The block's commands (continuation lines joined), each with the comment line after it
    that shows its answer, if any."""
    found: list[tuple[str, str | None]] = []
    pending = ""
    for line in block.splitlines():
        if pending:
            pending += " " + line.strip()
        elif line.startswith("# ") and found and found[-1][1] is None and "{" in line:
            found[-1] = (found[-1][0], line[2:])
            continue
        elif not line.strip() or line.startswith("#"):
            continue
        else:
            pending = line.strip()
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        found.append((pending, None))
        pending = ""
    return found


def test_the_curl_walkthrough_runs_against_a_real_hub(herald: HeraldProcess) -> None:
    (block,) = [
        b for b in SHELL_BLOCK.findall((ROOT / "README.md").read_text()) if "export ALICE" in b
    ]
    env = {**os.environ, "H": herald.url, "ADMIN": herald.admin_key}
    event_id = ""
    ran = 0
    for command, shown in commands(block):
        if command.startswith(("export ", "H=")):
            continue  # the test sets these: the hub's own URL and keys
        command = command.replace("evt_...", event_id)
        done = subprocess.run(
            ["bash", "-c", command], env=env, capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 0, (command, done.stderr)
        answer = json.loads(done.stdout)
        if "api_key" in answer:
            env["ALICE"] = answer["api_key"]
        if "duplicate" in answer:
            event_id = answer["id"]
        if shown is not None:  # every field the README shows is in the answer
            for field in re.findall(r'"(\w+)":', shown):
                assert field in done.stdout, (command, field, done.stdout)
        ran += 1
    assert ran == 5 and event_id.startswith("evt_")
