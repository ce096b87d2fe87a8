"""What the fuzz suites share: a real ``herald serve`` on each backend with the agents and events
the fuzzed requests aim at, the state a refused request must leave as it was, and the checks on
every answer.

The examples are derandomized and their number fixed, so CI sends the same requests every run.
For a deeper run by hand, ``HERALD_FUZZ_EXAMPLES`` sets how many each route or tool gets, and
``HERALD_FUZZ_RANDOM=1`` draws new ones each run.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, settings

from tests.backends import serving
from tests.herald_process import HeraldProcess

EXAMPLES = int(os.environ.get("HERALD_FUZZ_EXAMPLES", "25"))
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=not os.environ.get("HERALD_FUZZ_RANDOM"),
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
WATCHED_EVENTS = 8
TYPED = "fuzz.typed"
"""An event type the world declares with a payload schema: fuzzed events of it are checked."""
TYPED_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "multipleOf": 0.5}, "tag": {"pattern": "^[a-z]+$"}},
    "required": ["n"],
}
MODERN, LEGACY = "2026-07-28", "2025-11-25"
_PLACEHOLDER = re.compile(rb"@([a-z0-9-]+)@")
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
BODY_DEADLINES = ("--body-idle-timeout", "1", "--body-timeout", "2")
"""Short, so that slow bodies sent to every route end within seconds."""


@dataclass(frozen=True)
class Agent:
    id: str
    handle: str
    key: str


class World:
    """The agents and events the fuzzed requests aim at, and the state they must not change.

    alice drains and answers; bob writes to her and owns events she must not reach; a publisher
    key may publish to alice only; the admin routes change target only. After each accepted
    request alice gets new open events if she ran short, so that a refused request always has
    something it could wrongly change.
    """

    def __init__(self, herald: HeraldProcess) -> None:
        self.http = httpx.Client(base_url=herald.url, timeout=60)
        self.keys = {"admin": str(herald.admin_key), "none": ""}
        self.alice = self.new_agent("alice")
        self.bob = self.new_agent("bob")
        self.target = self.new_agent("target")
        self.admin(
            "PUT",
            f"/v1/event-types/{TYPED}",
            json={"description": "checked", "payload_schema": TYPED_SCHEMA},
        )
        publisher = {"name": "fuzz", "scopes": ["publish"], "handles": [self.alice.handle]}
        self.keys["publisher"] = self.admin("POST", "/v1/keys", json=publisher).json()["key"]
        self.events: list[str] = []
        self.bob_event = self.publish(self.bob, "for bob only")
        self.history = self.stream_history(self.bob)
        self._sessions: dict[str, str] = {}
        self.top_up()

    def new_agent(self, prefix: str) -> Agent:
        handle = f"{prefix}-{uuid.uuid4().hex[:8]}"
        created = self.admin("POST", "/v1/agents", json={"handle": handle}).json()
        self.keys[prefix] = created["api_key"]
        return Agent(created["id"], handle, created["api_key"])

    def admin(self, method: str, path: str, **options: Any) -> httpx.Response:
        headers = {"authorization": f"Bearer {self.keys['admin']}"}
        response = self.http.request(method, path, headers=headers, **options)
        assert response.status_code < 300, response.text
        return response

    def publish(self, to: Agent, text: str, **fields: Any) -> str:
        event = {"to": to.handle, "type": "t", "text": text, **fields}
        return str(self.admin("POST", "/v1/events", json=event).json()["id"])

    def stream_history(self, agent: Agent) -> str:
        """The store's history, as the position of the agent's first streamed event names it."""
        headers = {"authorization": f"Bearer {agent.key}"}
        with self.http.stream("GET", "/channel/stream", headers=headers) as response:
            for line in response.iter_lines():
                if line.startswith("id: "):
                    return line.removeprefix("id: ").split("~")[1]
        raise AssertionError("the stream ended before its first event")

    def top_up(self) -> None:
        """Give alice two open events (one asks for a form from bob) if she has fewer; then
        take the state as it is now as the one to compare with."""
        statuses = self.snapshot()["events"]
        open_events = [e for e in self.events if statuses[e][0] in ("pending", "sent")]
        if len(open_events) < 2:
            self.events.append(self.publish(self.alice, "plain"))
            form = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
            self.events.append(
                self.publish(self.alice, "asks", reply=form, **{"from": self.bob.handle})
            )
            self.events = self.events[-WATCHED_EVENTS:]
        self.state = self.snapshot()

    def snapshot(self) -> dict[str, Any]:
        # Sessions come and go with each fuzzed MCP call: who the agents are and what they hold
        # is the state, not their live sessions or when they were last seen.
        lively = {"live_sessions", "last_activity_at"}
        agents = [
            {k: v for k, v in agent.items() if k not in lively}
            for agent in self.admin("GET", "/v1/agents").json()["agents"]
        ]
        endpoints = self.admin("GET", f"/v1/agents/{self.target.id}/endpoints").json()
        stable = ("id", "kind", "url", "mode", "rotating_until")
        return {
            "agents": sorted(agents, key=lambda agent: agent["id"]),
            "endpoints": [{k: e[k] for k in stable} for e in endpoints["endpoints"]],
            "event_types": self.admin("GET", "/v1/event-types").json()["event_types"],
            "publisher_keys": self.admin("GET", "/v1/keys").json()["keys"],
            "events": {
                event_id: self._event_state(event_id) for event_id in [*self.events, self.bob_event]
            },
        }

    def _event_state(self, event_id: str) -> tuple[str, int, int]:
        event = self.admin("GET", f"/v1/events/{event_id}").json()
        return event["status"], len(event["attempts"]), len(event["replies"])

    def resolve(self, drawn: bytes) -> bytes:
        """A drawn request with its placeholders (``@alice@``, ``@target-id@``, ``@event3@``)
        replaced by the world's handles and ids."""
        watched = [*self.events, self.bob_event]
        names = {
            b"alice": self.alice.handle,
            b"bob": self.bob.handle,
            b"alice-id": self.alice.id,
            b"target-id": self.target.id,
            b"history": self.history,
            **{f"event{i}".encode(): watched[i % len(watched)] for i in range(10)},
        }
        return _PLACEHOLDER.sub(lambda m: names.get(m[1], m[0].decode()).encode(), drawn)

    def mcp_session(self, era: str) -> str | None:
        """The session id of alice's MCP session in ``era`` (None in the 2026-07-28 era, which
        has none), opened once."""
        if era == MODERN:
            return None
        if era not in self._sessions:
            initialize = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": era,
                    "capabilities": {},
                    "clientInfo": {"name": "fuzz", "version": "1"},
                },
            }
            headers = {**MCP_HEADERS, "authorization": f"Bearer {self.alice.key}"}
            opened = self.http.post("/mcp", json=initialize, headers=headers)
            assert opened.status_code == 200, opened.text
            session = opened.headers["mcp-session-id"]
            headers = {**headers, "mcp-session-id": session, "mcp-protocol-version": era}
            ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert self.http.post("/mcp", json=ready, headers=headers).status_code == 202
            self._sessions[era] = session
        return self._sessions[era]


@contextlib.contextmanager
def world_on(backend: str, directory: Path) -> Iterator[World]:
    """A world on a ``herald serve`` of its own, on ``backend``."""
    with serving(backend, directory, *BODY_DEADLINES) as herald:
        world = World(herald)
        try:
            yield world
        finally:
            world.http.close()


def assert_herald_error(response: httpx.Response, where: str) -> None:
    body = strict_json(response.content)
    assert isinstance(body, dict) and set(body) == {"error"}, f"{where}: {body}"
    error = body["error"]
    assert set(error) == {"code", "message"}, f"{where}: {body}"
    assert isinstance(error["code"], str) and isinstance(error["message"], str), where
    assert error["message"], where


def assert_unchanged(world: World, where: str) -> None:
    after = world.snapshot()
    for part, before in world.state.items():
        assert after[part] == before, f"{where}, a refusal, and changed the {part}"


def strict_json(content: bytes) -> Any:
    """An answer as JSON that any parser takes: UTF-8, no NaN or Infinity."""

    def refuse(token: str) -> Any:
        raise AssertionError(f"herald answered {token}, which is not JSON")

    return json.loads(content.decode("utf-8"), parse_constant=refuse)
