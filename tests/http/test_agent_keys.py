"""``POST /v1/agents/{id_or_handle}/rotate-key`` against a real ``herald serve`` on SQLite. (The
grace ending, and other processes: tests/hub/test_keys.py, tests/test_key_processes.py.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from herald.times import ms_from_iso
from tests.herald_process import HeraldProcess
from tests.http.test_api import error_code, new_agent
from tests.sse import SSEReader


def key_status(herald: HeraldProcess, key: str) -> int:
    """How herald answers a heartbeat with ``key``: 200 while it is the agent's."""
    with herald.client(key) as agent:
        return agent.post("/channel/heartbeat", json={}).status_code


def test_a_key_rotated_with_a_grace_is_shown_once_and_both_keys_work(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    agent = new_agent(admin)
    before = admin.get("/v1/agents").json()
    rotated = admin.post(f"/v1/agents/{agent['handle']}/rotate-key", json={"grace_s": 600})
    assert rotated.status_code == 200, rotated.text
    body = rotated.json()
    assert body["id"] == agent["id"] and body["api_key"].startswith("herald_agent_")
    assert body["api_key"] != agent["api_key"]
    until = ms_from_iso(body["previous_valid_until"])
    assert 590_000 < until - ms_from_iso(agent["created_at"]) < 660_000
    assert key_status(herald, body["api_key"]) == 200
    assert key_status(herald, agent["api_key"]) == 200
    assert admin.get("/v1/agents").json() == before, "no key or hash is shown after"


def test_a_rotation_without_a_grace_stops_the_old_key_at_once(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    agent = new_agent(admin)
    assert key_status(herald, agent["api_key"]) == 200  # remembered for a second
    rotated = admin.post(f"/v1/agents/{agent['id']}/rotate-key")
    assert rotated.status_code == 200 and rotated.json()["previous_valid_until"] is None
    assert key_status(herald, agent["api_key"]) == 401
    assert key_status(herald, rotated.json()["api_key"]) == 200


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"grace_s": -1}, "rotation.grace_s must be a number of seconds from 0"),
        ({"grace_s": 604_801}, "to 604800 (7 days)"),
        ({"grace_s": "60"}, "grace_s must be a number"),
        ({"grace_s": None}, "grace_s must be a number"),
        ({"grace": 60}, "grace"),
        ([60], "rotation must be a JSON object"),
    ],
)
def test_a_bad_rotation_is_refused_and_changes_nothing(
    herald: HeraldProcess, admin: httpx.Client, body: Any, fragment: str
) -> None:
    agent = new_agent(admin)
    response = admin.post(f"/v1/agents/{agent['id']}/rotate-key", json=body)
    assert response.status_code == 422 and error_code(response) == "invalid_input"
    assert fragment in response.json()["error"]["message"]
    assert key_status(herald, agent["api_key"]) == 200


def test_a_rotation_needs_the_admin_key_and_a_known_agent(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    agent = new_agent(admin)
    with herald.client(agent["api_key"]) as as_agent:
        refused = as_agent.post(f"/v1/agents/{agent['id']}/rotate-key")
        assert refused.status_code == 403 and error_code(refused) == "forbidden"
    missing = admin.post("/v1/agents/nobody-here/rotate-key")
    assert missing.status_code == 404 and "'nobody-here'" in missing.json()["error"]["message"]
    assert key_status(herald, agent["api_key"]) == 200


def test_an_open_stream_ends_once_its_key_is_rotated_out(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    agent = new_agent(admin)
    reader = SSEReader(herald.url, agent["api_key"])
    try:
        rotated = admin.post(f"/v1/agents/{agent['id']}/rotate-key", json={"grace_s": 0})
        assert rotated.status_code == 200
        published = admin.post("/v1/events", json={"to": agent["handle"], "type": "t", "text": "x"})
        assert published.status_code == 202
        ended = reader.next()
        assert ended.event == "error" and "rotated out" in ended.data["message"]
        assert reader.next() is None  # and nothing after: the event is not sent to the old key
    finally:
        reader.close()
