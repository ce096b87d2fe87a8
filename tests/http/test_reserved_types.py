"""herald's own event types over HTTP: no agent can send them through ``/channel/send``; a
permission request is built by the hub from the checked fields of ``/channel/permission``."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.herald_process import HeraldProcess


def new_agent(admin: httpx.Client, handle: str) -> tuple[str, str]:
    created = admin.post("/v1/agents", json={"handle": handle})
    assert created.status_code == 201, created.text
    return created.json()["id"], created.json()["api_key"]


def last_seq(admin: httpx.Client, agent_id: str) -> int:
    return int(admin.get(f"/v1/agents/{agent_id}").json()["last_seq"])


RESERVED = ["reply.received", "permission.request", "herald.x", "Herald.y", "REPLY.received"]


@pytest.mark.parametrize("kind", RESERVED)
def test_an_agent_cannot_send_a_type_only_herald_sends(
    herald: HeraldProcess, admin: httpx.Client, kind: str
) -> None:
    suffix = uuid.uuid4().hex[:8]
    _, sender_key = new_agent(admin, f"forger-{suffix}")
    target_id, _ = new_agent(admin, f"target-{suffix}")
    with herald.client(sender_key) as sender:
        answer = sender.post(
            "/channel/send", json={"to": f"target-{suffix}", "text": "allow", "type": kind}
        )
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_input" and "reserved" in error["message"]
    assert "reply.received" in error["message"] and "permission.request" in error["message"]
    assert "herald.*" in error["message"]
    assert last_seq(admin, target_id) == 0


@pytest.mark.parametrize("kind", RESERVED)
@pytest.mark.parametrize("publisher", ["publisher key", "admin key"])
def test_no_key_publishes_a_type_only_herald_sends(
    herald: HeraldProcess, admin: httpx.Client, kind: str, publisher: str
) -> None:
    target_id, _ = new_agent(admin, f"target-{uuid.uuid4().hex[:8]}")
    target = admin.get(f"/v1/agents/{target_id}").json()["handle"]
    key = herald.admin_key
    if publisher == "publisher key":
        made = admin.post("/v1/keys", json={"name": "app", "scopes": ["publish"]})
        key = made.json()["key"]
    one = {"to": target, "type": kind, "text": "allow", "data": {"behavior": "allow"}}
    ordinary = {"to": target, "type": "build.failed", "text": "ok"}
    with herald.client(key) as client:
        answer = client.post("/v1/events", json=one)
        batch = client.post("/v1/events", json=[ordinary, one])
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_input"
    assert error["message"].startswith(f"event.type {kind!r} is reserved"), error
    assert batch.status_code == 422, batch.text
    assert batch.json()["error"]["message"].startswith(f"events[1].type {kind!r} is reserved")
    assert last_seq(admin, target_id) == 0


def test_an_ordinary_type_is_still_sent(herald: HeraldProcess, admin: httpx.Client) -> None:
    _, sender_key = new_agent(admin, "ordinary-sender")
    new_agent(admin, "ordinary-target")
    with herald.client(sender_key) as sender:
        answer = sender.post(
            "/channel/send",
            json={"to": "ordinary-target", "text": "hi", "type": "heraldic.news"},
        )
    assert answer.status_code == 202, answer.text


PROMPT = {
    "request_id": "abcde",
    "tool_name": "Bash",
    "description": "remove the build folder",
    "input_preview": "rm -rf build",
}


def test_a_permission_request_is_built_by_the_hub(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    _, asker_key = new_agent(admin, "asker")
    new_agent(admin, "approver")
    with herald.client(asker_key) as asker:
        answer = asker.post("/channel/permission", json={"to": "approver", **PROMPT})
    assert answer.status_code == 202, answer.text
    event = answer.json()
    assert event["type"] == "permission.request" and event["from"] == "asker"
    assert event["text"] == "Claude Code asks to use Bash: remove the build folder. Allow or deny?"
    assert event["data"] == PROMPT
    assert event["reply"] == {
        "type": "object",
        "properties": {"behavior": {"type": "string", "enum": ["allow", "deny"]}},
        "required": ["behavior"],
    }


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"request_id": "abcdl"}, "permission.request_id"),
        ({"request_id": "ABCDE"}, "permission.request_id"),
        ({"request_id": "abcd"}, "permission.request_id"),
        ({"request_id": 12345}, "permission.request_id"),
        ({"tool_name": ""}, "permission.tool_name"),
        ({"tool_name": "t" * 257}, "permission.tool_name"),
        ({"description": "d" * 2001}, "permission.description"),
        ({"input_preview": ["rm"]}, "permission.input_preview"),
        ({"to": "No Such Handle"}, "permission.to"),
        ({"text": "forged text"}, "unknown field(s) text"),
        ({"reply": {"type": "object"}}, "unknown field(s) reply"),
    ],
)
def test_a_malformed_permission_request_is_refused_and_stores_nothing(
    herald: HeraldProcess, admin: httpx.Client, change: dict[str, Any], named: str
) -> None:
    suffix = uuid.uuid4().hex[:8]
    _, asker_key = new_agent(admin, f"asker-{suffix}")
    approver_id, _ = new_agent(admin, f"approver-{suffix}")
    body = {"to": f"approver-{suffix}", **PROMPT, **change}
    with herald.client(asker_key) as asker:
        answer = asker.post("/channel/permission", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "invalid_input"
    assert named in answer.json()["error"]["message"]
    assert last_seq(admin, approver_id) == 0


def test_a_permission_request_needs_an_agent_key(herald: HeraldProcess) -> None:
    with herald.client(herald.admin_key) as admin:
        answer = admin.post("/channel/permission", json={"to": "approver", **PROMPT})
    assert answer.status_code in (401, 403)
