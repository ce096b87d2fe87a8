"""Webhook and OpenClaw endpoints through the admin API, and real deliveries by ``herald serve``."""

from __future__ import annotations

import queue
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from tests.herald_process import HeraldProcess
from tests.waiting import wait_until
from tests.webhooks.receiver import Receiver


def new_agent(admin: httpx.Client, **fields: Any) -> dict[str, Any]:
    response = admin.post("/v1/agents", json={"handle": f"w-{uuid.uuid4().hex[:8]}", **fields})
    assert response.status_code == 201, response.text
    return dict(response.json())


def test_an_agents_webhook_is_set_shown_rotated_and_removed(admin: httpx.Client) -> None:
    agent = new_agent(admin, webhook_url="https://example.com/hook")
    assert agent["webhook"]["secret"].startswith("whsec_")
    url = f"/v1/agents/{agent['id']}"
    (listed,) = admin.get(f"{url}/endpoints").json()["endpoints"]
    assert listed["url"] == "https://example.com/hook" and listed["state"] == "active"
    assert "secret" not in listed
    chosen = "whsec_" + "A" * 44
    replaced = admin.put(f"{url}/webhook", json={"url": "https://example.org/h", "secret": chosen})
    assert replaced.status_code == 200 and replaced.json()["secret"] == chosen
    rotated = admin.post(f"{url}/webhook/rotate", json={"grace_s": 60})
    assert rotated.json()["secret"] != chosen and rotated.json()["rotating_until"]
    assert admin.delete(f"{url}/webhook").status_code == 204
    assert admin.delete(f"{url}/webhook").status_code == 404
    assert admin.get(f"{url}/endpoints").json() == {"endpoints": []}


@pytest.mark.parametrize("body", ["null", "[]", "0"])
def test_a_rotation_body_that_is_not_an_object_is_refused_and_rotates_nothing(
    admin: httpx.Client, body: str
) -> None:
    agent = new_agent(admin, webhook_url="https://example.com/hook")
    url = f"/v1/agents/{agent['id']}"
    response = admin.post(f"{url}/webhook/rotate", content=body)
    assert response.status_code == 422
    assert "rotation must be a JSON object" in response.json()["error"]["message"]
    (endpoint,) = admin.get(f"{url}/endpoints").json()["endpoints"]
    assert endpoint.get("rotating_until") is None


@pytest.mark.parametrize(
    ("path", "body", "fragment"),
    [
        ("webhook", {"url": "ftp://x"}, "http"),
        ("webhook", {"url": "https://x", "secret": "plain"}, "whsec_"),
        ("webhook", {"url": "https://x", "secret": "whsec_c2hvcnQ="}, "24"),
        ("webhook", {"url": "https://x", "colour": 1}, "colour"),
        # URLs that no request could ever go to.
        ("webhook", {"url": "https://bad host.example/h"}, "host name"),
        ("webhook", {"url": "https://h.example:99999/h"}, "out of range"),
        ("webhook", {"url": "https://h.example/\u0007"}, "not a valid URL (RFC 3986)"),
        ("webhook", {"url": "https://" + "a" * 64 + ".example/h"}, "herald can call"),
        ("openclaw", {"url": "https://x", "token": "t", "mode": "shout"}, "mode"),
        ("openclaw", {"url": "https://x"}, "token"),
    ],
)
def test_a_bad_endpoint_is_refused(
    admin: httpx.Client, path: str, body: dict[str, Any], fragment: str
) -> None:
    agent = new_agent(admin)
    response = admin.put(f"/v1/agents/{agent['id']}/{path}", json=body)
    assert response.status_code == 422 and fragment in response.json()["error"]["message"]
    assert admin.get(f"/v1/agents/{agent['id']}/endpoints").json() == {"endpoints": []}


def test_an_openclaw_token_is_never_shown(admin: httpx.Client) -> None:
    agent = new_agent(admin)
    body = {"url": "https://gateway.example", "token": "sekrit", "mode": "agent"}
    shown = admin.put(f"/v1/agents/{agent['id']}/openclaw", json=body).json()
    assert shown["kind"] == "openclaw" and shown["mode"] == "agent"
    assert "sekrit" not in str(shown)
    assert "sekrit" not in admin.get(f"/v1/agents/{agent['id']}/endpoints").text


@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
def test_two_processes_on_one_database_send_each_event_once(store_url: str) -> None:
    receiver = Receiver()
    allow = ("--webhook-allow", "loopback")
    first, second = (
        HeraldProcess(store_url, extra_args=allow),
        HeraldProcess(store_url, extra_args=allow),
    )
    try:
        with first.client(first.admin_key) as admin:
            agent = new_agent(admin)
            webhook = admin.put(
                f"/v1/agents/{agent['id']}/webhook", json={"url": receiver.url}
            ).json()
            batch = [{"to": agent["handle"], "type": "t", "text": f"e{n}"} for n in range(40)]
            ids = [e["id"] for e in admin.post("/v1/events", json=batch).json()["events"]]
        seen = []
        for _ in ids:
            seen.append(receiver.arrived.get(timeout=30))
        with pytest.raises(queue.Empty):
            receiver.arrived.get(timeout=2)  # a second send would have arrived by now
        counts = Counter(request.headers["webhook-id"] for request in seen)
        assert set(counts) == set(ids) and max(counts.values()) == 1
        for request in seen:
            Webhook(webhook["secret"]).verify(request.body, request.headers)
    finally:
        first.stop()
        second.stop()
        receiver.close()


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        (
            "webhook",
            {"url": "http://127.0.0.1:9/h"},
            "127.0.0.1 is a loopback address; herald serve --webhook-allow loopback allows it",
        ),
        (
            "webhook",
            {"url": "http://localhost:9/h"},
            "localhost resolves to 127.0.0.1, a loopback address;"
            " herald serve --webhook-allow loopback allows it",
        ),
        (
            "webhook",
            {"url": "http://[::ffff:10.0.0.1]/h"},
            "::ffff:10.0.0.1 (IPv4 10.0.0.1) is a private address;"
            " herald serve --webhook-allow private allows it",
        ),
        (
            "openclaw",
            {"url": "http://100.100.100.200", "token": "t"},
            "100.100.100.200 is a cloud metadata address, never allowed",
        ),
    ],
)
def test_a_target_the_policy_refuses_is_refused_as_it_is_set(
    admin: httpx.Client, path: str, body: dict[str, Any], message: str
) -> None:
    agent = new_agent(admin)
    response = admin.put(f"/v1/agents/{agent['id']}/{path}", json=body)
    assert response.status_code == 422
    assert response.json() == {"error": {"code": "address_refused", "message": message}}
    assert admin.get(f"/v1/agents/{agent['id']}/endpoints").json() == {"endpoints": []}


def test_an_agent_whose_webhook_the_policy_refuses_is_not_created(admin: httpx.Client) -> None:
    handle = f"w-{uuid.uuid4().hex[:8]}"
    response = admin.post("/v1/agents", json={"handle": handle, "webhook_url": "http://0.0.0.0/"})
    assert response.status_code == 422
    assert "--webhook-allow loopback" in response.json()["error"]["message"]
    listed = admin.get("/v1/agents", params={"search": handle}).json()["agents"]
    assert listed == []


def test_a_host_that_does_not_resolve_now_is_accepted_with_a_warning(
    admin: httpx.Client,
) -> None:
    agent = new_agent(admin)
    response = admin.put(
        f"/v1/agents/{agent['id']}/webhook", json={"url": "https://nothing.invalid/h"}
    )
    assert response.status_code == 200
    assert "nothing.invalid does not resolve" in response.json()["warning"]
    (listed,) = admin.get(f"/v1/agents/{agent['id']}/endpoints").json()["endpoints"]
    assert listed["state"] == "active"


def wait_for_state(admin: httpx.Client, agent_id: str, state: str) -> dict[str, Any]:
    """The agent's one endpoint, once it is in ``state`` (a bounded wait)."""

    def in_state() -> dict[str, Any] | None:
        (listed,) = admin.get(f"/v1/agents/{agent_id}/endpoints").json()["endpoints"]
        return dict(listed) if listed["state"] == state else None

    return wait_until(in_state, f"the endpoint to be {state}")


def test_an_endpoint_disabled_for_its_address_comes_back_once_serve_allows_it(
    tmp_path: Path,
) -> None:
    store_url = f"sqlite:///{tmp_path / 'herald.db'}"
    receiver = Receiver()
    loopback = ("--webhook-allow", "loopback")
    try:
        first = HeraldProcess(store_url, extra_args=loopback)
        try:
            with first.client(first.admin_key) as admin:
                agent = new_agent(admin)
                webhook = admin.put(
                    f"/v1/agents/{agent['id']}/webhook", json={"url": receiver.url}
                ).json()
        finally:
            first.stop()
        # Restarted without loopback allowed: the webhook is refused, and disabled for it.
        second = HeraldProcess(store_url)
        try:
            with second.client(second.admin_key) as admin:
                event = {"to": agent["handle"], "type": "t", "text": "waits"}
                published = admin.post("/v1/events", json=event).json()
                disabled = wait_for_state(admin, agent["id"], "disabled")
        finally:
            second.stop()
        assert disabled["disabled_reason"] == (
            "address refused: 127.0.0.1 is a loopback address;"
            " herald serve --webhook-allow loopback allows it"
        )
        assert receiver.requests == []
        # Allowed again: the endpoint comes back, and the event that waited is delivered,
        # signed with the secret it always had.
        third = HeraldProcess(store_url, extra_args=loopback)
        try:
            with third.client(third.admin_key) as admin:
                request = receiver.arrived.get(timeout=30)
                wait_for_state(admin, agent["id"], "active")
        finally:
            third.stop()
        assert request.headers["webhook-id"] == published["id"]
        Webhook(webhook["secret"]).verify(request.body, request.headers)
    finally:
        receiver.close()


def test_an_agents_webhook_url_is_its_webhooks(store_url: str) -> None:
    herald = HeraldProcess(store_url)
    try:
        with herald.client(herald.admin_key) as admin:
            agent = new_agent(admin, webhook_url="https://93.184.215.14/first")
            url = f"/v1/agents/{agent['id']}"
            assert agent["webhook_url"] == "https://93.184.215.14/first"
            assert admin.get(url).json()["webhook_url"] == "https://93.184.215.14/first"
            admin.put(f"{url}/webhook", json={"url": "https://93.184.215.14/second"})
            assert admin.get(url).json()["webhook_url"] == "https://93.184.215.14/second"
            (listed,) = [
                a
                for a in admin.get("/v1/agents", params={"search": agent["handle"]}).json()[
                    "agents"
                ]
                if a["id"] == agent["id"]
            ]
            assert listed["webhook_url"] == "https://93.184.215.14/second"
            assert admin.delete(f"{url}/webhook").status_code == 204
            assert admin.get(url).json()["webhook_url"] is None
            plain = new_agent(admin)
            admin.put(f"/v1/agents/{plain['id']}/webhook", json={"url": "https://93.184.215.14/p"})
            assert admin.get(f"/v1/agents/{plain['id']}").json()["webhook_url"] == (
                "https://93.184.215.14/p"
            )
    finally:
        herald.stop()


NOT_URLS = [
    ("https://h.example/a hook", "its path holds ' '; percent-encode it (as %20)"),
    ('https://h.example/"hook"', "its path holds '\"'; percent-encode it (as %22)"),
    ("https://h.example/<script>", "its path holds '<'; percent-encode it (as %3C)"),
    ("https://h.example/h?q=a>b", "its query holds '>'; percent-encode it (as %3E)"),
    ("https://h.example/h?q=100%", "its query holds a % not followed by two hex digits"),
    ("https://us er@h.example/h", "its user information holds ' '"),
    ("https://h.example/a\tb", "its path holds '\\t'"),
    ("https://h.example/h#a#b", "its fragment holds '#'"),
    ("https://b\u00fccher.example/h", "its host holds characters outside ASCII"),
]


@pytest.mark.parametrize(("url", "says"), NOT_URLS)
@pytest.mark.parametrize("field", ["webhook.url", "openclaw.url", "agent.webhook_url"])
def test_a_url_that_is_not_valid_by_rfc_3986_is_refused_naming_the_field_and_character(
    each_backend: HeraldProcess, field: str, url: str, says: str
) -> None:
    with each_backend.client(each_backend.admin_key) as admin:
        handle = f"w-{uuid.uuid4().hex[:8]}"
        if field == "agent.webhook_url":
            response = admin.post("/v1/agents", json={"handle": handle, "webhook_url": url})
            assert admin.get(f"/v1/agents/{handle}").status_code == 404
        else:
            agent = new_agent(admin)
            body = {"url": url, "token": "t"} if field == "openclaw.url" else {"url": url}
            response = admin.put(f"/v1/agents/{agent['id']}/{field.split('.')[0]}", json=body)
            assert admin.get(f"/v1/agents/{agent['id']}/endpoints").json() == {"endpoints": []}
        assert response.status_code == 422, response.text
        message = response.json()["error"]["message"]
        assert message.startswith(f"{field} {url!r} is not a valid URL (RFC 3986): {says}")


@pytest.mark.parametrize(
    "url",
    [
        "https://h.example/a%20hook?q=%22x%22&r=it's(ok)*;~#top",
        "https://user:p%40ss@h.example:8443/h",
        "https://xn--bcher-kva.example/h",
    ],
)
def test_a_url_valid_by_rfc_3986_is_taken_as_given(admin: httpx.Client, url: str) -> None:
    agent = new_agent(admin)
    response = admin.put(f"/v1/agents/{agent['id']}/webhook", json={"url": url})
    assert response.status_code == 200, response.text
    (listed,) = admin.get(f"/v1/agents/{agent['id']}/endpoints").json()["endpoints"]
    assert listed["url"] == url, listed
