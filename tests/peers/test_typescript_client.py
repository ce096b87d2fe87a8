"""herald against a client written elsewhere: the official TypeScript MCP SDK
(``@modelcontextprotocol/sdk``, pinned in tests/peers/ts/package-lock.json) over streamable HTTP.

Each test runs one scenario of tests/peers/ts/peer.mjs against a real ``herald serve``. The
checks are made on the Node side, which prints one JSON line per check; a test passes when every
check did. ``./scripts/test`` installs the Node side (``npm ci``); without node the tests fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.herald_process import HeraldProcess

pytestmark = pytest.mark.node

TS_DIR = Path(__file__).parent / "ts"
PEER = TS_DIR / "peer.mjs"
SDK = TS_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
PEER_TIMEOUT_S = 90
WAIT_MS = 15000


@dataclass
class Agent:
    id: str
    handle: str
    key: str


@dataclass
class PeerRun:
    returncode: int
    checks: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    stdout: str = ""
    stderr: str = ""


@dataclass
class Herald:
    process: HeraldProcess
    store_url: str

    def agent(self, prefix: str = "ts") -> Agent:
        with self.process.client(self.process.admin_key) as admin:
            response = admin.post("/v1/agents", json={"handle": f"{prefix}-{uuid.uuid4().hex[:8]}"})
        assert response.status_code == 201, response.text
        body = response.json()
        return Agent(body["id"], body["handle"], body["api_key"])


@pytest.fixture(scope="module")
def node() -> str:
    """The node executable, with the SDK installed. Missing either fails the tests: CI must not
    pass without them."""
    executable = shutil.which("node")
    if executable is None:
        pytest.fail("node (20 or newer) is needed for the TypeScript client tests")
    if not SDK.is_file():
        pytest.fail(
            "the TypeScript MCP SDK is not installed: run ./scripts/test, or "
            "npm ci --prefix tests/peers/ts --no-audit --no-fund"
        )
    return executable


@pytest.fixture(scope="module")
def herald(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Herald]:
    path = tmp_path_factory.mktemp("herald-ts") / "herald.db"
    url = f"sqlite:///{path}"
    process = HeraldProcess(url)
    yield Herald(process, url)
    process.stop()


def run_peer(
    node: str, herald: Herald, scenario: str, agent: Agent, peer: Agent | None = None
) -> PeerRun:
    assert herald.process.admin_key is not None
    env = {
        **os.environ,
        "HERALD_URL": herald.process.url,
        "HERALD_ADMIN_KEY": herald.process.admin_key,
        "HERALD_AGENT_KEY": agent.key,
        "HERALD_AGENT_HANDLE": agent.handle,
        "HERALD_AGENT_ID": agent.id,
        "HERALD_WAIT_MS": str(WAIT_MS),
    }
    if peer is not None:
        env |= {"HERALD_PEER_KEY": peer.key, "HERALD_PEER_HANDLE": peer.handle}
    try:
        done = subprocess.run(
            [node, str(PEER), scenario],
            cwd=TS_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=PEER_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"node peer.mjs {scenario} ran over {PEER_TIMEOUT_S}s\nstdout:\n{exc.stdout}\n"
            f"stderr:\n{exc.stderr}\nherald:\n" + "\n".join(herald.process.output())
        )
    run = PeerRun(done.returncode, stdout=done.stdout, stderr=done.stderr)
    for line in done.stdout.splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(item, dict) and "check" in item:
            run.checks.append(item)
        elif isinstance(item, dict) and "info" in item:
            run.info[item["info"]] = item.get("value")
    return run


def assert_all_passed(run: PeerRun, herald: Herald) -> None:
    failed = [c for c in run.checks if c.get("ok") is not True]
    if run.returncode == 0 and run.checks and not failed:
        return
    report = "\n".join(
        f"FAILED {c['check']}: {json.dumps(c.get('detail'), ensure_ascii=False, indent=2)}"
        for c in failed
    )
    passed = "\n".join(f"ok     {c['check']}" for c in run.checks if c.get("ok") is True)
    pytest.fail(
        f"node exited {run.returncode}; {len(failed)} of {len(run.checks)} checks failed\n"
        f"{report}\n{passed}\nstderr:\n{run.stderr}\nherald:\n"
        + "\n".join(herald.process.output()),
        pytrace=False,
    )


def test_a_form_capable_client_answers_an_interactive_event(node: str, herald: Herald) -> None:
    agent = herald.agent()
    run = run_peer(node, herald, "elicitation", agent)
    assert_all_passed(run, herald)
    with herald.process.client(herald.process.admin_key) as admin:
        event = admin.get(f"/v1/events/{run.info['event_id']}").json()
    (reply,) = event["replies"]
    assert reply["agent"] == agent.id and reply["data"] == {"ok": True}
    assert reply["routed_event_id"] is None


def test_claude_code_gets_a_channel_tag_it_cannot_be_tricked_by(node: str, herald: Herald) -> None:
    assert_all_passed(run_peer(node, herald, "channel", herald.agent()), herald)


def test_a_plain_client_gets_log_messages_and_sees_the_server(node: str, herald: Herald) -> None:
    assert_all_passed(run_peer(node, herald, "log", herald.agent()), herald)


def test_the_tools_inbox_ack_reply_and_send_message(node: str, herald: Herald) -> None:
    agent, other = herald.agent("ts-a"), herald.agent("ts-b")
    assert_all_passed(run_peer(node, herald, "tools", agent, other), herald)


def test_the_mcp_endpoint_needs_the_agents_own_key(node: str, herald: Herald) -> None:
    agent, other = herald.agent("ts-a"), herald.agent("ts-b")
    assert_all_passed(run_peer(node, herald, "auth", agent, other), herald)
    with httpx.Client(base_url=herald.process.url, timeout=30) as anonymous:
        response = anonymous.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 401
