"""The console's files at ``/console/`` and the admin routes its page calls, against a real
``herald serve``: the files hold no data and come with headers that keep the page to itself;
every route the page calls answers only the admin key, and none shows a key or a webhook
secret."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

import httpx
import pytest

from tests.herald_process import ADMIN_KEY, HeraldProcess

FILES = {
    "app.js": "text/javascript",
    "app.css": "text/css",
    "icon.svg": "image/svg+xml",
}


def packaged(name: str) -> bytes:
    return resources.files("herald.console").joinpath("static", name).read_bytes()


def test_console_redirects_to_its_page_relative_to_where_it_is(herald: HeraldProcess) -> None:
    with herald.client() as anyone:
        answer = anyone.get("/console", follow_redirects=False)
    assert answer.status_code == 308
    assert answer.headers["location"] == "console/"  # relative: a proxy's prefix is kept


def test_the_page_and_its_files_come_without_a_key_as_shipped_and_with_strict_headers(
    herald: HeraldProcess,
) -> None:
    with herald.client() as anyone:
        pages = {"index.html": anyone.get("/console/")}
        pages.update({name: anyone.get(f"/console/{name}") for name in FILES})
    for name, answer in pages.items():
        assert answer.status_code == 200, name
        assert answer.content == packaged(name), "served as shipped: it holds no data"
        policy = answer.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self';" in policy
        assert "frame-ancestors 'none'" in policy and "form-action 'none'" in policy
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "no-referrer"
        assert "set-cookie" not in answer.headers
    assert pages["index.html"].headers["content-type"] == "text/html; charset=utf-8"
    for name, kind in FILES.items():
        assert pages[name].headers["content-type"].startswith(kind)


def test_the_page_runs_no_inline_script_or_style() -> None:
    page = packaged("index.html").decode()
    assert page.count("<script") == 1 and '<script src="app.js" defer></script>' in page
    assert "style=" not in page and "<style" not in page
    assert not re.search(r"\son\w+=", page), "no inline event handler"


def test_a_file_is_answered_304_while_unchanged(herald: HeraldProcess) -> None:
    with herald.client() as anyone:
        first = anyone.get("/console/app.js")
        again = anyone.get("/console/app.js", headers={"if-none-match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == first.headers["etag"]


@pytest.mark.parametrize(
    "path",
    ["/console/index.html", "/console/nothing.js", "/console/..%2f..%2fpyproject.toml",
     "/console/__init__.py", "/console/static"],
)  # fmt: skip
def test_nothing_but_the_console_s_files_is_served(herald: HeraldProcess, path: str) -> None:
    with herald.client() as anyone:
        answer = anyone.get(path)
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "not_found"


@dataclass
class Store:
    """Two agents, one with a webhook whose secret is known, an event of each, and a
    publisher key: every secret herald hands out once."""

    alice: dict[str, Any]
    bob: dict[str, Any]
    secret: str
    endpoint_id: str
    alice_event: str
    bob_event: str
    publisher_key: str

    @property
    def secrets(self) -> list[str]:
        return [ADMIN_KEY, self.alice["api_key"], self.bob["api_key"], self.secret,
                self.publisher_key]  # fmt: skip


@pytest.fixture(scope="module")
def store(herald: HeraldProcess) -> Iterator[Store]:
    tag = uuid.uuid4().hex[:8]
    secret = "whsec_" + "c29uc29sZXRzZWNyZXRzZWNyZXRzZWNyZXQ="
    with herald.client(ADMIN_KEY) as admin:
        alice = admin.post("/v1/agents", json={"handle": f"alice-{tag}"}).json()
        bob = admin.post("/v1/agents", json={"handle": f"bob-{tag}"}).json()
        hook = admin.put(
            f"/v1/agents/{alice['id']}/webhook",
            json={"url": "https://93.184.215.14/hook", "secret": secret},
        )
        assert hook.status_code == 200, hook.text
        events = [
            admin.post("/v1/events", json={"to": agent["handle"], "type": "t", "text": "x"})
            for agent in (alice, bob)
        ]
        key = admin.post("/v1/keys", json={"name": f"ci-{tag}", "scopes": ["publish"]})
        assert key.status_code == 201, key.text
        yield Store(
            alice, bob, secret, hook.json()["id"], events[0].json()["id"],
            events[1].json()["id"], key.json()["key"],
        )  # fmt: skip


def console_calls(store: Store) -> list[tuple[str, str, dict[str, Any] | None]]:
    """Every request the console's page makes of the admin API (method, path, body)."""
    alice, event = store.alice["handle"], store.alice_event
    return [
        ("GET", "/v1/stats", None),
        ("GET", f"/v1/agents?search={alice[:5]}&limit=50", None),
        ("GET", f"/v1/agents/{alice}", None),
        ("GET", f"/v1/agents/{store.alice['id']}/sessions", None),
        ("GET", f"/v1/agents/{store.alice['id']}/endpoints", None),
        ("GET", f"/v1/events?agent={alice}&status=pending&limit=20", None),
        ("GET", "/v1/events?limit=50", None),
        ("GET", f"/v1/events/{event}", None),
        ("GET", "/v1/endpoints?failing=true&limit=10", None),
        ("GET", "/v1/endpoints?limit=50", None),
        ("POST", f"/v1/events/{event}/redeliver", None),
        ("POST", f"/v1/endpoints/{store.endpoint_id}/enable", None),
        ("POST", "/v1/events", {"to": alice, "type": "console.test", "text": "hello"}),
    ]


def call(
    client: httpx.Client, method: str, path: str, body: dict[str, Any] | None
) -> httpx.Response:
    return client.request(method, path, json=body)


def test_no_route_the_console_calls_answers_without_a_key_or_with_another_one(
    herald: HeraldProcess, store: Store
) -> None:
    keys = {
        "none": None,
        "unknown": "herald_adm_" + "x" * 40,
        "agent": store.alice["api_key"],
        "publisher": store.publisher_key,
    }
    # The live feed too (asked of the admin, it would answer a stream that does not end).
    feed = ("GET", f"/v1/stream?agent={store.alice['handle']}", None)
    for who, key in keys.items():
        with herald.client(key) as client:
            for method, path, body in [*console_calls(store), feed]:
                answer = call(client, method, path, body)
                allowed = (who, method, path) in {
                    # The agent reads its own event (as GET /v1/events/{id} allows it to) and
                    # the publisher publishes: neither is the console, and neither needs it.
                    ("agent", "GET", f"/v1/events/{store.alice_event}"),
                    ("publisher", "POST", "/v1/events"),
                }
                if allowed:
                    continue
                expected = 401 if who in ("none", "unknown") else 403
                assert answer.status_code == expected, (who, method, path, answer.text)
                assert not any(secret in answer.text for secret in store.secrets)


def test_an_agent_key_sees_nothing_of_another_agent_s_event(
    herald: HeraldProcess, store: Store
) -> None:
    with herald.client(store.alice["api_key"]) as alice:
        answer = alice.get(f"/v1/events/{store.bob_event}")
    assert answer.status_code == 404
    assert store.bob["id"] not in answer.text and store.bob["handle"] not in answer.text


def test_no_answer_the_console_reads_shows_a_key_or_a_webhook_secret(
    herald: HeraldProcess, store: Store
) -> None:
    with herald.client(ADMIN_KEY) as admin:
        for method, path, body in console_calls(store):
            answer = call(admin, method, path, body)
            assert answer.status_code < 500, (path, answer.text)
            assert not any(secret in answer.text for secret in store.secrets), path
