"""CORS (``herald serve --cors-origin``) over real HTTP against a real ``herald serve``: a
preflight from a listed origin is answered, every answer to it is marked, an origin not listed
gets no CORS headers and its preflight is refused, and without the option nothing changes.

Then end to end in a real headless Chromium (Debian's ``chromium``, driven by Playwright): the
example page of the docs (``docs/browser.html``), served with its backend from another loopback
port, follows an agent's stream with ``EventSource`` and a stream token and shows what is
published; the same page served from an origin not listed cannot."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.console.test_console import browser  # noqa: F401  (the module's browser)
from tests.herald_process import HeraldProcess
from tests.http.test_stream import new_agent, publish

PAGE = Path(__file__).resolve().parents[2] / "docs" / "browser.html"
WAIT_S = 30.0
WAIT_MS = 15_000
APP = "http://app.example.com"
"""The origin listed in the module's herald."""


def preflight(
    herald: HeraldProcess, origin: str, path: str = "/channel/heartbeat"
) -> httpx.Response:
    headers = {
        "origin": origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
    }
    with httpx.Client(base_url=herald.url, timeout=WAIT_S) as anyone:
        return anyone.options("/channel/heartbeat", headers=headers)


def cors_headers(answer: httpx.Response) -> dict[str, str]:
    return {
        name: value for name, value in answer.headers.items() if name.startswith("access-control-")
    }


def test_a_preflight_from_a_listed_origin_is_answered_with_what_herald_takes(
    listing: HeraldProcess,
) -> None:
    answer = preflight(listing, APP)
    assert answer.status_code == 204, answer.text
    assert cors_headers(answer) == {
        "access-control-allow-origin": APP,
        "access-control-allow-methods": "GET, POST, PUT, PATCH, DELETE",
        "access-control-allow-headers": (
            "Authorization, Content-Type, Last-Event-ID, Mcp-Session-Id, Mcp-Protocol-Version"
        ),
        "access-control-max-age": "600",
        "access-control-expose-headers": "Retry-After, WWW-Authenticate, Mcp-Session-Id",
    }
    assert answer.headers["vary"] == "Origin"


def test_every_answer_to_a_listed_origin_is_marked_refusals_and_mcp_included(
    listing: HeraldProcess,
) -> None:
    agent = new_agent(listing)
    asked = {"origin": APP, "authorization": f"Bearer {agent['api_key']}"}
    with httpx.Client(base_url=listing.url, timeout=WAIT_S, headers=asked) as page:
        answers = [
            page.post("/channel/heartbeat"),
            page.post("/channel/heartbeat", headers={"authorization": "Bearer wrong"}),
            page.get("/v1/agents"),
            page.get("/no-such-route"),
            # /mcp needs the app's lifespan (its session manager): it still runs.
            page.post(
                "/mcp",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "page", "version": "1"},
                    },
                },
                headers={"accept": "application/json, text/event-stream"},
            ),
        ]
    assert [answer.status_code for answer in answers] == [200, 401, 403, 404, 200]
    for answer in answers:
        assert answer.headers["access-control-allow-origin"] == APP
        assert answer.headers["vary"] == "Origin"
    assert "mcp-session-id" in answers[-1].headers


def test_an_origin_not_listed_gets_no_cors_headers_and_its_preflight_is_refused(
    listing: HeraldProcess,
) -> None:
    refused = preflight(listing, "http://elsewhere.example.com")
    assert refused.status_code == 403
    assert cors_headers(refused) == {}
    message = refused.json()["error"]["message"]
    assert "'http://elsewhere.example.com' may not call this herald" in message
    assert "--cors-origin http://elsewhere.example.com" in message
    with httpx.Client(base_url=listing.url, timeout=WAIT_S) as anyone:
        answered = anyone.get("/healthz", headers={"origin": "https://app.example.com"})
        unnamed = anyone.get("/healthz")
    assert answered.status_code == 200 and cors_headers(answered) == {}
    assert (
        unnamed.status_code == 200 and cors_headers(unnamed) == {} and "vary" not in unnamed.headers
    )


def test_without_cors_origins_a_preflight_is_not_allowed_and_no_answer_is_marked(
    herald: HeraldProcess,
) -> None:
    refused = preflight(herald, APP)
    assert refused.status_code == 405
    assert cors_headers(refused) == {} and "vary" not in refused.headers
    with httpx.Client(base_url=herald.url, timeout=WAIT_S) as anyone:
        answered = anyone.get("/healthz", headers={"origin": APP})
    assert cors_headers(answered) == {} and "vary" not in answered.headers


class PageSite:
    """A web site on a loopback port of its own: ``docs/browser.html`` at ``/``, and its backend
    at ``/herald-stream``, which holds the agent's key and asks herald for a stream token, as
    the page's own backend would."""

    def __init__(self) -> None:
        self.herald_url = ""
        self.agent_key = ""
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/":
                    self._answer(200, "text/html; charset=utf-8", PAGE.read_bytes())
                elif self.path == "/herald-stream":
                    self._answer(200, "application/json", site.stream_answer())
                else:
                    self._answer(404, "text/plain", b"no such page")

            def _answer(self, status: int, media: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", media)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stream_answer(self) -> bytes:
        key = {"authorization": f"Bearer {self.agent_key}"}
        made = httpx.post(f"{self.herald_url}/channel/stream-token", headers=key, timeout=WAIT_S)
        made.raise_for_status()
        stream = f"{self.herald_url}/channel/stream?token={made.json()['token']}"
        return json.dumps({"stream": stream}).encode()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Sites:
    herald: HeraldProcess
    listed: PageSite
    unlisted: PageSite
    agent: dict[str, Any]


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sites]:
    """Two web sites, and a ``herald serve`` that lets pages of ``APP`` and of the first in."""
    listed, unlisted = PageSite(), PageSite()
    store = tmp_path_factory.mktemp("pages") / "herald.db"
    herald = HeraldProcess(
        f"sqlite:///{store}", extra_args=("--cors-origin", APP, "--cors-origin", listed.origin)
    )
    agent = new_agent(herald)
    for site in (listed, unlisted):
        site.herald_url, site.agent_key = herald.url, agent["api_key"]
    yield Sites(herald, listed, unlisted, agent)
    herald.stop()
    listed.close()
    unlisted.close()


@pytest.fixture
def listing(sites: Sites) -> HeraldProcess:
    """The module's ``herald serve`` with CORS origins listed."""
    return sites.herald


def opened(chromium: Browser, site: PageSite) -> Page:
    page = chromium.new_context().new_page()
    page.goto(f"{site.origin}/")
    return page


@pytest.mark.browser
def test_a_page_of_a_listed_origin_follows_the_agents_stream_with_a_token(
    browser: Browser,  # noqa: F811
    sites: Sites,
) -> None:
    page = opened(browser, sites.listed)
    expect(page.get_by_role("status")).to_have_text("following", timeout=WAIT_MS)
    publish(sites.herald, sites.agent["handle"], "<b>deploy</b> done")
    events = page.get_by_role("list", name="Events")
    expect(events.get_by_role("listitem")).to_have_text(["t: <b>deploy</b> done"], timeout=WAIT_MS)
    # A request that needs a preflight (a JSON body) is let through too, and its refusal read.
    status = page.evaluate(
        """url => fetch(url + "/channel/heartbeat", {method: "POST",
              headers: {"content-type": "application/json"}, body: "{}"})
            .then(answer => answer.status)""",
        sites.herald.url,
    )
    assert status == 401
    page.context.close()


@pytest.mark.browser
def test_a_page_of_an_origin_not_listed_cannot_follow_the_stream(
    browser: Browser,  # noqa: F811
    sites: Sites,
) -> None:
    elsewhere = opened(browser, sites.unlisted)
    expect(elsewhere.get_by_role("status")).to_have_text("interrupted", timeout=WAIT_MS)
    listed = opened(browser, sites.listed)
    expect(listed.get_by_role("status")).to_have_text("following", timeout=WAIT_MS)
    publish(sites.herald, sites.agent["handle"], "only for the listed")
    shown = listed.get_by_role("list", name="Events").get_by_role("listitem")
    expect(shown.last).to_have_text("t: only for the listed", timeout=WAIT_MS)
    expect(elsewhere.get_by_role("list", name="Events").get_by_role("listitem")).to_have_count(0)
    refused = elsewhere.evaluate(
        """url => fetch(url + "/channel/heartbeat", {method: "POST",
              headers: {"content-type": "application/json"}, body: "{}"})
            .then(answer => "answered " + answer.status, error => "refused")""",
        sites.herald.url,
    )
    assert refused == "refused"
    elsewhere.context.close()
    listed.context.close()
