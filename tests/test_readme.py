"""The README's Python examples run as written: each one is claimed by a test here that runs it
(against a real ``herald serve`` where it talks to one), and an example no test claims fails."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.herald_process import HeraldProcess
from tests.http.test_mcp import new_agent, publish
from tests.test_bridge import StdioPeer

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


def test_the_python_api_example_runs_again_on_its_store_and_stores_nothing_twice(
    tmp_path: Path,
) -> None:
    code = example("hub.drain(agent")
    assert run(code, tmp_path).strip() == "['hello']"
    assert run(code, tmp_path).strip() == "[]"


SHELL_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
SHELL_CLAIMED = (
    "./scripts/serve",
    "export ALICE",
    "curl -N $H/channel/stream",
    "herald bridge --url",
    "/webhook/rotate",
    "/openclaw",
    "herald drain --url",
)
"""What each shell test below looks for in the example it runs."""
VENV_BIN = str(Path(sys.executable).parent)
"""Where ``herald`` is installed beside the interpreter running the tests (``.venv/bin``)."""


def shell_example(marker: str) -> str:
    """The one shell example of the README that contains ``marker``."""
    (found,) = [b for b in SHELL_BLOCK.findall((ROOT / "README.md").read_text()) if marker in b]
    return found


def shell(command: str, env: dict[str, str]) -> dict[str, object]:
    """Run one command of an example with bash; returns the JSON it printed."""
    done = subprocess.run(
        ["bash", "-c", command],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, (command, done.stderr)
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def test_every_shell_example_is_run_by_a_test() -> None:
    blocks = SHELL_BLOCK.findall((ROOT / "README.md").read_text())
    assert blocks
    for block in blocks:
        assert sum(marker in block for marker in SHELL_CLAIMED) == 1, block


def test_the_quick_start_serves_the_hub_on_the_embedded_store(tmp_path: Path) -> None:
    serve, run_tests = shell_example("./scripts/serve").splitlines()
    assert run_tests.startswith("./scripts/test ")  # what runs this very suite
    command = serve.split("#", 1)[0].strip()
    herald = HeraldProcess(f"sqlite:///{tmp_path / 'herald.db'}", command=(str(ROOT / command),))
    try:
        agent = new_agent(herald)
        publish(herald, agent["handle"], "served")
        assert (tmp_path / "herald.db").exists()
    finally:
        herald.stop()


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


def test_the_stream_example_prints_the_retry_the_id_and_the_event(herald: HeraldProcess) -> None:
    command, *shown = shell_example("curl -N $H/channel/stream").splitlines()
    agent = new_agent(herald)
    event_id = publish(herald, agent["handle"], "New DM from @bob")
    env = {**os.environ, "H": herald.url, "ALICE": agent["api_key"]}
    curl = subprocess.Popen(["bash", "-c", command], env=env, stdout=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert curl.stdout is not None
        for line in curl.stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    try:
        printed = [lines.get(timeout=30) for _ in shown]
    finally:
        curl.kill()
        curl.wait(timeout=30)
    expected = [line.removeprefix("#").strip() for line in shown]
    assert printed[:2] == expected[:2]  # retry, the blank line
    # The id: a position, whose parts the README elides with "...".
    id_shown = ".+".join(re.escape(part) for part in expected[2].split("..."))
    assert re.fullmatch(id_shown, printed[2]), (printed[2], expected[2])
    data = json.loads(printed[-1].removeprefix("data: "))
    assert data["id"] == event_id and data["text"] == "New DM from @bob"
    for field in re.findall(r'"(\w+)":', expected[-1]):
        assert field in data


def test_the_bridge_example_starts_the_bridge_claude_code_talks_to(
    herald: HeraldProcess,
) -> None:
    block = shell_example("herald bridge --url")
    add = " ".join(line.rstrip("\\").strip() for line in block.splitlines()[:2])
    options, bridge = add.split(" -- ", 1)
    assert "--env HERALD_API_KEY=herald_agent_..." in options  # the key goes in the environment
    program, *args = bridge.split()
    assert program.endswith("/.venv/bin/herald")
    args = [herald.url if arg == README_URL else arg for arg in args]
    agent = new_agent(herald)
    peer = StdioPeer([f"{VENV_BIN}/herald", *args], agent["api_key"])
    try:
        capabilities = peer.initialize()  # as Claude Code does
        assert capabilities["experimental"] == {"claude/channel": {}}
        publish(herald, agent["handle"], "through the bridge")
        channel = peer.next("notifications/claude/channel")
        assert "through the bridge" in channel["params"]["content"]
    finally:
        peer.close()


def test_the_webhook_example_sets_rotates_and_lists_the_endpoint(herald: HeraldProcess) -> None:
    agent = new_agent(herald)
    env = {"H": herald.url, "ADMIN": str(herald.admin_key), "ID": agent["id"]}
    (put, rotate, listed) = [
        shell(command, env) for command, _ in commands(shell_example("/webhook/rotate"))
    ]
    assert str(put["secret"]).startswith("whsec_")
    assert rotate["secret"] != put["secret"] and rotate["rotating_until"]
    (endpoint,) = listed["endpoints"]  # type: ignore[misc]
    assert endpoint["kind"] == "webhook" and endpoint["state"] == "active"


def test_the_openclaw_example_points_the_agent_at_its_gateway(herald: HeraldProcess) -> None:
    agent = new_agent(herald)
    env = {"H": herald.url, "ADMIN": str(herald.admin_key), "ID": agent["id"]}
    ((command, _),) = commands(shell_example("/openclaw"))
    answer = shell(command, env)
    assert answer["kind"] == "openclaw" and answer["mode"] == "wake"
    assert "<hooks token>" not in json.dumps(answer)  # a secret is never shown back


def test_the_drain_example_prints_each_pending_event_as_a_json_line(
    herald: HeraldProcess,
) -> None:
    agent = new_agent(herald)
    publish(herald, agent["handle"], "first")
    publish(herald, agent["handle"], "second")
    ((command, _),) = commands(shell_example("herald drain --url"))
    command = (
        command.replace("herald_agent_...", agent["api_key"])
        .replace(README_URL, herald.url)
        .replace("[--follow]", "")  # an option: without it the drain ends once all is printed
    )
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-c", command], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["text"] for line in done.stdout.splitlines()] == ["first", "second"]
