"""Publisher keys end to end, against a real ``herald serve``: the admin makes, lists and
revokes them; an application publishes with one, only within its handles, types and senders,
and is refused every other route."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.routing import Route

from herald.http.app import create_app
from herald.hub import Hub
from tests.herald_process import ADMIN_KEY, HeraldProcess
from tests.http.test_api import error_code, new_agent

PUBLISH_ROUTES = {("POST", "/v1/events"), ("DELETE", "/v1/events/{event_id}")}
PUBLIC_ROUTES = {
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    *(("GET", path) for path in ("/console", "/console/", "/console/{file}")),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
}
"""Routes that take no key at all: a publisher key is as good as none there. (The console's
files hold no data: its page asks for the admin key and sends it on every request it makes.)"""


def new_key(admin: httpx.Client, **fields: Any) -> dict[str, Any]:
    body = {"name": "ci", "scopes": ["publish"], **fields}
    response = admin.post("/v1/keys", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def event(to: str, type: str = "build.failed") -> dict[str, Any]:
    return {"to": to, "type": type, "text": "the build failed"}


def last_seq(admin: httpx.Client, agent: dict[str, Any]) -> int:
    return int(admin.get(f"/v1/agents/{agent['id']}").json()["last_seq"])


def test_a_key_is_made_with_its_scope_shown_once_and_listed_without_it(
    admin: httpx.Client,
) -> None:
    made = new_key(admin, handles=["alice", "bob"], types=["build.*"])
    assert made["id"].startswith("key_") and made["key"].startswith("herald_pub_")
    assert made["name"] == "ci" and made["scopes"] == ["publish"]
    assert (made["handles"], made["types"]) == (["alice", "bob"], ["build.*"])
    listed = {key["id"]: key for key in admin.get("/v1/keys").json()["keys"]}
    assert listed[made["id"]] == {k: v for k, v in made.items() if k != "key"}
    assert made["senders"] == []
    wide = new_key(admin, name="monitor")
    assert (wide["handles"], wide["types"], wide["senders"]) == (None, None, [])


def test_a_key_publishes_within_its_handles_and_types(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    agent = new_agent(admin)
    made = new_key(admin, handles=[agent["handle"]], types=["build.*", "deploy.?"])
    with herald.client(made["key"]) as publisher:
        one = publisher.post("/v1/events", json=event(agent["handle"]))
        assert one.status_code == 202, one.text
        batch = [event(agent["handle"], "deploy.a"), event(agent["handle"], "build.passed")]
        many = publisher.post("/v1/events", json=batch)
        assert many.status_code == 202, many.text
    assert last_seq(admin, agent) == 3


def test_a_key_without_handles_or_types_publishes_to_any_agent(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    agents = [new_agent(admin), new_agent(admin)]
    made = new_key(admin, name="anything")
    with herald.client(made["key"]) as publisher:
        for agent in agents:
            response = publisher.post("/v1/events", json=event(agent["handle"], "dm.received"))
            assert response.status_code == 202, response.text


@pytest.mark.parametrize(
    ("to", "type", "refused"),
    [
        ("other", "build.failed", "is for the agent"),
        ("mine", "deploy.done", "has the type 'deploy.done'"),
    ],
)
def test_an_event_outside_the_key_is_refused_naming_what_the_key_allows(
    herald: HeraldProcess, admin: httpx.Client, to: str, type: str, refused: str
) -> None:
    mine, other = new_agent(admin), new_agent(admin)
    made = new_key(admin, handles=[mine["handle"]], types=["build.*"])
    handle = {"mine": mine["handle"], "other": other["handle"]}[to]
    with herald.client(made["key"]) as publisher:
        response = publisher.post("/v1/events", json=event(handle, type))
    assert response.status_code == 403 and error_code(response) == "forbidden"
    message = response.json()["error"]["message"]
    assert message.startswith(f"event {refused}"), message
    assert f"publishes to the agents {mine['handle']}, events of types matching build.*" in message
    assert last_seq(admin, mine) == last_seq(admin, other) == 0


def test_a_batch_with_one_event_outside_the_key_stores_none_of_it(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    mine, other = new_agent(admin), new_agent(admin)
    made = new_key(admin, handles=[mine["handle"]])
    batch = [event(mine["handle"]), event(mine["handle"]), event(other["handle"])]
    with herald.client(made["key"]) as publisher:
        response = publisher.post("/v1/events", json=batch)
    assert response.status_code == 403 and error_code(response) == "forbidden"
    message = response.json()["error"]["message"]
    assert message.startswith(f"events[2] is for the agent {other['handle']!r}"), message
    assert "nothing was published" in message
    assert last_seq(admin, mine) == 0


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"name": "ci", "scopes": ["admin"]}, "key.scopes must be a list of scopes, each one of"),
        ({"name": "ci", "scopes": []}, "key.scopes must be"),
        ({"name": "ci"}, "key.scopes is required"),
        ({"scopes": ["publish"]}, "key.name is required"),
        ({"name": "ci", "scopes": ["publish"], "handles": []}, "key.handles must be a list"),
        ({"name": "ci", "scopes": ["publish"], "handles": ["Not A Handle"]}, "key.handles"),
        (
            {"name": "ci", "scopes": ["publish"], "types": ["build failed"]},
            "key.types must be a list of 1-20 event-type globs the key may publish, of 1-128"
            " letters, digits and _ . : - each",
        ),
        ({"name": "ci", "scopes": ["publish"], "colour": "red"}, "unknown field(s) colour"),
        (
            {"name": "ci", "scopes": ["publish"], "senders": ["Bob Smith"]},
            "key.senders must be a list of at most 100 handles (or globs such as ci-*) the key"
            ' may name as an event\'s "from"',
        ),
        ({"name": "ci", "scopes": ["publish"], "senders": "*"}, "key.senders must be a list"),
    ],
)
def test_a_bad_key_is_refused_naming_the_field_and_nothing_is_made(
    admin: httpx.Client, body: dict[str, Any], says: str
) -> None:
    before = admin.get("/v1/keys").json()["keys"]
    response = admin.post("/v1/keys", json=body)
    assert response.status_code == 422 and error_code(response) == "invalid_input"
    assert says in response.json()["error"]["message"]
    if body.get("scopes") == ["admin"]:
        assert "publish" in response.json()["error"]["message"]
    assert admin.get("/v1/keys").json()["keys"] == before


def test_a_revoked_key_is_refused_at_once_and_revoking_it_again_is_not_found(
    herald: HeraldProcess, admin: httpx.Client
) -> None:
    agent = new_agent(admin)
    made = new_key(admin)
    assert admin.delete(f"/v1/keys/{made['id']}").status_code == 204
    assert made["id"] not in [key["id"] for key in admin.get("/v1/keys").json()["keys"]]
    with herald.client(made["key"]) as publisher:
        response = publisher.post("/v1/events", json=event(agent["handle"]))
    assert response.status_code == 401 and error_code(response) == "unauthorized"
    again = admin.delete(f"/v1/keys/{made['id']}")
    assert again.status_code == 404 and error_code(again) == "not_found"
    assert admin.delete("/v1/keys/not-a-key-id").status_code == 404


def test_a_key_revoked_in_one_process_is_refused_by_another_at_once(
    postgres_database_url: str,
) -> None:
    first = HeraldProcess(postgres_database_url)
    second = HeraldProcess(postgres_database_url)
    try:
        with first.client(ADMIN_KEY) as admin:
            agent = new_agent(admin)
            made = new_key(admin)
            with second.client(made["key"]) as publisher:
                taken = publisher.post("/v1/events", json=event(agent["handle"]))
                assert taken.status_code == 202, taken.text
                assert admin.delete(f"/v1/keys/{made['id']}").status_code == 204
                refused = publisher.post("/v1/events", json=event(agent["handle"]))
                assert refused.status_code == 401, refused.text
    finally:
        first.stop()
        second.stop()


def test_the_keys_routes_need_the_admin_key(herald: HeraldProcess, admin: httpx.Client) -> None:
    made = new_key(admin)
    agent = new_agent(admin)
    for key, status in ((made["key"], 403), (agent["api_key"], 403), (None, 401)):
        with herald.client(key) as caller:
            assert caller.get("/v1/keys").status_code == status
            assert caller.post(
                "/v1/keys", json={"name": "x", "scopes": ["publish"]}
            ).status_code == (status)
            assert caller.delete(f"/v1/keys/{made['id']}").status_code == status
    assert made["id"] in [key["id"] for key in admin.get("/v1/keys").json()["keys"]]


def app_routes(tmp_path: Path) -> list[tuple[str, str]]:
    """Every (method, path) the app serves, HEAD aside (a GET's twin)."""
    app = create_app(Hub.from_url(f"sqlite:///{tmp_path / 'never-opened.db'}"))
    found = []
    for route in app.routes:
        assert isinstance(route, Route), f"{route!r} is not a Route: teach this test to call it"
        found += [
            (method, route.path) for method in sorted(route.methods or ()) if method != "HEAD"
        ]
    return found


def test_a_publisher_key_is_refused_on_every_route_but_publishing(
    herald: HeraldProcess, admin: httpx.Client, tmp_path: Path
) -> None:
    made = new_key(admin)
    routes = app_routes(tmp_path)
    assert set(routes) >= PUBLISH_ROUTES | PUBLIC_ROUTES
    refused: dict[tuple[str, str], str] = {}
    with herald.client(made["key"]) as publisher:
        for method, path in routes:
            if (method, path) in PUBLISH_ROUTES | PUBLIC_ROUTES:
                continue
            url = re.sub(r"\{[^}]+\}", f"x{uuid.uuid4().hex[:6]}", path)
            response = publisher.request(method, url, json={})
            message = response.json()["error"]["message"] if response.status_code == 403 else ""
            if "a publisher key only publishes" not in message:
                refused[method, path] = f"{response.status_code} {response.text[:200]}"
    assert refused == {}, "each of these routes must refuse a publisher key with 403"
    admin_route = admin.get("/v1/agents")
    with herald.client(made["key"]) as publisher:
        response = publisher.get("/v1/agents")
    assert admin_route.status_code == 200
    assert response.json()["error"]["message"] == (
        "this route needs the admin key; a publisher key only publishes"
    )


def agents_events(process: HeraldProcess, agent: dict[str, Any]) -> list[dict[str, Any]]:
    with process.client(agent["api_key"]) as client:
        drained = client.post("/channel/heartbeat", json={"cursor": 0, "consumer": "test"})
    assert drained.status_code == 200, drained.text
    return list(drained.json()["events"])


@pytest.mark.parametrize("scope", ["to alice", "to every agent"])
def test_a_key_cannot_speak_for_another_agent_unless_its_scope_names_it(
    each_backend: HeraldProcess, scope: str
) -> None:
    with each_backend.client(ADMIN_KEY) as admin:
        alice, bob = new_agent(admin, "alice"), new_agent(admin, "bob")
        handles = {"handles": [alice["handle"]]} if scope == "to alice" else {}
        made = new_key(admin, **handles)
        forged = {**event(alice["handle"]), "from": bob["handle"]}
        with each_backend.client(made["key"]) as publisher:
            refused = publisher.post("/v1/events", json=forged)
            assert refused.status_code == 403 and error_code(refused) == "forbidden"
            message = refused.json()["error"]["message"]
            assert message.startswith(f"event names {bob['handle']!r} as its sender (from)")
            assert message.endswith("naming no sender in from; nothing was published")
            batch = publisher.post("/v1/events", json=[event(alice["handle"]), forged])
            assert batch.status_code == 403 and "events[1] names" in batch.text
            assert publisher.post("/v1/events", json=event(alice["handle"])).status_code == 202
        (only,) = agents_events(each_backend, alice)
        assert only["from"] is None
        assert last_seq(admin, bob) == 0


def test_a_key_names_the_senders_its_scope_allows_and_the_reply_goes_to_them(
    each_backend: HeraldProcess,
) -> None:
    with each_backend.client(ADMIN_KEY) as admin:
        alice, bot, bob = new_agent(admin, "alice"), new_agent(admin, "ci"), new_agent(admin, "bob")
        made = new_key(admin, handles=[alice["handle"]], senders=["ci-*"])
        assert made["senders"] == ["ci-*"]
        with each_backend.client(made["key"]) as publisher:
            asked = publisher.post(
                "/v1/events", json={**event(alice["handle"]), "from": bot["handle"]}
            )
            assert asked.status_code == 202, asked.text
            refused = publisher.post(
                "/v1/events", json={**event(alice["handle"]), "from": bob["handle"]}
            )
            assert refused.status_code == 403, refused.text
            assert "naming senders matching ci-* in from" in refused.json()["error"]["message"]
        (question,) = agents_events(each_backend, alice)
        assert question["from"] == bot["handle"]
        with each_backend.client(alice["api_key"]) as client:
            answer = {"event_id": question["id"], "text": "the secret is 42"}
            assert client.post("/channel/reply", json=answer).status_code == 201
        (reply,) = agents_events(each_backend, bot)
        assert reply["type"] == "reply.received" and "the secret is 42" in reply["text"]
        assert last_seq(admin, bob) == 0
