"""Every HTTP route of a real ``herald serve``, on SQLite and PostgreSQL, fed hostile input
(``tests/http/hostile.py``): no answer is a 5xx, every error is in herald's shape, and a refused
request changes nothing (the agents, the endpoints, and each watched event's status, attempts and
replies are compared before and after it). Every route that takes a body is also sent bodies that
stop half way or trickle in."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tests.backends import BACKENDS
from tests.http.fuzzing import (
    FUZZ,
    TYPED,
    TYPED_SCHEMA,
    World,
    assert_herald_error,
    assert_unchanged,
    strict_json,
    world_on,
)
from tests.http.hostile import (
    SearchStrategy,
    ack_cursors,
    bodies,
    cursors,
    datas,
    either,
    event_ids,
    forms,
    handles,
    header_values,
    keys,
    objects,
    path_ids,
    resume_points,
    slow_body,
    texts,
    ttls,
    urls,
    values,
)


@dataclass(frozen=True)
class Call:
    """One HTTP request, with its key named ("admin", "alice", "none", ...), never shown."""

    method: str
    path: str
    key: str
    body: bytes | None = None
    headers: dict[str, bytes] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)


@pytest.fixture(scope="module", params=BACKENDS)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    with world_on(request.param, tmp_path_factory.mktemp(request.param)) as opened:
        yield opened


def key(natural: str) -> SearchStrategy[str]:
    """Mostly the key the route wants; else another, none, or one no herald made."""
    return st.sampled_from([natural] * 12 + ["admin", "alice", "publisher", "none", "garbage"])


def call(
    method: str,
    path: SearchStrategy[str] | str,
    natural_key: str,
    body: SearchStrategy[bytes] | None = None,
) -> SearchStrategy[Call]:
    return st.builds(
        Call,
        st.just(method),
        path if isinstance(path, SearchStrategy) else st.just(path),
        key(natural_key),
        body if body is not None else st.none(),
    )


def agent_path(agent: str, suffix: str = "") -> SearchStrategy[str]:
    return path_ids(st.just(f"@{agent}-id@")).map(lambda i: f"/v1/agents/{i}{suffix}")


deliveries = either(
    st.fixed_dictionaries(
        {},
        optional={
            "channel": either(st.booleans()),
            "elicitation": either(st.booleans()),
            "stream": either(st.booleans()),
            "log": either(st.booleans()),
            "ack_timeout_s": either(st.integers(1, 86_400)),
        },
    )
)
secrets = either(st.sampled_from(["whsec_" + "QUFB" * 11, "whsec_short", "nope"]))
consumers = either(st.text(min_size=1, max_size=8))
events = objects(
    {
        "to": either(handles),
        "type": either(st.sampled_from(["t", "dm.received", "reply.received", TYPED])),
        "text": texts,
        "data": datas,
        "dedupe_key": either(st.text(min_size=1, max_size=10)),
        "ttl_s": ttls(),
        "reply": forms(),
        "from": either(handles),
    },
    required=("to", "type", "text"),
)
type_names = path_ids(st.sampled_from([TYPED, "fuzz.other", "herald.event"]))
regexes = st.sampled_from(["^a", "(", "a{4294967296}", "(" * 600 + ")" * 600, "\\p{L}"])
references = st.sampled_from(["#", "#/$defs/a", "#/nowhere", "#a", "http://127.0.0.1:9/x"])
payload_schemas = either(
    st.one_of(
        st.just(TYPED_SCHEMA),
        st.fixed_dictionaries(
            {},
            optional={
                "type": either(st.sampled_from(["object", "integer", "nope"])),
                "properties": st.dictionaries(
                    keys, either(st.just({"type": "string"})), max_size=2
                ),
                "required": either(st.lists(either(st.just("a")), max_size=2)),
                "pattern": either(regexes),
                "$ref": either(references),
                "$defs": either(st.just({"a": {"$anchor": "a", "type": "integer"}})),
                "$id": either(st.just("https://127.0.0.1/s")),
                "$schema": either(st.just("http://json-schema.org/draft-07/schema#")),
                "multipleOf": either(st.sampled_from([0.1, 3])),
                "const": values,
            },
        ),
    )
)
stream = st.builds(
    Call,
    st.just("GET"),
    st.just("/channel/stream"),
    key("alice"),
    st.none(),
    st.fixed_dictionaries(
        {}, optional={"last-event-id": st.one_of(header_values(), resume_points.map(str.encode))}
    ),
    st.fixed_dictionaries({}, optional={"after": st.one_of(st.text(max_size=12), resume_points)}),
)

ROUTES: dict[str, SearchStrategy[Call]] = {
    "GET /healthz": call("GET", "/healthz", "none"),
    "POST /v1/agents": call(
        "POST",
        "/v1/agents",
        "admin",
        bodies(
            objects(
                {
                    "handle": either(st.from_regex(r"[a-z0-9_-]{1,64}", fullmatch=True)),
                    "webhook_url": urls(),
                    "delivery": deliveries,
                },
                required=("handle",),
            )
        ),
    ),
    "GET /v1/agents": call("GET", "/v1/agents", "admin"),
    "GET /v1/agents/{id}": call("GET", agent_path("alice"), "admin"),
    # A real id would delete an agent the others need: one that cannot exist stands for it.
    "DELETE /v1/agents/{id}": call(
        "DELETE",
        path_ids(st.just("agt_00000000000000000000000000")).map(lambda i: f"/v1/agents/{i}"),
        "admin",
    ),
    "PATCH /v1/agents/{id}": call(
        "PATCH",
        agent_path("target"),
        "admin",
        bodies(objects({"delivery": deliveries}, required=("delivery",))),
    ),
    "GET /v1/agents/{id}/sessions": call("GET", agent_path("alice", "/sessions"), "admin"),
    "POST /v1/events": call(
        "POST", "/v1/events", "admin", bodies(st.one_of(events, st.lists(events, max_size=4)))
    ),
    "GET /v1/events/{id}": call(
        "GET", path_ids(event_ids).map(lambda i: f"/v1/events/{i}"), "alice"
    ),
    "POST /channel/heartbeat": call(
        "POST",
        "/channel/heartbeat",
        "alice",
        bodies(
            objects(
                {"cursor": cursors, "limit": either(st.integers(1, 100)), "consumer": consumers}
            )
        ),
    ),
    "POST /channel/ack": call(
        "POST",
        "/channel/ack",
        "alice",
        bodies(
            objects(
                {
                    "cursor": ack_cursors,
                    "ids": either(st.lists(either(event_ids), max_size=3)),
                    "consumer": consumers,
                }
            )
        ),
    ),
    "POST /channel/reply": call(
        "POST",
        "/channel/reply",
        "alice",
        bodies(
            objects(
                {"event_id": either(event_ids), "text": texts, "data": datas},
                required=("event_id", "text"),
            )
        ),
    ),
    "POST /channel/send": call(
        "POST",
        "/channel/send",
        "alice",
        bodies(
            objects(
                {
                    "to": either(handles),
                    "text": texts,
                    "data": datas,
                    "reply": forms(),
                    "type": either(st.sampled_from(["message.received", "t", TYPED])),
                },
                required=("to", "text"),
            )
        ),
    ),
    "GET /channel/stream": stream,
    "PUT /v1/agents/{id}/webhook": call(
        "PUT",
        agent_path("target", "/webhook"),
        "admin",
        bodies(objects({"url": urls(), "secret": secrets}, required=("url",))),
    ),
    "POST /v1/agents/{id}/webhook/rotate": call(
        "POST",
        agent_path("target", "/webhook/rotate"),
        "admin",
        st.one_of(
            st.just(b""),
            bodies(objects({"grace_s": either(st.integers(0, 86_400)), "secret": secrets})),
        ),
    ),
    "DELETE /v1/agents/{id}/webhook": call("DELETE", agent_path("target", "/webhook"), "admin"),
    "PUT /v1/agents/{id}/openclaw": call(
        "PUT",
        agent_path("target", "/openclaw"),
        "admin",
        bodies(
            objects(
                {
                    "url": urls(),
                    "token": either(st.text(min_size=1, max_size=10)),
                    "mode": either(st.sampled_from(["wake", "agent"])),
                },
                required=("url", "token"),
            )
        ),
    ),
    "DELETE /v1/agents/{id}/openclaw": call("DELETE", agent_path("target", "/openclaw"), "admin"),
    "GET /v1/agents/{id}/endpoints": call("GET", agent_path("target", "/endpoints"), "admin"),
    "PUT /v1/event-types/{name}": call(
        "PUT",
        type_names.map(lambda name: f"/v1/event-types/{name}"),
        "admin",
        bodies(
            objects(
                {"description": texts, "payload_schema": payload_schemas},
                required=("description",),
            )
        ),
    ),
    "GET /v1/event-types": call("GET", "/v1/event-types", "admin"),
    "GET /v1/event-types/{name}": call(
        "GET", type_names.map(lambda name: f"/v1/event-types/{name}"), "admin"
    ),
    # The world's own type would be gone for the routes after: one never declared stands for it.
    "DELETE /v1/event-types/{name}": call(
        "DELETE", path_ids(st.just("fuzz.never")).map(lambda n: f"/v1/event-types/{n}"), "admin"
    ),
    "POST /v1/keys": call(
        "POST",
        "/v1/keys",
        "admin",
        bodies(
            objects(
                {
                    "name": texts,
                    "scopes": either(st.lists(either(st.sampled_from(["publish", "admin"])))),
                    "handles": either(st.lists(either(handles), max_size=2)),
                    "types": either(st.lists(either(st.sampled_from(["t", "b.*", "a b"])))),
                },
                required=("name", "scopes"),
            )
        ),
    ),
    "GET /v1/keys": call("GET", "/v1/keys", "admin"),
    # The world's publisher key must outlive this route: an id no key has stands for one.
    "DELETE /v1/keys/{id}": call(
        "DELETE",
        path_ids(st.just("key_00000000000000000000000000")).map(lambda i: f"/v1/keys/{i}"),
        "admin",
    ),
}


@pytest.mark.parametrize("route", sorted(ROUTES))
@FUZZ
@given(data=st.data())
def test_no_route_fails_or_changes_anything_when_it_refuses(
    world: World, route: str, data: st.DataObject
) -> None:
    request = data.draw(ROUTES[route], label="request")
    path = world.resolve(request.path.encode()).decode()
    response = send(world, request, path)
    where = f"{request.method} {path} answered {response.status_code}"
    event(f"answered {response.status_code}")
    assert response.status_code < 500, f"{where}: {response.text[:500]}"
    if response.status_code >= 400:
        assert_herald_error(response, where)
    if response.status_code >= 300:  # a refusal, or Starlette's redirect of a trailing slash
        assert_unchanged(world, where)
        return
    if request.path != "/channel/stream" and response.status_code != 204:
        strict_json(response.content)
    world.top_up()


def send(world: World, request: Call, path: str) -> httpx.Response:
    headers = {
        **{name: world.resolve(value) for name, value in request.headers.items()},
        **authorization(world, request.key),
    }
    params = {
        name: world.resolve(value.encode()).decode() for name, value in request.params.items()
    }
    options: dict[str, Any] = {"headers": headers, "params": params}
    if request.body is not None:
        options["content"] = world.resolve(request.body)
    if request.path == "/channel/stream":
        # A stream that opens would never end: its first line is enough.
        with world.http.stream(request.method, path, **options) as response:
            if response.status_code == 200:
                assert response.headers["content-type"].startswith("text/event-stream")
                next(response.iter_lines())
            else:
                response.read()
            return response
    return world.http.request(request.method, path, **options)


def authorization(world: World, name: str) -> dict[str, bytes]:
    if name == "none":
        return {}
    if name == "garbage":
        return {"authorization": b"Bearer herald_agent_\xb2\xff"}
    return {"authorization": f"Bearer {world.keys[name]}".encode()}


BODY_ROUTES = [route for route in ROUTES if route.split(" ")[0] in ("POST", "PUT", "PATCH")]
SLOW_BODY = b'{"handle": "slow", "text": "' + b"x" * 4096 + b'"}'


def test_no_route_is_held_by_a_slow_body_and_none_changes_anything(world: World) -> None:
    """Each route that takes a body, with the key it wants, sent a body that stops half way and
    one that trickles in, all at once: each connection ends within the body deadlines (the fuzz
    hub's are short) with a refusal in herald's shape, and nothing changes."""

    def send_slowly(route: str, trickle_s: float | None) -> bytes:
        method, template = route.split(" ", 1)
        path = template.replace("{id}", "@target-id@").replace("{name}", "fuzz.never")
        key = world.keys["alice" if path.startswith("/channel/") else "admin"]
        url = str(world.http.base_url)
        resolved = world.resolve(path.encode()).decode()
        return slow_body(
            url, resolved, key, SLOW_BODY, trickle_s=trickle_s, wait_s=30, method=method
        )

    paces = (None, 0.2)  # a body that stops, and one that trickles in
    with ThreadPoolExecutor(len(BODY_ROUTES) * len(paces)) as pool:
        sent = {
            (route, pace): pool.submit(send_slowly, route, pace)
            for route in BODY_ROUTES
            for pace in paces
        }
    for (route, pace), answer in sent.items():
        where = f"{route} with a body that {'stops' if pace is None else 'trickles in'}"
        head, _, content = answer.result().partition(b"\r\n\r\n")
        status = int(head.split(b" ")[1]) if head else 0
        assert 400 <= status < 500, f"{where}: {head!r}"
        assert_herald_error(httpx.Response(status, content=content), where)
    assert_unchanged(world, "slow bodies to every route")
