"""The HTTP API end to end, against a real ``herald serve`` process on SQLite."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.routing import Route

from herald.http.app import create_app
from herald.hub import Hub
from tests.herald_process import HeraldProcess


def new_agent(admin: httpx.Client, prefix: str = "agent") -> dict[str, Any]:
    response = admin.post("/v1/agents", json={"handle": f"{prefix}-{uuid.uuid4().hex[:8]}"})
    assert response.status_code == 201, response.text
    return response.json()


def publish(admin: httpx.Client, to: str, text: str = "hello", **fields: Any) -> httpx.Response:
    return admin.post("/v1/events", json={"to": to, "type": "dm.received", "text": text, **fields})


def error_code(response: httpx.Response) -> str:
    body = response.json()
    assert set(body) == {"error"} and body["error"]["message"], body
    return str(body["error"]["code"])


def test_healthz_answers(herald: HeraldProcess) -> None:
    with herald.client() as client:
        assert client.get("/healthz").json()["status"] == "ok"


def test_an_agent_is_created_with_a_key_shown_once(admin: httpx.Client) -> None:
    agent = new_agent(admin)
    assert agent["api_key"].startswith("herald_agent_")
    listed = admin.get("/v1/agents").json()["agents"]
    assert agent["id"] in [a["id"] for a in listed]
    assert all("api_key" not in a and "key_hash" not in a for a in listed)
    fetched = admin.get(f"/v1/agents/{agent['id']}").json()
    assert fetched["handle"] == agent["handle"] and "api_key" not in fetched


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"handle": "Not Valid"}, 422, "invalid_input"),
        ({"handle": "x" * 65}, 422, "invalid_input"),
        ({}, 422, "invalid_input"),
        ({"handle": "ok", "colour": "red"}, 422, "invalid_input"),
        ({"handle": "ok", "webhook_url": "ftp://example.com"}, 422, "invalid_input"),
        (["not", "an", "object"], 422, "invalid_input"),
    ],
)
def test_a_bad_agent_is_refused_with_a_clear_error(
    admin: httpx.Client, body: Any, status: int, code: str
) -> None:
    response = admin.post("/v1/agents", json=body)
    assert response.status_code == status
    assert error_code(response) == code


def test_a_taken_handle_is_a_conflict(admin: httpx.Client) -> None:
    agent = new_agent(admin)
    response = admin.post("/v1/agents", json={"handle": agent["handle"]})
    assert response.status_code == 409 and error_code(response) == "conflict"


def test_admin_routes_refuse_other_keys(herald: HeraldProcess, admin: httpx.Client) -> None:
    agent = new_agent(admin)
    with herald.client() as anonymous:
        assert anonymous.get("/v1/agents").status_code == 401
    with herald.client("herald_agent_unknown") as stranger:
        assert stranger.get("/v1/agents").status_code == 401
    with herald.client(agent["api_key"]) as as_agent:
        response = publish(as_agent, agent["handle"])
        assert response.status_code == 403 and error_code(response) == "forbidden"


def test_publish_answers_after_commit_and_is_idempotent(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    agent = new_agent(admin)
    first = publish(admin, agent["handle"], "one", dedupe_key="k", data={"from": "@bob"})
    assert first.status_code == 202
    again = publish(admin, agent["handle"], "two", dedupe_key="k")
    assert again.status_code == 200
    assert again.json() == {**first.json(), "duplicate": True}
    event = admin.get(f"/v1/events/{first.json()['id']}").json()
    assert (
        event["text"] == "one"
        and event["data"] == {"from": "@bob"}
        and event["status"] == "pending"
    )
    with herald.client(agent["api_key"]) as client:
        assert len(client.post("/channel/heartbeat", json={"cursor": 0}).json()["events"]) == 1


def test_a_batch_is_published_in_order_in_one_transaction(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    agent = new_agent(admin)
    batch = [{"to": agent["handle"], "type": "t", "text": f"n{n}"} for n in range(5)]
    response = admin.post("/v1/events", json=batch)
    assert response.status_code == 202
    assert [r["seq"] for r in response.json()["events"]] == [1, 2, 3, 4, 5]
    bad = admin.post("/v1/events", json=[*batch, {"to": "nobody-here", "type": "t", "text": "x"}])
    assert bad.status_code == 404 and "nobody-here" in bad.json()["error"]["message"]
    with herald.client(agent["api_key"]) as client:
        drained = client.post("/channel/heartbeat", json={"cursor": 0, "limit": 100}).json()
    assert [e["text"] for e in drained["events"]] == [f"n{n}" for n in range(5)]


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"type": "t", "text": "x"}, 422, "to"),
        ({"to": "someone", "text": "x"}, 422, "type"),
        ({"to": "someone", "type": "t"}, 422, "text"),
        ({"to": "someone", "type": "t", "text": "x", "extra": 1}, 422, "extra"),
        ({"to": "someone", "type": "t", "text": "x", "data": "string"}, 422, "data"),
        ({"to": "someone", "type": "t", "text": "x", "ttl_s": -1}, 422, "ttl_s"),
        ({"to": "someone", "type": "t", "text": "x" * (256 * 1024 + 1)}, 413, "256 KiB"),
        ([], 422, "at least one"),
        ([{"to": "someone", "type": "t", "text": "x"}] * 1001, 413, "1000"),
        ("just a string", 422, "object"),
    ],
)
def test_a_bad_publish_is_refused_and_stores_nothing(
    herald: HeraldProcess, admin: httpx.Client, body: Any, status: int, fragment: str
) -> None:
    agent = new_agent(admin)
    if isinstance(body, dict) and "to" in body:
        body = {**body, "to": agent["handle"]}
    if isinstance(body, list):
        body = [{**item, "to": agent["handle"]} for item in body]
    response = admin.post("/v1/events", json=body)
    assert response.status_code == status, response.text
    assert fragment in response.json()["error"]["message"]
    with herald.client(agent["api_key"]) as client:
        assert client.post("/channel/heartbeat", json={"cursor": 0}).json()["events"] == []


def test_a_body_that_is_not_json_is_refused(admin: httpx.Client) -> None:
    response = admin.post(
        "/v1/events", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422 and "JSON" in response.json()["error"]["message"]


def test_publishing_to_an_unknown_agent_is_not_found(admin: httpx.Client) -> None:
    response = publish(admin, "no-such-agent")
    assert response.status_code == 404 and error_code(response) == "not_found"


def test_a_path_no_route_takes_is_not_found_and_the_answer_says_where_the_routes_are(
    admin: httpx.Client,
) -> None:
    response = admin.get("/v1/no-such-thing")
    assert response.status_code == 404 and error_code(response) == "not_found"
    message = response.json()["error"]["message"]
    assert message == "no route /v1/no-such-thing; GET /docs describes every route"
    assert admin.get("/docs").status_code == 200  # where it points: the reference page


def test_heartbeat_with_a_cursor_is_at_least_once(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    agent = new_agent(admin)
    for n in range(5):
        publish(admin, agent["handle"], f"e{n}")
    with herald.client(agent["api_key"]) as client:
        first = client.post("/channel/heartbeat", json={"cursor": 0, "limit": 2}).json()
        assert [e["text"] for e in first["events"]] == ["e0", "e1"] and first["cursor"] == 2
        lost_response_retry = client.post(
            "/channel/heartbeat", json={"cursor": 0, "limit": 2}
        ).json()
        assert lost_response_retry == first
        other = client.post("/channel/heartbeat", json={"cursor": 0, "consumer": "other"}).json()
        assert [e["text"] for e in other["events"]] == ["e2", "e3", "e4"]
        second = client.post("/channel/heartbeat", json={"cursor": 2}).json()
        assert second["events"] == [] and second["cursor"] == 2
        status = admin.get(f"/v1/events/{first['events'][0]['id']}").json()
        assert status["status"] == "delivered"
        assert [a["mechanism"] for a in status["attempts"]] == ["heartbeat", "heartbeat", "ack"]


def test_heartbeat_without_a_cursor_is_at_most_once(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    agent = new_agent(admin)
    for n in range(3):
        publish(admin, agent["handle"], f"e{n}")
    with herald.client(agent["api_key"]) as client:
        drained = client.post("/channel/heartbeat").json()
        assert [e["text"] for e in drained["events"]] == ["e0", "e1", "e2"]
        assert all(e["status"] == "delivered" for e in drained["events"])
        assert client.post("/channel/heartbeat", json={}).json()["events"] == []


@pytest.mark.parametrize(
    "body",
    [
        {"limit": 0},
        {"limit": 101},
        {"cursor": -1},
        {"cursor": "3"},
        {"consumer": ""},
        {"since": 1},
        [1],
    ],
)
def test_a_bad_heartbeat_is_refused(herald: HeraldProcess, admin: httpx.Client, body: Any) -> None:
    agent = new_agent(admin)
    with herald.client(agent["api_key"]) as client:
        response = client.post("/channel/heartbeat", json=body)
    assert response.status_code == 422 and error_code(response) == "invalid_input"


@pytest.mark.parametrize("body", ["null", "false", "0", '""', "[]"])
def test_a_heartbeat_body_that_is_not_an_object_is_refused_and_drains_nothing(
    herald: HeraldProcess, admin: httpx.Client, body: str
) -> None:
    agent = new_agent(admin)
    event_id = publish(admin, agent["handle"]).json()["id"]
    with herald.client(agent["api_key"]) as client:
        response = client.post("/channel/heartbeat", content=body)
    assert response.status_code == 422 and error_code(response) == "invalid_input"
    assert "heartbeat must be a JSON object" in response.json()["error"]["message"]
    assert admin.get(f"/v1/events/{event_id}").json()["status"] == "pending"


def test_ack_by_ids_and_by_cursor(herald: HeraldProcess, admin: httpx.Client) -> None:
    agent = new_agent(admin)
    ids = [publish(admin, agent["handle"], f"e{n}").json()["id"] for n in range(4)]
    with herald.client(agent["api_key"]) as client:
        assert client.post("/channel/ack", json={"ids": [ids[3]]}).json() == {"acked": 1}
        # A bare seq names no history: it acknowledges only what a drain handed out.
        assert client.post("/channel/ack", json={"cursor": 2}).json() == {"acked": 0}
        drained = client.post("/channel/heartbeat", json={"cursor": 0, "limit": 1}).json()
        assert [e["id"] for e in drained["events"]] == [ids[0]]
        assert client.post("/channel/ack", json={"cursor": 2}).json() == {"acked": 1}
        remaining = client.post("/channel/heartbeat", json={"cursor": 0}).json()["events"]
        assert [e["id"] for e in remaining] == [ids[1], ids[2]]
        assert client.post("/channel/ack", json={}).status_code == 422
        assert client.post("/channel/ack", json={"ids": "x"}).status_code == 422


def test_an_agent_reads_and_acks_only_its_own_events(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    alice, bob = new_agent(admin, "alice"), new_agent(admin, "bob")
    alice_event = publish(admin, alice["handle"], "for alice").json()["id"]
    bob_event = publish(admin, bob["handle"], "for bob").json()["id"]
    with herald.client(alice["api_key"]) as as_alice, herald.client(bob["api_key"]) as as_bob:
        assert as_alice.get(f"/v1/events/{alice_event}").status_code == 200
        assert as_alice.get(f"/v1/events/{bob_event}").status_code == 404
        assert as_bob.get(f"/v1/events/{alice_event}").status_code == 404
        assert as_alice.post("/channel/ack", json={"ids": [bob_event]}).json() == {"acked": 0}
        assert as_bob.post("/channel/ack", json={"ids": [alice_event]}).json() == {"acked": 0}
        assert [e["text"] for e in as_alice.post("/channel/heartbeat").json()["events"]] == [
            "for alice"
        ]
        assert [e["text"] for e in as_bob.post("/channel/heartbeat").json()["events"]] == [
            "for bob"
        ]
    with herald.client() as anonymous:
        assert anonymous.get(f"/v1/events/{alice_event}").status_code == 401


def test_a_deleted_agent_loses_its_key_and_events(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    agent = new_agent(admin)
    event_id = publish(admin, agent["handle"]).json()["id"]
    assert admin.delete(f"/v1/agents/{agent['id']}").status_code == 204
    assert admin.delete(f"/v1/agents/{agent['id']}").status_code == 404
    assert admin.get(f"/v1/events/{event_id}").status_code == 404
    with herald.client(agent["api_key"]) as client:
        assert client.post("/channel/heartbeat").status_code == 401


def test_unknown_routes_and_methods_answer_json(herald: HeraldProcess) -> None:
    with herald.client() as client:
        missing = client.get("/v2/nothing")
        assert missing.status_code == 404 and error_code(missing) == "not_found"
        wrong = client.delete("/healthz")
        assert wrong.status_code == 405 and error_code(wrong) == "method_not_allowed"


@pytest.mark.parametrize(
    "fields",
    [
        {"text": "nul \u0000 inside"},
        {"data": {"k": "nul \u0000"}},
        {"dedupe_key": "a\u0000b"},
    ],
)
def test_text_no_backend_can_store_is_refused(admin: httpx.Client, fields: dict[str, Any]) -> None:
    agent = new_agent(admin)
    response = publish(admin, agent["handle"], **fields)
    assert response.status_code == 422 and "NUL" in response.json()["error"]["message"]


def test_delivery_overrides_are_set_and_checked(admin: httpx.Client) -> None:
    agent = new_agent(admin)
    url = f"/v1/agents/{agent['id']}"
    changed = admin.patch(url, json={"delivery": {"channel": True, "ack_timeout_s": 60}})
    assert changed.status_code == 200
    assert changed.json()["delivery"] == {"channel": True, "ack_timeout_s": 60}
    assert admin.get(url).json()["delivery"] == {"channel": True, "ack_timeout_s": 60}
    bad = admin.patch(url, json={"delivery": {"chanel": True}})
    assert bad.status_code == 422 and "chanel" in bad.json()["error"]["message"]
    assert admin.patch("/v1/agents/agt_none", json={"delivery": {}}).status_code == 404
    created = admin.post(
        "/v1/agents", json={"handle": f"d-{uuid.uuid4().hex[:6]}", "delivery": {"log": False}}
    )
    assert created.status_code == 201 and created.json()["delivery"] == {"log": False}
    assert admin.get(f"{url}/sessions").json() == {"sessions": []}


def test_an_application_gets_replies_as_the_agent_it_publishes_from(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    forum, alice = new_agent(admin, "forum"), new_agent(admin, "alice")
    form = {"type": "object", "properties": {"vote": {"type": "string", "enum": ["up", "down"]}}}
    question = publish(
        admin, alice["handle"], "Rate this answer", reply=form, **{"from": forum["handle"]}
    )
    assert question.status_code == 202
    with herald.client(alice["api_key"]) as as_alice:
        (event,) = as_alice.post("/channel/heartbeat").json()["events"]
        assert event["from"] == forum["handle"] and event["reply"] == form
        answer = {"event_id": event["id"], "text": "up", "data": {"vote": "up"}}
        assert as_alice.post("/channel/reply", json=answer).status_code == 201
    with herald.client(forum["api_key"]) as as_forum:
        (reply,) = as_forum.post("/channel/heartbeat").json()["events"]
    assert reply["type"] == "reply.received" and reply["reply_to"] == event["id"]
    assert reply["from"] == alice["handle"] and reply["data"]["reply"] == {"vote": "up"}
    bad = publish(admin, alice["handle"], "x", **{"from": "Not A Handle"})
    assert bad.status_code == 422 and "from" in bad.json()["error"]["message"]


PROBED = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def test_every_405_allows_every_method_its_path_takes(
    herald: HeraldProcess, tmp_path: Path
) -> None:
    # Without a key: a method a path takes is answered (401, or a page), never carried out.
    app = create_app(Hub.from_url(f"sqlite:///{tmp_path / 'never-opened.db'}"))
    paths = {
        re.sub(r"\{\w+\}", "x", route.path) for route in app.routes if isinstance(route, Route)
    }
    wrong = []
    with herald.client() as client:
        for path in sorted(paths):
            answers = {method: client.request(method, path) for method in PROBED}
            taken = {method for method, answer in answers.items() if answer.status_code != 405}
            for method, answer in answers.items():
                if answer.status_code == 405:
                    allowed = set(answer.headers["allow"].split(", "))
                    if allowed != taken:
                        wrong.append(
                            f"{method} {path}: Allow {sorted(allowed)}, takes {sorted(taken)}"
                        )
    assert wrong == []


def test_a_dry_run_checks_a_publish_as_it_would_be_done_and_stores_nothing(
    herald: HeraldProcess,
) -> None:
    with herald.client(herald.admin_key) as admin:
        agent = admin.post("/v1/agents", json={"handle": f"dry-{uuid.uuid4().hex[:8]}"}).json()
        good = [{"to": agent["handle"], "type": "t", "text": f"n{n}"} for n in range(3)]
        checked = admin.post("/v1/events?dry_run=true", json=good)
        assert checked.status_code == 200 and checked.json() == {"checked": 3}
        one = admin.post("/v1/events?dry_run=true", json=good[0])
        assert one.status_code == 200 and one.json() == {"checked": 1}
        unknown = admin.post("/v1/events?dry_run=true", json=[*good, {**good[0], "to": "nobody"}])
        assert unknown.status_code == 404
        assert unknown.json()["error"]["message"].startswith("events[3].to: no agent")
        malformed = admin.post("/v1/events?dry_run=true", json=[good[0], {"to": "x"}])
        assert malformed.status_code == 422 and "events[1]" in malformed.json()["error"]["message"]
        assert admin.post("/v1/events?dry_run=maybe", json=good).status_code == 422
        assert admin.get(f"/v1/agents/{agent['id']}").json()["last_seq"] == 0


def test_a_batch_published_after_its_dry_run_is_stored_as_without_one_and_checked_again(
    herald: HeraldProcess,
) -> None:
    """The hub takes a batch a dry run passed without checking its fields again: it stores the
    same events, and what depends on the hub (the key's scope, the addressee) is checked again."""
    form = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    with herald.client(herald.admin_key) as admin:
        handle, other = (f"dry-{uuid.uuid4().hex[:8]}" for _ in range(2))
        agent = admin.post("/v1/agents", json={"handle": handle}).json()
        admin.post("/v1/agents", json={"handle": other})
        events: list[dict[str, Any]] = [
            {"to": handle, "type": "t", "text": "é 😀", "data": {"k": [1, 2.5, None]}},
            {"to": handle, "type": "t.x", "text": "asks", "reply": form, "ttl_s": 60},
            {"to": handle, "type": "t", "text": "from", "from": other, "data": [1, "two"]},
        ]

        def stored(prefix: str, dry_run_first: bool) -> list[dict[str, Any]]:
            batch = [{**e, "dedupe_key": f"{prefix}{n}"} for n, e in enumerate(events)]
            body = json.dumps(batch).encode()
            if dry_run_first:
                assert admin.post("/v1/events?dry_run=true", content=body).status_code == 200
            published = admin.post("/v1/events", content=body)
            assert published.status_code == 202, published.text
            shown = [admin.get(f"/v1/events/{r['id']}").json() for r in published.json()["events"]]
            kept = ("type", "text", "data", "from", "reply", "dedupe_key")
            return [{k: e[k] for k in kept} | {"ttl": e["expires_at"] is not None} for e in shown]

        checked_first, plain = stored("checked-", True), stored("plain-", False)
        assert [e.pop("dedupe_key") for e in checked_first] == [f"checked-{n}" for n in range(3)]
        assert [e.pop("dedupe_key") for e in plain] == [f"plain-{n}" for n in range(3)]
        assert checked_first == plain

        body = json.dumps([{"to": handle, "type": "t", "text": "again"}]).encode()
        assert admin.post("/v1/events?dry_run=true", content=body).status_code == 200
        key = admin.post("/v1/keys", json={"name": "ci", "scopes": ["publish"], "handles": [other]})
        with herald.client(key.json()["key"]) as publisher:
            assert publisher.post("/v1/events", content=body).status_code == 403
        assert admin.delete(f"/v1/agents/{agent['id']}").status_code in (200, 204)
        assert admin.post("/v1/events", content=body).status_code == 404
