"""Every way SEP-3415 lets a webhook subscription's endpoint be verified, against a real
``herald serve`` on both backends and real receivers on loopback: the origin's receiver
document (``/.well-known/mcp-webhook-receiver.json``), kept per (agent, URL) across refreshes
and a restart; hostile documents, each refused with its reason and nothing stored; and the
operator's allowlist (``--subscription-allow``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pytest
from standardwebhooks import Webhook

from herald import Hub
from herald.addresses import AddressPolicy
from herald.config import SubscriptionConfig
from herald.errors import InvalidInput
from herald.inputs.refusals import parse
from herald.inputs.subscriptions import SubscribeInput
from herald.webhooks.receiver_document import PATH
from herald.webhooks.sender import MAX_ANSWER_BYTES, Sender
from herald.webhooks.subscriptions import subscribe as subscribe_here
from herald.webhooks.verification import allowed
from tests.backends import BACKENDS, fresh_store_url
from tests.herald_process import HeraldProcess
from tests.http.test_mcp import new_agent, publish
from tests.http.test_mcp_events import agent_http
from tests.http.test_mcp_webhooks import LOOPBACK, SECRET, call, next_event, subscription
from tests.webhooks.receiver import Page, Receiver

pytestmark = pytest.mark.anyio

TIMEOUT = ("--webhook-timeout", "2")
"""A stalling document is given up on after 2 s (the default is 15 s)."""


def document(*receivers: str) -> Page:
    body = json.dumps({"receivers": list(receivers)}).encode()
    return Page(200, {"content-type": "application/json"}, body)


def challenges(receiver: Receiver) -> list[Any]:
    return [r.json for r in receiver.requests if r.json.get("type") == "verification"]


async def subscribe(herald: HeraldProcess, key: str, url: str, **fields: Any) -> dict[str, Any]:
    async with agent_http(herald, key) as http:
        return await call(http, "modern", "events/subscribe", subscription(url, **fields))


async def unsubscribe(herald: HeraldProcess, key: str, url: str) -> dict[str, Any]:
    target = {"name": "herald.event", "arguments": {}, "delivery": {"url": url}}
    async with agent_http(herald, key) as http:
        return await call(http, "modern", "events/unsubscribe", target)


async def test_a_callback_its_origin_publishes_a_receiver_document_for_is_verified_for_good(
    own_store_url: str,
) -> None:
    receiver = Receiver(pages={PATH: document("/other/", "/hooks/")})  # echoes no challenge
    callback = receiver.url + "/hooks/alice?route=7"
    first = HeraldProcess(own_store_url, extra_args=LOOPBACK)
    try:
        alice, bob = new_agent(first), new_agent(first)
        made = await subscribe(first, alice["api_key"], callback)
        assert made["result"]["id"].startswith("sub_"), made
        assert receiver.gets == [PATH] and challenges(receiver) == []
        other = await subscribe(first, alice["api_key"], callback, arguments={"types": ["x.*"]})
        assert "result" in other and receiver.gets == [PATH]  # kept for (alice, URL)
        assert "result" in await subscribe(first, bob["api_key"], callback)
        assert receiver.gets == [PATH, PATH]  # bob's verification is his own
        event_id = publish(first, alice["handle"], "verified by the document")
        delivered = await next_event(receiver)
        assert Webhook(SECRET).verify(delivered.body, delivered.headers)["eventId"] == event_id
    finally:
        first.stop()
    second = HeraldProcess(own_store_url, extra_args=LOOPBACK)
    try:
        refreshed = await subscribe(second, alice["api_key"], callback)
        assert refreshed["result"]["id"] == made["result"]["id"]
        assert refreshed["result"]["deliveryStatus"]["active"] is True
        # Kept with the subscription: no fetch and no challenge after the restart.
        assert receiver.gets == [PATH, PATH] and challenges(receiver) == []
        later = publish(second, alice["handle"], "after the restart")
        assert (await next_event(receiver)).json["eventId"] == later
    finally:
        second.stop()
        receiver.close()


class Served(NamedTuple):
    herald: HeraldProcess
    vouched: Receiver
    """A receiver under the operator's allowlist: it publishes nothing and echoes nothing."""


@pytest.fixture(scope="module", params=BACKENDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    vouched = Receiver()
    allow = ("--subscription-allow", vouched.url + "/vouched/")
    try:
        with fresh_store_url(request.param, tmp_path_factory.mktemp("verify")) as url:
            process = HeraldProcess(url, extra_args=(*LOOPBACK, *TIMEOUT, *allow))
            yield Served(process, vouched)
            process.stop()
    finally:
        vouched.close()


@pytest.fixture
def herald(served: Served) -> HeraldProcess:
    return served.herald


def _redirect(elsewhere: Receiver) -> Page:
    return Page(302, {"location": elsewhere.url + PATH})


HUGE = json.dumps({"receivers": ["/hooks/"], "pad": "x" * MAX_ANSWER_BYTES}).encode()

HOSTILE: list[tuple[str, Callable[[Receiver], Page], str, str]] = [
    ("huge", lambda _: Page(200, {}, HUGE), "/hooks/a", f"is over {MAX_ANSWER_BYTES} bytes"),
    (
        "slow",
        lambda _: Page(200, {}, b'{"receivers": ["/hooks/"]}', stall=True),
        "/hooks/a",
        "could not be fetched (timeout: timed out)",
    ),
    ("redirecting", _redirect, "/hooks/a", "answered HTTP 302, a redirect"),
    ("other paths", lambda _: document("/other/"), "/hooks/a", "lists '/other/': none covers"),
    ("dot segments", lambda _: document("/hooks/"), "/hooks/../admin", "none covers the path"),
    ("encoded dots", lambda _: document("/hooks/"), "/hooks/%2e%2e/admin", "none covers"),
    ("relative paths", lambda _: document("hooks/"), "/hooks/a", "each starting with /"),
    ("not a list", lambda _: Page(200, {}, b'["/hooks/"]'), "/hooks/a", "is not {"),
    ("invalid JSON", lambda _: Page(200, {}, b'{"receivers": ["/ho'), "/hooks/a", "is not JSON"),
    ("none", lambda _: Page(404), "/hooks/a", "is not published (HTTP 404)"),
]


@pytest.mark.parametrize(
    ("page", "path", "says"), [case[1:] for case in HOSTILE], ids=[case[0] for case in HOSTILE]
)
async def test_a_document_that_does_not_cover_the_callback_is_refused_with_why_and_stores_nothing(
    herald: HeraldProcess, page: Callable[[Receiver], Page], path: str, says: str
) -> None:
    elsewhere = Receiver(pages={PATH: document("/")})  # what a redirect points to
    receiver = Receiver(pages={PATH: page(elsewhere)})  # and it echoes no challenge
    try:
        agent = new_agent(herald)
        refused = (await subscribe(herald, agent["api_key"], receiver.url + path))["error"]
        assert refused["code"] == -32027 and refused["data"] == {"reason": "challenge_failed"}
        message = refused["message"]
        assert message.startswith("params.delivery.url did not pass verification"), message
        assert f"the origin's {PATH} " in message and says in message, message
        assert receiver.gets == [PATH] and elsewhere.gets == []  # fetched once, never followed
        assert len(challenges(receiver)) == 1  # and then challenged, which it failed
        gone = await unsubscribe(herald, agent["api_key"], receiver.url + path)
        assert gone["error"]["code"] == -32023  # nothing was stored
    finally:
        receiver.close()
        elsewhere.close()


async def test_a_callback_under_the_operators_allowlist_is_verified_without_a_request(
    herald: HeraldProcess, served: Served
) -> None:
    vouched = served.vouched
    agent = new_agent(herald)
    callback = vouched.url + "/vouched/" + agent["handle"]
    made = await subscribe(herald, agent["api_key"], callback)
    assert made["result"]["id"].startswith("sub_"), made
    assert vouched.gets == [] and vouched.requests == []  # no document, no challenge
    event_id = publish(herald, agent["handle"], "vouched for")
    delivered = await next_event(vouched)
    assert Webhook(SECRET).verify(delivered.body, delivered.headers)["eventId"] == event_id
    assert delivered.path == "/vouched/" + agent["handle"]
    beside = await subscribe(herald, agent["api_key"], vouched.url + "/vouchedx/")
    assert beside["error"]["code"] == -32027  # the prefix ends with /: a folder, no more
    assert vouched.gets == [PATH]


@pytest.mark.parametrize(
    ("url", "prefix", "under"),
    [
        ("https://a.example/hooks/x", "https://a.example/hooks/", True),
        ("https://A.EXAMPLE:443/hooks/x", "https://a.example/hooks/", True),
        ("https://a.example/hooks/x?k=1", "https://a.example", True),
        ("https://a.example/", "https://a.example", True),
        ("http://a.example/hooks/x", "https://a.example/hooks/", False),
        ("https://a.example:8443/hooks/x", "https://a.example/hooks/", False),
        ("https://a.example.evil.test/hooks/x", "https://a.example/hooks/", False),
        ("https://b.example/hooks/x", "https://a.example/hooks/", False),
        ("https://a.example/hooksx", "https://a.example/hooks/", False),
        ("https://a.example/hooks/../admin", "https://a.example/hooks/", False),
        ("https://a.example/hooks/%2E%2e/admin", "https://a.example/hooks/", False),
        ("https://a.example/hooks/./x", "https://a.example/hooks/", False),
    ],
)
def test_a_url_is_under_an_allowed_prefix_by_its_origin_and_a_plain_path(
    url: str, prefix: str, under: bool
) -> None:
    assert allowed(url, [prefix]) is under


async def test_the_allowlist_waives_verification_never_the_address_policy(hub: Hub) -> None:
    receiver = Receiver(answers_challenges=True)
    callback = f"https://127.0.0.1:{receiver.port}/hooks/"
    agent, _ = await hub.create_agent("alice")
    config = SubscriptionConfig(allow=(callback,))
    sender = Sender("http://hub.test", AddressPolicy(), timeout_s=2, clock=hub.clock)
    raw = {
        "name": "herald.event",
        "arguments": {},
        "delivery": {"mode": "webhook", "url": callback, "secret": SECRET},
    }
    try:
        with pytest.raises(InvalidInput, match=r"params\.delivery\.url is refused: .*loopback"):
            await subscribe_here(hub, sender, agent, parse(SubscribeInput, raw, "params"), config)
        assert await hub.subscriptions.of_agent(agent.id) == []
        assert receiver.gets == [] and receiver.requests == []
    finally:
        await sender.close()
        receiver.close()


@pytest.mark.parametrize(
    ("pages", "echoes", "way"),
    [({PATH: document("/")}, False, "receiver document"), ({}, True, "challenge")],
)
async def test_each_verification_is_logged_with_its_way_and_never_the_url(
    hub: Hub, caplog: pytest.LogCaptureFixture, pages: dict[str, Page], echoes: bool, way: str
) -> None:
    receiver = Receiver(pages=pages, answers_challenges=echoes)
    callback = receiver.url + "/hooks/?token=s3cret"
    agent, _ = await hub.create_agent("alice")
    sender = Sender("http://hub.test", AddressPolicy(allow_loopback=True), timeout_s=5)
    raw = {
        "name": "herald.event",
        "arguments": {},
        "delivery": {"mode": "webhook", "url": callback, "secret": SECRET},
    }
    caplog.set_level(logging.INFO, logger="herald.webhooks")
    try:
        made = await subscribe_here(hub, sender, agent, parse(SubscribeInput, raw, "params"))
    finally:
        await sender.close()
        receiver.close()
    (line,) = [r for r in caplog.records if getattr(r, "verified_by", None)]
    assert (line.verified_by, line.subscription) == (way, made["id"])  # type: ignore[attr-defined]
    assert line.getMessage() == f"subscription {made['id']}: its endpoint is verified by the {way}"
    assert "s3cret" not in caplog.text
