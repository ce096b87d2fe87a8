"""``POST /channel/stream-token`` and ``GET /channel/stream?token=`` against real ``herald serve``
processes on both backends (and ``serve()`` in process, its clock moved by the test, for the
expiry): a token opens its agent's stream and nothing else; it is refused once it expires, once
the agent's key is rotated, altered, beside a key, and on every other route; a key a rotation
replaced makes none; and no log line ever shows one. The module's servers log every request, as
JSON, at debug level: each test reads the lines of its own requests."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from herald.config import HttpConfig, ServeConfig
from herald.testing import ManualClock
from herald.times import iso_ms
from tests.backends import BACKENDS, serving
from tests.herald_process import ADMIN_KEY, HeraldProcess
from tests.http.test_stream import new_agent, publish, read_events
from tests.in_process import serving_here
from tests.sse import SSEReader

WAIT_S = 30.0
ONLY_HERE = "a stream token opens GET /channel/stream as ?token= and nothing else"
LOGGING_EVERY_REQUEST = ("--access-log", "--log-level", "debug", "--log-format", "json")


@pytest.fixture(scope="module", params=BACKENDS)
def each_backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HeraldProcess]:
    """``herald serve`` on SQLite, then on PostgreSQL, logging every request, for the module's
    tests."""
    directory = tmp_path_factory.mktemp(request.param)
    with serving(request.param, directory, *LOGGING_EVERY_REQUEST) as process:
        yield process


ON_SQLITE = pytest.mark.parametrize("each_backend", ["sqlite"], indirect=True)
"""For a test of the HTTP edge alone: the module's SQLite server."""


def token_of(herald: HeraldProcess, key: str) -> str:
    with herald.client(key) as agent:
        made = agent.post("/channel/stream-token")
    assert made.status_code == 201, made.text
    return str(made.json()["token"])


def refusal(herald: HeraldProcess, token: str, **headers: str) -> httpx.Response:
    """The answer of the stream to ``token``, which must be a refusal (an answer that opened the
    stream would never end)."""
    with (
        httpx.Client(base_url=herald.url, timeout=WAIT_S) as anyone,
        anyone.stream("GET", "/channel/stream", params={"token": token}, headers=headers) as answer,
    ):
        assert answer.status_code != 200, "the stream opened"
        answer.read()
    return answer


def test_a_token_opens_its_agents_stream_without_the_key(each_backend: HeraldProcess) -> None:
    agent = new_agent(each_backend)
    publish(each_backend, agent["handle"], "before")
    reader = SSEReader(
        each_backend.url, None, params={"token": token_of(each_backend, agent["api_key"])}
    )
    try:
        assert reader.status == 200
        assert read_events(reader, 1) == [(1, "before")]
        publish(each_backend, agent["handle"], "after")
        assert read_events(reader, 1) == [(2, "after")]
    finally:
        reader.close()


def test_a_token_is_refused_once_the_agents_key_is_rotated_and_its_open_stream_ends(
    each_backend: HeraldProcess,
) -> None:
    agent = new_agent(each_backend)
    publish(each_backend, agent["handle"], "one")
    token = token_of(each_backend, agent["api_key"])
    reader = SSEReader(each_backend.url, None, params={"token": token})
    try:
        assert read_events(reader, 1) == [(1, "one")]
        with each_backend.client(ADMIN_KEY) as admin:
            assert admin.post(f"/v1/agents/{agent['id']}/rotate-key").status_code == 200
        closed = reader.next()
        assert closed is not None and closed.event == "error", closed
        assert closed.data["code"] == "stream_closed"
        assert reader.next() is None
    finally:
        reader.close()
    refused = refusal(each_backend, token)
    assert refused.status_code == 401
    assert "its agent's key was rotated" in refused.json()["error"]["message"]


def test_a_rotation_with_a_grace_refuses_the_tokens_of_the_old_key_and_it_makes_none(
    each_backend: HeraldProcess,
) -> None:
    agent = new_agent(each_backend)
    token = token_of(each_backend, agent["api_key"])
    with each_backend.client(ADMIN_KEY) as admin:
        rotated = admin.post(f"/v1/agents/{agent['id']}/rotate-key", json={"grace_s": 600})
        assert rotated.status_code == 200, rotated.text
    assert refusal(each_backend, token).status_code == 401
    with each_backend.client(agent["api_key"]) as old:
        assert old.post("/channel/heartbeat").status_code == 200  # it works, for its grace
        made = old.post("/channel/stream-token")
    assert made.status_code == 403
    assert "current key" in made.json()["error"]["message"]
    fresh = token_of(each_backend, rotated.json()["api_key"])
    reader = SSEReader(each_backend.url, None, params={"token": fresh})
    try:
        assert reader.status == 200
    finally:
        reader.close()


@ON_SQLITE
def test_an_altered_token_or_one_beside_a_key_or_sent_as_a_key_is_refused(
    each_backend: HeraldProcess,
) -> None:
    herald = each_backend
    alice, bob = new_agent(herald), new_agent(herald)
    token = token_of(herald, alice["api_key"])
    bobs = token.replace(alice["id"], bob["id"])
    signature = token.rpartition(".")[2]
    forged = token.removesuffix(signature) + ("A" if signature[0] != "A" else "B") + signature[1:]
    later = re.sub(r"\.(\d+)\.", lambda m: f".{int(m.group(1)) + 60_000}.", token)
    for altered in (bobs, forged, later, token + "x", "herald_stream_x", "not-a-token", ""):
        refused = refusal(herald, altered)
        assert refused.status_code == 401, (altered, refused.text)
        assert refused.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
        assert altered not in refused.text or not altered
    both = refusal(herald, token, authorization=f"Bearer {alice['api_key']}")
    assert both.status_code == 422
    with httpx.Client(base_url=herald.url, timeout=WAIT_S) as anyone:
        as_key = anyone.get("/channel/stream", headers={"authorization": f"Bearer {token}"})
    assert as_key.status_code == 401
    assert ONLY_HERE in as_key.json()["error"]["message"]


@ON_SQLITE
def test_a_token_opens_no_other_route(each_backend: HeraldProcess) -> None:
    herald = each_backend
    agent = new_agent(herald)
    token = token_of(herald, agent["api_key"])
    wrong: list[str] = []
    with httpx.Client(base_url=herald.url, timeout=WAIT_S) as anyone:
        document = anyone.get("/openapi.json").json()
        for path, methods in document["paths"].items():
            url = path.replace("{", "x").replace("}", "")
            for method, operation in methods.items():
                if not operation["security"]:
                    continue  # a route open to anyone
                as_key = {"authorization": f"Bearer {token}"}
                answered = anyone.request(method, url, headers=as_key, json={})
                if answered.status_code != 401 or ONLY_HERE not in answered.text:
                    wrong.append(f"{method.upper()} {path} with it as a key: {answered.text}")
                if path == "/channel/stream":
                    continue  # its one route
                answered = anyone.request(method, url, params={"token": token}, json={})
                if answered.status_code != 401 or ONLY_HERE not in answered.text:
                    wrong.append(f"{method.upper()} {path}?token=: {answered.text}")
    assert wrong == []


def test_no_log_line_shows_a_token(each_backend: HeraldProcess) -> None:
    herald = each_backend
    first = first_line_from_now(herald)
    agent = new_agent(herald)
    token = token_of(herald, agent["api_key"])
    reader = SSEReader(herald.url, None, params={"after": "0", "token": token})
    assert reader.status == 200
    reader.close()
    with httpx.Client(base_url=herald.url, timeout=WAIT_S) as anyone:
        assert anyone.post("/channel/heartbeat", params={"token": token}).status_code == 401
        # The name as the app reads it: %74 is t.
        assert anyone.get(f"/channel/stream?%74oken={token}x").status_code == 401
    refusal(herald, token.replace(agent["id"], new_agent(herald)["id"]))
    last = herald.wait_for_line(
        lambda line: "/channel/stream?token=[hidden]" in line and " 401" in line
    )
    lines = herald.output()[first:]
    hidden = [line for line in lines if "oken=[hidden]" in line]
    assert len(hidden) == 4, lines
    assert last in hidden
    signature = token.rpartition(".")[2]
    assert [line for line in herald.output() if signature in line] == []


def first_line_from_now(herald: HeraldProcess) -> int:
    """Where the server's lines of the test begin, once each line before it is read: a request
    of its own, marked, is logged after them (its line is the last read)."""
    mark = uuid.uuid4().hex
    with httpx.Client(base_url=herald.url, timeout=WAIT_S) as anyone:
        assert anyone.get("/healthz", params={"mark": mark}).status_code == 200
    herald.wait_for_line(lambda line: mark in line)
    return len(herald.output())


@pytest.mark.anyio
async def test_a_token_is_refused_once_its_five_minutes_are_over(own_store_url: str) -> None:
    clock = ManualClock(start=time.time())
    config = ServeConfig(store_url=own_store_url, log_level="warning", http=HttpConfig(port=0))
    async with (
        serving_here(config, clock) as url,
        httpx.AsyncClient(base_url=url, timeout=WAIT_S) as http,
    ):
        admin = {"authorization": f"Bearer {ADMIN_KEY}"}
        made = await http.post("/v1/agents", json={"handle": "web"}, headers=admin)
        key = {"authorization": f"Bearer {made.json()['api_key']}"}
        token = (await http.post("/channel/stream-token", headers=key)).json()
        assert token["expires_at"] == iso_ms(int(clock() * 1000) + 300_000)
        clock.advance(299.9)
        opening = http.stream("GET", "/channel/stream", params={"token": token["token"]})
        async with opening as opened:
            assert opened.status_code == 200
        clock.advance(0.1)
        async with http.stream(
            "GET", "/channel/stream", params={"token": token["token"]}
        ) as refused:
            assert refused.status_code == 401, "the stream opened"
            await refused.aread()
    assert json.loads(refused.text)["error"]["message"].startswith("the stream token has expired")
