"""The event-type catalogue over HTTP, against a real ``herald serve``: the admin declares,
lists, reads and deletes types; a publish whose data is not valid against its type's payload
schema is refused with the path at fault."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.herald_process import HeraldProcess

ITEMS = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {"type": "object", "properties": {"count": {"type": "integer"}}},
        }
    },
}


def fresh_name(prefix: str = "build") -> str:
    return f"{prefix}.{uuid.uuid4().hex[:8]}"


def new_agent(admin: httpx.Client) -> dict[str, Any]:
    response = admin.post("/v1/agents", json={"handle": f"cat-{uuid.uuid4().hex[:8]}"})
    assert response.status_code == 201, response.text
    return dict(response.json())


def refusal(response: httpx.Response, status: int = 422) -> str:
    assert response.status_code == status, response.text
    return str(response.json()["error"]["message"])


def test_a_type_is_put_listed_read_replaced_and_deleted(admin: httpx.Client) -> None:
    name = fresh_name()
    created = admin.put(
        f"/v1/event-types/{name}", json={"description": "a build failed", "payload_schema": ITEMS}
    )
    assert created.status_code == 201, created.text
    declared = created.json()
    assert {k: declared[k] for k in ("name", "description", "payload_schema")} == {
        "name": name,
        "description": "a build failed",
        "payload_schema": ITEMS,
    }
    assert declared["created_at"].endswith("Z") and declared["updated_at"].endswith("Z")
    assert admin.get(f"/v1/event-types/{name}").json() == declared
    listed = admin.get("/v1/event-types").json()
    assert set(listed) == {"event_types"} and declared in listed["event_types"]
    replaced = admin.put(f"/v1/event-types/{name}", json={"description": "it broke"})
    assert replaced.status_code == 200
    assert replaced.json()["payload_schema"] is None
    assert replaced.json()["created_at"] == declared["created_at"]
    assert admin.delete(f"/v1/event-types/{name}").status_code == 204
    assert name in refusal(admin.get(f"/v1/event-types/{name}"), 404)
    assert name in refusal(admin.delete(f"/v1/event-types/{name}"), 404)


@pytest.mark.parametrize(
    ("name", "body", "fragment"),
    [
        (
            "build.x",
            {"description": "d", "colour": "red"},
            "event_type has unknown field(s) colour; allowed: description, payload_schema",
        ),
        ("build.x", {}, "event_type.description is required and must be a string of 1-2000"),
        ("build.x", {"description": ""}, "event_type.description must be a string of 1-2000"),
        (
            "build.x",
            {"description": "d", "payload_schema": {"type": "integr"}},
            "event_type.payload_schema.type is not valid JSON Schema (draft 2020-12)",
        ),
        (
            "build.x",
            {"description": "d", "payload_schema": {"$ref": "#/$defs/nowhere"}},
            "event_type.payload_schema has a $ref '#/$defs/nowhere' that points to nothing",
        ),
        ("build.x", [], "event_type must be a JSON object"),
        ("herald.event", {"description": "d"}, "event type name 'herald.event' is reserved"),
        ("has%20space", {"description": "d"}, "event type name 'has space' must be 1-128"),
    ],
)
def test_a_bad_put_is_refused_by_name_and_declares_nothing(
    admin: httpx.Client, name: str, body: Any, fragment: str
) -> None:
    message = refusal(admin.put(f"/v1/event-types/{name}", json=body))
    assert fragment in message
    assert admin.get(f"/v1/event-types/{name}").status_code == 404


def test_only_the_admin_key_reaches_the_catalogue(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    agent = new_agent(admin)
    with herald.client(agent["api_key"]) as as_agent:
        assert as_agent.get("/v1/event-types").status_code == 403
        put = as_agent.put(f"/v1/event-types/{fresh_name()}", json={"description": "d"})
        assert put.status_code == 403
    with herald.client() as anonymous:
        assert anonymous.get("/v1/event-types").status_code == 401


def test_a_publish_not_valid_against_its_type_is_refused_naming_the_path(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    name = fresh_name()
    put = admin.put(f"/v1/event-types/{name}", json={"description": "d", "payload_schema": ITEMS})
    assert put.status_code == 201
    agent = new_agent(admin)
    event = {"to": agent["handle"], "type": name, "text": "broke"}
    bad = {**event, "data": {"items": [{"count": "x"}]}}
    assert refusal(admin.post("/v1/events", json=bad)) == (
        f"event.data.items[0].count: 'x' is not of type 'integer'"
        f" (event type {name} declares a payload_schema)"
    )
    batch = [{**event, "data": {"items": []}}, bad]
    assert refusal(admin.post("/v1/events", json=batch)).startswith(
        "events[1].data.items[0].count: 'x' is not of type 'integer'"
    )
    sender = new_agent(admin)
    with herald.client(sender["api_key"]) as as_sender:
        sent = as_sender.post(
            "/channel/send",
            json={"to": agent["handle"], "type": name, "text": "x", "data": bad["data"]},
        )
        assert refusal(sent).startswith("message.data.items[0].count")
    assert admin.get(f"/v1/agents/{agent['id']}").json()["last_seq"] == 0
    good = admin.post("/v1/events", json={**event, "data": {"items": [{"count": 2}]}})
    assert good.status_code == 202


def test_a_check_that_runs_away_is_refused_while_the_hub_answers_others(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    name = fresh_name("word")
    schema = {"properties": {"word": {"type": "string", "pattern": "^(a|a)+$"}}}
    put = admin.put(f"/v1/event-types/{name}", json={"description": "d", "payload_schema": schema})
    assert put.status_code == 201
    agent = new_agent(admin)
    event = {"to": agent["handle"], "type": name, "text": "x"}
    batch = [{**event, "data": {"word": "aa"}}, {**event, "data": {"word": "a" * 40 + "!"}}]
    with ThreadPoolExecutor(1) as pool, herald.client() as other:
        publishing = pool.submit(admin.post, "/v1/events", json=batch)
        assert other.get("/healthz", timeout=10).json()["status"] == "ok"
        assert not publishing.done()
        refused = publishing.result(timeout=60)
    assert refusal(refused) == (
        f"events[1].data: the event type {name}'s payload_schema took over 2 s to check this"
        " data: simplify the schema (patterns, uniqueItems) or the data"
    )
    assert admin.get(f"/v1/agents/{agent['id']}").json()["last_seq"] == 0
