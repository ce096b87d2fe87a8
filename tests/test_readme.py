"""The examples of the README and of the pages under docs/ run as written: each Python, shell and
JavaScript example is claimed by a test here that runs it (against a real ``herald serve`` where it
talks to one), and an example no test claims fails."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.herald_process import HeraldProcess
from tests.http.test_mcp import new_agent, publish
from tests.test_bridge import StdioPeer

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
"""The pages whose examples a reader runs: the README and every page under docs/."""
README_URL = "http://127.0.0.1:8787"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(pattern: re.Pattern[str]) -> list[str]:
    """Every code block of the pages that ``pattern`` finds, page after page."""
    return [block for page in PAGES for block in pattern.findall(page.read_text())]


def python_examples() -> list[str]:
    return blocks(PYTHON_BLOCK)


def example(marker: str) -> str:
    """The one Python example of the pages that contains ``marker``."""
    (found,) = [code for code in python_examples() if marker in code]
    return found


CLAIMED = (
    "client.drain(",
    "attach(server, notifier",
    "hub.drain(agent",
    "streamable_http_client(",
    "webhook.verify(",
)
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


@pytest.fixture(scope="module")
def herald(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeraldProcess]:
    """One hub for the module's examples that each work on an agent of their own."""
    process = HeraldProcess(f"sqlite:///{tmp_path_factory.mktemp('readme') / 'hub.db'}")
    yield process
    process.stop()


@pytest.fixture
def own_herald(tmp_path: Path) -> Iterator[HeraldProcess]:
    """A hub of the test's own: for an example that names its agent (``alice``) as written."""
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
    "events/subscribe",
    "alice/webhook",
)
"""What each shell test below looks for in the example it runs."""
VENV_BIN = str(Path(sys.executable).parent)
"""Where ``herald`` is installed beside the interpreter running the tests (``.venv/bin``)."""


def shell_example(marker: str) -> str:
    """The one shell example of the pages that contains ``marker``."""
    (found,) = [block for block in blocks(SHELL_BLOCK) if marker in block]
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
    examples = blocks(SHELL_BLOCK)
    assert examples
    for block in examples:
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


def test_the_curl_walkthrough_runs_against_a_real_hub(own_herald: HeraldProcess) -> None:
    herald = own_herald
    block = shell_example("export ALICE")
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


def test_the_openclaw_example_points_the_agent_at_its_gateway(own_herald: HeraldProcess) -> None:
    herald = own_herald
    with herald.client(herald.admin_key) as admin:
        assert admin.post("/v1/agents", json={"handle": "alice"}).status_code == 201
    env = {"H": herald.url, "ADMIN": str(herald.admin_key)}
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


def test_the_python_mcp_sdk_example_sends_the_key_and_reads_the_inbox(
    herald: HeraldProcess, tmp_path: Path
) -> None:
    agent = new_agent(herald)
    publish(herald, agent["handle"], "first")
    publish(herald, agent["handle"], "second")
    code = example("streamable_http_client(").replace(README_URL, herald.url)
    printed = run(code, tmp_path, {"HERALD_API_KEY": agent["api_key"]})
    assert printed.splitlines() == ["t first", "t second"]
    assert run(code, tmp_path, {"HERALD_API_KEY": agent["api_key"]}) == ""  # read: delivered


JS_BLOCK = re.compile(r"^```js\n(.*?)^```", re.MULTILINE | re.DOTALL)
JS_CLAIMED = ("StreamableHTTPClientTransport",)
TS_MODULES = ROOT / "tests" / "peers" / "ts" / "node_modules"
"""The TypeScript MCP SDK the suite installs (``npm ci --prefix tests/peers/ts``)."""


def test_every_javascript_example_is_run_by_a_test() -> None:
    examples = blocks(JS_BLOCK)
    assert examples
    for code in examples:
        assert sum(marker in code for marker in JS_CLAIMED) == 1, code


def test_the_typescript_mcp_sdk_example_sends_the_key_reads_the_inbox_and_ends_its_session(
    herald: HeraldProcess, tmp_path: Path
) -> None:
    node = shutil.which("node")
    assert node is not None, "node (20 or newer) is needed to run the TypeScript example"
    assert (TS_MODULES / "@modelcontextprotocol" / "sdk").is_dir(), (
        "the TypeScript MCP SDK is not installed: run ./scripts/test, or "
        "npm ci --prefix tests/peers/ts --no-audit --no-fund"
    )
    (code,) = [block for block in blocks(JS_BLOCK) if "StreamableHTTPClientTransport" in block]
    (tmp_path / "node_modules").symlink_to(TS_MODULES)  # where the script's imports resolve
    script = tmp_path / "inbox.mjs"
    script.write_text(code.replace(README_URL, herald.url))
    agent = new_agent(herald)
    publish(herald, agent["handle"], "first")
    publish(herald, agent["handle"], "second")
    done = subprocess.run(
        [node, str(script)],
        env={**os.environ, "HERALD_API_KEY": agent["api_key"]},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["t first", "t second"]
    with herald.client(herald.admin_key) as admin:
        sessions = admin.get(f"/v1/agents/{agent['id']}/sessions").json()["sessions"]
    assert sessions == []  # ended: nothing is left waiting on a session that is gone


@pytest.fixture
def herald_calling_loopback(tmp_path: Path) -> Iterator[HeraldProcess]:
    """A hub that may send webhooks to this machine, where the example's receiver runs."""
    process = HeraldProcess(
        f"sqlite:///{tmp_path / 'hub.db'}", extra_args=("--webhook-allow", "loopback")
    )
    yield process
    process.stop()


RECEIVER_ADDRESS = "127.0.0.1:8000"
"""Where the README's receiver listens; each test gives it a free port instead."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def at_port(text: str, port: int) -> str:
    """``text`` with the README's receiver address replaced by the one at ``port``."""
    return text.replace(RECEIVER_ADDRESS, f"127.0.0.1:{port}")


class RunningReceiver:
    """The README's webhook receiver, run as a script of its own on a free port."""

    def __init__(self, tmp_path: Path, secret: str, port: int) -> None:
        self.port = port
        code = example("webhook.verify(").replace("8000", str(port))
        script = tmp_path / "receiver.py"
        script.write_text(code)
        self.process = subprocess.Popen(
            [sys.executable, str(script)],
            env={**os.environ, "HERALD_WEBHOOK_SECRET": secret},
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self.pump, daemon=True).start()
        deadline = time.monotonic() + 30
        while not self.listening():
            assert self.process.poll() is None, "the receiver ended"
            assert time.monotonic() < deadline, "the receiver never listened"
            threading.Event().wait(0.05)

    def listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def printed(self) -> str:
        return self.lines.get(timeout=30)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


def test_the_webhook_receiver_example_verifies_and_prints_the_agents_events(
    herald_calling_loopback: HeraldProcess, tmp_path: Path
) -> None:
    herald = herald_calling_loopback
    with herald.client(herald.admin_key) as admin:
        assert admin.post("/v1/agents", json={"handle": "alice"}).status_code == 201
    ((put, _),) = commands(shell_example("alice/webhook"))
    env = {"H": herald.url, "ADMIN": str(herald.admin_key)}
    port = free_port()
    secret = str(shell(at_port(put, port), env)["secret"])
    receiver = RunningReceiver(tmp_path, secret, port)
    try:
        publish(herald, "alice", "Build 1234 failed")
        assert receiver.printed() == "t Build 1234 failed"
    finally:
        receiver.stop()


def test_the_mcp_events_example_subscribes_the_receiver_and_matching_events_arrive(
    herald_calling_loopback: HeraldProcess, tmp_path: Path
) -> None:
    herald = herald_calling_loopback
    agent = new_agent(herald)
    make_secret, *subscribe = shell_example("events/subscribe").splitlines()
    assert make_secret.startswith("export HERALD_WEBHOOK_SECRET=")
    made = subprocess.run(
        ["bash", "-c", f"{make_secret}\necho $HERALD_WEBHOOK_SECRET"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    secret, port = made.stdout.strip(), free_port()
    receiver = RunningReceiver(tmp_path, secret, port)
    try:
        *command, shown = subscribe
        env = {"H": herald.url, "ALICE": agent["api_key"], "HERALD_WEBHOOK_SECRET": secret}
        answer = shell(at_port("\n".join(command), port), env)
        assert str(answer["result"]["id"]).startswith("sub_")  # type: ignore[index]
        for field in re.findall(r'"(\w+)":', shown):  # every field the README shows is there
            assert field in json.dumps(answer), field
        with herald.client(herald.admin_key) as admin:
            for event_type in ("build.failed", "dm.received"):
                new = {"to": agent["handle"], "type": event_type, "text": f"a {event_type}"}
                assert admin.post("/v1/events", json=new).status_code == 202
        assert receiver.printed() == "dm.received a dm.received"  # only what matches dm.*
    finally:
        receiver.stop()


LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """The anchor a heading gets on the pages' host (GitHub): lower case, punctuation dropped,
    spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_between_the_pages_reaches_a_file_and_its_heading() -> None:
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if target.startswith(("http://", "https://")):
                continue
            path, _, fragment = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.exists(), (page.name, target)
            if fragment:
                headings = re.findall(r"^#+ (.*)$", linked.read_text(), re.MULTILINE)
                assert fragment in {anchor(heading) for heading in headings}, (page.name, target)
