"""``GET /openapi.json``: every route the app serves is in it, it is valid OpenAPI 3.1, it is made
of the models that check input and the shapes answers are typed with, and what a real
``herald serve`` answers, on a walk through every route, is what it documents: the status, the
media type, and the body (no field it does not name)."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from typing_extensions import is_typeddict

from herald import answers
from herald.http.app import create_app
from herald.http.described import NO_KEY, described
from herald.http.openapi import Undescribed, document, routes_of, undescribed
from herald.hub import Hub
from herald.inputs.refusals import Input
from tests.herald_process import ADMIN_KEY, HeraldProcess
from tests.sse import SSEReader

REF = "#/components/schemas/"
MCP_HEADERS = {"accept": "application/json, text/event-stream"}
FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


@pytest.fixture(scope="module")
def app_document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    store = tmp_path_factory.mktemp("never-opened") / "herald.db"
    return document(create_app(Hub.from_url(f"sqlite:///{store}")).routes)


def test_every_route_the_app_serves_is_in_the_document_with_its_methods(tmp_path: Path) -> None:
    app = create_app(Hub.from_url(f"sqlite:///{tmp_path / 'never-opened.db'}"))
    missing = undescribed(app.routes)
    assert not missing, "these routes are not described, so not in /openapi.json:\n" + "\n".join(
        f"  {each.method} {each.path}: {each.fix}" for each in missing
    )
    served = {(method, route.path_format) for route, method in routes_of(app.routes)}
    found = document(app.routes)["paths"]
    documented = {(method.upper(), path) for path, methods in found.items() for method in methods}
    assert documented == served


async def _handler(request: Request) -> Response:
    return Response()


@described("A route", keys=NO_KEY, answers={204: None})
async def _described_handler(request: Request) -> Response:
    return Response()


def test_a_route_without_a_description_is_left_out_and_said_where_to_describe() -> None:
    routes = [
        Route("/plain", _handler, methods=["GET"]),
        Route("/things/{mystery}", _described_handler, methods=["GET"]),
    ]
    assert undescribed(routes) == [
        Undescribed(
            "GET",
            "/plain",
            f"add @described(...) (herald.http.described) to {__name__}._handler",
        ),
        Undescribed(
            "GET", "/things/{mystery}", "add mystery to PATH_PARAMETERS of herald.http.openapi"
        ),
    ]
    assert document(routes)["paths"] == {}


def test_the_document_is_valid_openapi_3_1(app_document: dict[str, Any]) -> None:
    validate(app_document)
    assert app_document["openapi"] == "3.1.0"
    schemes = set(app_document["components"]["securitySchemes"])
    assert schemes == {"admin", "agent", "publisher", "metrics"}


def test_bodies_and_queries_are_described_by_the_models_that_check_them(
    app_document: dict[str, Any],
) -> None:
    schemas = app_document["components"]["schemas"]
    bodies = [
        _named(op["requestBody"]["content"]["application/json"]["schema"])
        for op in _operations(app_document)
        if "requestBody" in op
    ]
    models = {model.__name__: model for model in _subclasses(Input)}
    described_models = [name for names in bodies for name in names if name in models]
    assert len(described_models) >= 14
    for name in described_models:
        fields = models[name].model_fields
        schema = schemas[name]
        # A field excluded is one the model refuses (a topic's event has no to): not shown.
        shown = {f.alias or n for n, f in fields.items() if not f.exclude}
        assert set(schema["properties"]) == shown, name
        required = {f.alias or n for n, f in fields.items() if f.is_required()}
        assert set(schema.get("required", ())) == required, name
        assert schema["additionalProperties"] is False, name  # as the models: extra="forbid"
    # A field left out or sent as null alike says so; one that may not be null does not.
    delivery = schemas["DeliveryOverrides"]["properties"]
    assert delivery["channel"] == {"type": "boolean", "description": "Must be true or false."}
    limit = schemas["HeartbeatInput"]["properties"]["limit"]
    assert {"type": "null"} in limit["anyOf"]
    listing = next(op for op in _operations(app_document) if op["operationId"] == "list_events")
    since = next(p for p in listing["parameters"] if p["name"] == "since")
    assert since["schema"] == {"type": "string"} and "ISO 8601" in since["description"]


def test_answers_are_described_by_the_shapes_the_code_is_typed_with(
    app_document: dict[str, Any],
) -> None:
    schemas = app_document["components"]["schemas"]
    shapes = {name: shape for name, shape in vars(answers).items() if is_typeddict(shape)}
    named = {name for op in _operations(app_document) for name in _answer_names(op)}
    assert named <= set(shapes) | {"JSONRPCMessage", "JSONRPCError"} | _jsonrpc(schemas)
    for name in named & set(shapes):
        shape = shapes[name]
        fields = shape.__required_keys__ | shape.__optional_keys__
        assert set(schemas[name]["properties"]) == fields, name
        assert set(schemas[name].get("required", ())) == shape.__required_keys__, name


def test_the_document_and_the_reference_are_served_without_a_key(
    herald: HeraldProcess, app_document: dict[str, Any]
) -> None:
    with herald.client() as anyone:
        served = anyone.get("/openapi.json")
        assert served.status_code == 200
        assert served.headers["content-type"] == "application/json"
        assert served.json() == app_document
        page = anyone.get("/docs")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")


def test_each_route_takes_the_keys_it_documents_and_refuses_the_others(
    herald: HeraldProcess, admin: httpx.Client, app_document: dict[str, Any]
) -> None:
    agent = admin.post("/v1/agents", json={"handle": _handle("keys")}).json()
    made = admin.post("/v1/keys", json={"name": "keys", "scopes": ["publish"]}).json()
    keys = {"admin": ADMIN_KEY, "agent": agent["api_key"], "publisher": made["key"]}
    wrong: list[str] = []
    with httpx.Client(base_url=herald.url, timeout=30) as client:
        for path, methods in app_document["paths"].items():
            url = path.replace("{", "x").replace("}", "")
            for method, operation in methods.items():
                taken = {name for option in operation["security"] for name in option}
                for kind, key in [("none", None), *keys.items()]:
                    if kind in taken or not taken:
                        continue  # a key the route takes may open a stream that never ends
                    headers = {"authorization": f"Bearer {key}"} if key else {}
                    status = client.request(method, url, headers=headers, json={}).status_code
                    if status != (401 if key is None else 403):
                        wrong.append(f"{method.upper()} {path} with {kind}: {status}")
    assert wrong == []


class Walk:
    """Requests to a real herald, each answer checked against the document: its status is one
    the route documents, in a media type it documents, and a JSON body is valid against the
    schema of that status with no field the schema does not name."""

    def __init__(self, url: str, document: dict[str, Any]) -> None:
        self.http = httpx.Client(base_url=url, timeout=30)
        self.document = document
        self.components = _closed(document["components"])
        self.seen: set[tuple[str, str]] = set()

    def __call__(
        self,
        method: str,
        template: str,
        key: str | None,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        **options: Any,
    ) -> Any:
        path = {name: options.pop(name) for name in list(options) if "{" + name + "}" in template}
        sent = {**(headers or {}), **({"authorization": f"Bearer {key}"} if key else {})}
        response = self.http.request(method, template.format(**path), headers=sent, **options)
        where = f"{method} {template} answered {response.status_code}: {response.text[:300]}"
        assert response.status_code == status, where
        return self.check(method, template, response)

    def check(self, method: str, template: str, response: httpx.Response) -> Any:
        self.seen.add((method, template))
        operation = self.document["paths"][template][method.lower()]
        where = f"{method} {template} answered {response.status_code}"
        answer = operation["responses"].get(str(response.status_code))
        assert answer is not None, f"{where}, a status it does not document"
        if "content" not in answer:
            assert not response.content, f"{where} with a body it does not document"
            return None
        media = response.headers["content-type"].split(";")[0]
        assert media in answer["content"], f"{where} as {media}, which it does not document"
        if media != "application/json":
            return response
        body = response.json()
        self.validate(body, answer["content"][media]["schema"], where)
        return body

    def validate(self, body: Any, schema: dict[str, Any], where: str) -> None:
        checker = Draft202012Validator.FORMAT_CHECKER
        validator = Draft202012Validator(
            {**schema, "components": self.components}, format_checker=checker
        )
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]
        assert not errors, f"{where}, not as documented: {errors[:5]}"


@pytest.fixture
def walk(herald: HeraldProcess, app_document: dict[str, Any]) -> Iterator[Walk]:
    walking = Walk(herald.url, app_document)
    yield walking
    walking.http.close()


def test_what_each_route_answers_on_a_walk_through_all_of_them_is_as_documented(
    herald: HeraldProcess, walk: Walk, app_document: dict[str, Any]
) -> None:
    admin = ADMIN_KEY
    walk("GET", "/healthz", None, 200)
    walk("GET", "/readyz", None, 200)
    walk("GET", "/openapi.json", None, 200)
    walk("GET", "/docs", None, 200)
    walk("GET", "/console", None, 308)
    walk("GET", "/console/", None, 200)
    walk("GET", "/console/{file}", None, 200, file="app.js")

    alice = walk("POST", "/v1/agents", admin, 201, json={"handle": _handle("alice")})
    assert alice["webhook"] is None
    bob = walk(
        "POST",
        "/v1/agents",
        admin,
        201,
        json={
            "handle": _handle("bob"),
            "webhook_url": "https://example.com/bob",
            "delivery": {"channel": True, "ack_timeout_s": 60},
        },
    )
    assert bob["webhook"]["secret"].startswith("whsec_") and "warning" in bob["webhook"]
    walk("POST", "/v1/agents", admin, 409, json={"handle": alice["handle"]})
    walk("POST", "/v1/agents", admin, 422, json={})
    walk("POST", "/v1/agents", None, 401, json={"handle": _handle("x")})
    walk("POST", "/v1/agents", alice["api_key"], 403, json={"handle": _handle("x")})
    walk("GET", "/v1/agents", admin, 200)
    walk("GET", "/v1/agents/{agent_id}", admin, 200, agent_id=alice["handle"])
    walk("GET", "/v1/agents/{agent_id}", admin, 404, agent_id="nobody-here")
    agent = "/v1/agents/{agent_id}"
    walk("PATCH", agent, admin, 200, agent_id=alice["id"], json={"delivery": {"log": False}})
    walk("GET", agent + "/sessions", admin, 200, agent_id=alice["id"])

    kind = "/v1/event-types/{name}"
    declared = {"description": "a walk", "payload_schema": {"type": "object"}}
    walk("PUT", kind, admin, 201, name="walk.typed", json=declared)
    walk("PUT", kind, admin, 200, name="walk.typed", json=declared)
    walk("GET", "/v1/event-types", admin, 200)
    walk("GET", kind, admin, 200, name="walk.typed")

    topic = "/v1/topics/{topic}"
    walk("PUT", topic, admin, 201, topic="walk/topic", json={"description": "a walk"})
    walk("PUT", topic, admin, 200, topic="walk/topic", json={"description": "a walk again"})
    walk("PUT", topic, admin, 422, topic="walk topic", json={"description": "a space"})
    walk("GET", "/v1/topics", admin, 200)
    walk("GET", topic, admin, 200, topic="walk/topic")
    walk("GET", topic, admin, 404, topic="walk/none")
    subscriber = topic + "/subscribers/{agent_id}"
    walk("PUT", subscriber, admin, 201, topic="walk/topic", agent_id=bob["handle"])
    walk("PUT", subscriber, admin, 200, topic="walk/topic", agent_id=bob["handle"])
    walk("PUT", subscriber, admin, 404, topic="walk/none", agent_id=bob["handle"])
    walk("GET", topic + "/subscribers", admin, 200, topic="walk/topic")

    publisher = {"name": "walk", "scopes": ["publish"], "handles": [alice["handle"]]}
    made = walk("POST", "/v1/keys", admin, 201, json=publisher)
    walk("GET", "/v1/keys", admin, 200)

    event = {
        "to": alice["handle"],
        "type": "walk.typed",
        "text": "hello",
        "data": {"n": 1},
        "dedupe_key": "walk-1",
        "ttl_s": 3600,
        "reply": FORM,
        "from": bob["handle"],
    }
    one = walk("POST", "/v1/events", admin, 202, json=event)
    assert walk("POST", "/v1/events", admin, 200, json=event)["duplicate"] is True
    batch = [{"to": alice["handle"], "type": "t", "text": f"#{n}"} for n in range(2)]
    walk("POST", "/v1/events", made["key"], 202, json=batch)
    walk("POST", "/v1/events", admin, 404, json={**batch[0], "to": "nobody-here"})
    listed = {**batch[0], "to": [alice["handle"], bob["handle"]]}
    assert len(walk("POST", "/v1/events", admin, 202, json=listed)["events"]) == 2
    walk("POST", "/v1/events", admin, 422, json={**listed, "to": [bob["handle"], "nobody-here"]})
    walk("POST", "/v1/events", admin, 413, json={**batch[0], "text": "x" * 300_000})
    to_topic = {"topic": "walk/topic", "type": "t", "text": "all"}
    assert walk("POST", "/v1/events", admin, 202, json=to_topic)["reached"] == 1
    walk("POST", "/v1/events", admin, 404, json={**to_topic, "topic": "walk/none"})
    walk("POST", "/v1/events", admin, 422, json={**to_topic, "to": alice["handle"]})
    page = walk("GET", "/v1/events", admin, 200, params={"agent": alice["handle"], "limit": "1"})
    walk("GET", "/v1/events", admin, 200, params={"agent": alice["handle"], "cursor": page["next"]})
    walk("GET", "/v1/events", admin, 422, params={"since": "yesterday"})
    shown = "/v1/events/{event_id}"
    walk("GET", shown, admin, 200, event_id=one["id"])
    walk("GET", shown, alice["api_key"], 200, event_id=one["id"])
    walk("GET", shown, bob["api_key"], 404, event_id=one["id"])

    reader = SSEReader(herald.url, alice["api_key"], after=0)
    try:
        frame = reader.next()
        assert reader.status == 200 and frame is not None
        walk.validate(frame.data, {"$ref": REF + "Event"}, "a frame of GET /channel/stream")
        walk.seen.add(("GET", "/channel/stream"))
    finally:
        reader.close()

    feed = SSEReader(herald.url, admin, path="/v1/stream", params={"agent": alice["handle"]})
    try:
        assert feed.status == 200
        walk.seen.add(("GET", "/v1/stream"))  # its items: tests/http/test_feed.py
    finally:
        feed.close()

    key = alice["api_key"]
    drained = walk("POST", "/channel/heartbeat", key, 200, json={"limit": 10})
    walk("POST", "/channel/heartbeat", key, 422, json={"cursor": 10**9})
    answer = {"event_id": one["id"], "text": "ok", "data": {"ok": True}}
    walk("POST", "/channel/reply", key, 201, json=answer)
    walk("POST", "/channel/send", key, 202, json={"to": bob["handle"], "text": "hi"})
    permission = {"to": bob["handle"], "request_id": "abcde", "tool_name": "Bash"}
    walk("POST", "/channel/permission", key, 202, json=permission)
    walk("POST", "/channel/ack", key, 200, json={"cursor": drained["cursor"]})
    read = walk("GET", "/channel/history", key, 200, params={"limit": "1"})
    walk("GET", "/channel/history", key, 200, params={"before": read["next"], "type": "t*"})
    walk("GET", "/channel/history", key, 422, params={"before": "17"})
    walk("GET", "/channel/topics", key, 200)
    walk("POST", "/channel/topics", key, 201, json={"topic": "walk/*"})
    walk("POST", "/channel/topics", key, 422, json={"topic": "walk topic"})
    own = "/channel/topics/{topic}"
    walk("PUT", own, key, 200, topic="walk/*")
    walk("PUT", own, key, 404, topic="walk/none")
    walk("DELETE", own, key, 204, topic="walk/*")
    walk("DELETE", own, key, 404, topic="walk/*")
    walk("POST", "/channel/stream-token", key, 201)
    walk("PUT", "/channel/preferences", key, 200, json={"muted": ["ci.*"]})
    walk("PUT", "/channel/preferences", key, 422, json={"mute": []})
    walk("GET", "/channel/preferences", key, 200)
    again = "/v1/events/{event_id}/redeliver"
    walk("POST", again, admin, 200, event_id=one["id"])
    walk("POST", again, admin, 409, event_id=one["id"])
    later = {"to": alice["handle"], "type": "t", "text": "later", "delay_s": 60}
    scheduled = walk("POST", "/v1/events", admin, 202, json=later)
    walk("DELETE", "/v1/events/{event_id}", admin, 200, event_id=scheduled["id"])
    walk("DELETE", "/v1/events/{event_id}", admin, 409, event_id=scheduled["id"])
    walk("DELETE", "/v1/events/{event_id}", admin, 404, event_id="evt_nothing")

    hook = walk(
        "PUT",
        agent + "/webhook",
        admin,
        200,
        agent_id=alice["id"],
        json={"url": "https://example.com/a"},
    )
    walk("POST", agent + "/webhook/rotate", admin, 200, agent_id=alice["id"], json={"grace_s": 60})
    walk("POST", agent + "/webhook/rotate", admin, 200, agent_id=alice["id"])
    claw = {"url": "https://example.com/claw", "token": "t", "mode": "agent"}
    walk("PUT", agent + "/openclaw", admin, 200, agent_id=alice["id"], json=claw)
    walk("GET", agent + "/endpoints", admin, 200, agent_id=alice["id"])
    walk("GET", "/v1/endpoints", admin, 200, params={"limit": "1"})
    walk("POST", "/v1/endpoints/{endpoint_id}/enable", admin, 200, endpoint_id=hook["id"])
    walk("DELETE", agent + "/webhook", admin, 204, agent_id=alice["id"])
    walk("DELETE", agent + "/webhook", admin, 404, agent_id=alice["id"])
    walk("DELETE", agent + "/openclaw", admin, 204, agent_id=alice["id"])
    walk("GET", "/v1/stats", admin, 200)
    walk("GET", "/v1/loop-guards", admin, 200, params={"limit": "5"})
    metrics = walk("GET", "/metrics", admin, 200)
    assert "herald_" in metrics.text
    rotate = "/v1/agents/{id_or_handle}/rotate-key"
    walk("POST", rotate, admin, 200, id_or_handle=bob["handle"], json={"grace_s": 60})

    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "walk", "version": "1"},
        },
    }
    opened = walk("POST", "/mcp", key, 200, headers=MCP_HEADERS, json=initialize)
    session = {"mcp-session-id": opened.headers["mcp-session-id"]}
    walk("GET", "/mcp", key, 400, headers={"accept": "text/event-stream"})
    walk("DELETE", "/mcp", key, 200, headers=session)
    walk("DELETE", "/mcp", key, 404, headers=session)

    walk("DELETE", "/v1/keys/{key_id}", admin, 204, key_id=made["id"])
    walk("DELETE", kind, admin, 204, name="walk.typed")
    walk("DELETE", subscriber, admin, 204, topic="walk/topic", agent_id=bob["handle"])
    walk("DELETE", subscriber, admin, 404, topic="walk/topic", agent_id=bob["handle"])
    walk("DELETE", topic, admin, 204, topic="walk/topic")
    walk("DELETE", topic, admin, 404, topic="walk/topic")
    walk("DELETE", agent, admin, 204, agent_id=bob["id"])

    documented = {(m.upper(), path) for path, ms in app_document["paths"].items() for m in ms}
    unwalked = documented - walk.seen - {("GET", "/mcp")}  # an MCP session's stream never ends
    assert not unwalked, f"add each to this walk, with the answer it gives: {sorted(unwalked)}"


def test_a_post_to_mcp_that_is_not_json_is_answered_with_a_json_rpc_error(
    admin: httpx.Client, walk: Walk
) -> None:
    key = admin.post("/v1/agents", json={"handle": _handle("mcp")}).json()["api_key"]
    headers = {**MCP_HEADERS, "content-type": "text/plain"}
    refused = walk("POST", "/mcp", key, 415, headers=headers, content=b"{}")
    assert refused["error"]["code"] == -32600 and "application/json" in refused["error"]["message"]
    refused = walk("POST", "/mcp", key, 415, content=b"{}")  # no content type at all
    assert refused["jsonrpc"] == "2.0" and refused["id"] is None


def _handle(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _operations(found: dict[str, Any]) -> list[dict[str, Any]]:
    return [op for methods in found["paths"].values() for op in methods.values()]


def _named(schema: dict[str, Any]) -> list[str]:
    """The names of the schemas ``schema`` refers to, itself or through anyOf and items."""
    if "$ref" in schema:
        return [schema["$ref"].removeprefix(REF)]
    inner = [*schema.get("anyOf", []), *([schema["items"]] if "items" in schema else [])]
    return [name for each in inner for name in _named(each)]


def _answer_names(operation: dict[str, Any]) -> list[str]:
    return [
        name
        for answer in operation["responses"].values()
        for content in answer.get("content", {}).values()
        for name in _named(content["schema"])
    ]


def _jsonrpc(schemas: dict[str, Any]) -> set[str]:
    return {name for name in schemas if name.startswith("JSONRPC")}


def _subclasses(model: type[Input]) -> list[type[Input]]:
    found = []
    for sub in model.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def _closed(components: dict[str, Any]) -> dict[str, Any]:
    """The components, each of herald's answer shapes closed: a field it does not name is an
    answer that is not as documented. (The document leaves them open, so that a field added
    later breaks no client.)"""
    closed = copy.deepcopy(components)
    shapes = {name for name, shape in vars(answers).items() if is_typeddict(shape)}
    for name, schema in closed["schemas"].items():
        if name in shapes and "properties" in schema:
            schema.setdefault("additionalProperties", False)
    return closed
