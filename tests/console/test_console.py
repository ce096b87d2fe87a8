"""The console in a real headless Chromium (Debian's ``chromium``, driven by Playwright) against a
real ``herald serve`` and a real webhook receiver: what an operator does with it, end to end.

One herald, one receiver and one browser serve the whole module; each test has a browser
context of its own (its own session storage: signed out). Every wait is one of Playwright's
expectations, bounded; nothing sleeps."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from tests.herald_process import ADMIN_KEY, HeraldProcess
from tests.http.test_mcp import session
from tests.waiting import wait_until
from tests.webhooks.receiver import HANG, Receiver

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WAIT_MS = 15_000
"""How long an expectation waits for the page: room for a loaded machine."""
LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
BUILD_TEXT = "Build #1842 of api-gateway failed on main: 3 of 1,204 tests failed"
BUILD_DATA = {
    "pipeline": "api-gateway",
    "run": 1842,
    "branch": "main",
    "failed": ["test_auth_refresh", "test_rate_limit_burst", "test_tls_reload"],
    "url": "https://ci.example.com/runs/1842",
}
HOSTILE_TEXT = "<img src=x onerror=alert(1)> \u202eevil\u202c z\u0301\u200d\U0001f525"
HOSTILE_DATA = {"<script>alert(2)</script>": "<b onmouseover=alert(3)>bold</b>", "rtl": "\u202e!"}
FILLERS = 55
"""Agents beside the two the scene is about: more than one page of the agents list."""
SCREENSHOTS = "CONSOLE_SCREENSHOTS"
"""Where the screenshots test writes its images (``scripts/console-screenshots`` sets it to
``docs``); a temporary directory when unset."""

expect.set_options(timeout=WAIT_MS)


@dataclass
class Scene:
    alice: dict[str, Any]
    """Has a webhook to the receiver, disabled by its first answer (410 Gone)."""
    bob: dict[str, Any]
    """Has a live MCP session (Claude Code)."""
    build_event: str
    """Sent to alice: its webhook's 410 disabled the endpoint."""
    hostile_event: str
    """Sent to carol, who has no way to be reached: its text and data are HTML and odd
    Unicode."""
    endpoint: str


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    # The first delivery is refused for good; the second hangs until a test releases it.
    receiver = Receiver(script=[(410, {}), (HANG, {})])
    yield receiver
    receiver.close()


@pytest.fixture(scope="module")
def herald(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeraldProcess]:
    path = tmp_path_factory.mktemp("console") / "herald.db"
    process = HeraldProcess(f"sqlite:///{path}", extra_args=("--webhook-allow", "loopback"))
    yield process
    process.stop()


@pytest.fixture(scope="module")
def scene(herald: HeraldProcess, receiver: Receiver) -> Iterator[Scene]:
    with herald.client(ADMIN_KEY) as admin:
        alice = created(admin.post("/v1/agents", json={"handle": "ops-alice"}))
        bob = created(admin.post("/v1/agents", json={"handle": "ops-bob"}))
        created(admin.post("/v1/agents", json={"handle": "ops-carol"}))
        for n in range(FILLERS):
            created(admin.post("/v1/agents", json={"handle": f"agent-{n:03}"}))
        hook = admin.put(f"/v1/agents/{alice['id']}/webhook", json={"url": f"{receiver.url}/a"})
        assert hook.status_code == 200, hook.text
        build_event = published(admin, "ops-alice", "build.failed", BUILD_TEXT, BUILD_DATA)
        receiver.arrived.get(timeout=30)  # answered 410: the endpoint is disabled
        wait_until(
            lambda: endpoints_of(admin, alice)[0]["state"] == "disabled", "the endpoint disabled"
        )
        (endpoint,) = endpoints_of(admin, alice)
        hostile_event = published(admin, "ops-carol", "build.failed", HOSTILE_TEXT, HOSTILE_DATA)
        for n in range(3):
            published(admin, "ops-bob", "deploy.done", f"Deploy #{n + 1} of web is live")
    with LiveSession(herald, bob["api_key"]):
        yield Scene(alice, bob, build_event, hostile_event, endpoint["id"])


def published(
    admin: httpx.Client, to: str, type: str, text: str, data: dict[str, Any] | None = None
) -> str:
    sent = admin.post("/v1/events", json={"to": to, "type": type, "text": text, "data": data})
    assert sent.status_code == 202, sent.text
    return str(sent.json()["id"])


def endpoints_of(admin: httpx.Client, agent: dict[str, Any]) -> list[dict[str, Any]]:
    return list(admin.get(f"/v1/agents/{agent['id']}/endpoints").json()["endpoints"])


def created(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 201, response.text
    return dict(response.json())


class LiveSession:
    """An MCP session of Claude Code held open in a thread of its own (Playwright's sync API
    owns this one), until the ``with`` ends."""

    def __init__(self, herald: HeraldProcess, key: str) -> None:
        self.herald, self.key = herald, key
        self.ready, self.done = threading.Event(), threading.Event()
        self.opened = False
        self.thread = threading.Thread(target=asyncio.run, args=(self._hold(),), daemon=True)

    async def _hold(self) -> None:
        try:
            async with session(self.herald, self.key, name="claude-code"):
                self.opened = True
                self.ready.set()
                # Until the ``with`` ends (its exit sets ``done``), however long the tests in it
                # take on a loaded machine: a session that ended first would show its agent away.
                await asyncio.to_thread(self.done.wait)
        finally:
            self.ready.set()  # one that failed to open wakes ``__enter__`` at once

    def __enter__(self) -> LiveSession:
        self.thread.start()
        self.ready.wait(120)
        assert self.opened, "the MCP session did not start"
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.done.set()
        self.thread.join(30)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail("the console's tests need Debian's chromium: apt-get install chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        yield browser
        browser.close()


@dataclass
class Watch:
    """What a page did that it must not: dialogs (a script of the data ran), errors, requests
    that carry the admin key in their URL."""

    dialogs: list[str]
    errors: list[str]
    urls: list[str]


@pytest.fixture
def watch() -> Watch:
    return Watch([], [], [])


@pytest.fixture
def context(browser: Browser, watch: Watch) -> Iterator[BrowserContext]:
    context = browser.new_context(viewport=LAPTOP)
    yield context
    context.close()
    assert watch.dialogs == [], "a script from the data ran"
    assert watch.errors == []
    assert not [url for url in watch.urls if ADMIN_KEY in url]


@pytest.fixture
def page(context: BrowserContext, watch: Watch) -> Page:
    return watched(context.new_page(), watch)


def watched(page: Page, watch: Watch) -> Page:
    page.on("dialog", lambda dialog: (watch.dialogs.append(dialog.message), dialog.dismiss()))
    page.on("pageerror", lambda error: watch.errors.append(str(error)))
    page.on("console", lambda message: console_error(watch, message.type, message.text))
    page.on("request", lambda request: watch.urls.append(request.url))
    return page


def console_error(watch: Watch, kind: str, text: str) -> None:
    # A refused request is logged too: the tests make some (a wrong key) on purpose.
    if kind == "error" and not text.startswith("Failed to load resource"):
        watch.errors.append(text)


def sign_in(page: Page, herald: HeraldProcess, key: str = ADMIN_KEY) -> None:
    page.goto(f"{herald.url}/console")
    page.get_by_label("Admin key").fill(key)
    page.get_by_role("button", name="Sign in").click()


def test_sign_in_takes_only_the_admin_key_and_keeps_it_in_the_tab(
    page: Page, context: BrowserContext, herald: HeraldProcess, scene: Scene
) -> None:
    sign_in(page, herald, "herald_adm_not-a-key-herald-knows")
    expect(page).to_have_url(re.compile(r"/console/$"))
    expect(page.get_by_role("alert")).to_contain_text("not known")
    sign_in(page, herald, scene.bob["api_key"])
    expect(page.get_by_role("alert")).to_contain_text("not the admin key")
    assert page.evaluate("sessionStorage.length") == 0

    sign_in(page, herald)
    expect(page.get_by_role("heading", name="Overview", level=1)).to_be_visible()
    stored = page.evaluate("Object.values(sessionStorage)")
    assert stored == [ADMIN_KEY]
    assert ADMIN_KEY not in page.evaluate("JSON.stringify(Object.values(localStorage))")
    assert context.cookies() == []
    assert ADMIN_KEY not in page.content()

    page.reload()  # the tab keeps it
    expect(page.get_by_role("heading", name="Overview", level=1)).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0


def test_the_overview_counts_pending_sessions_and_failing_endpoints(
    page: Page, herald: HeraldProcess, scene: Scene, watch: Watch
) -> None:
    sign_in(page, herald)
    expect(page.locator("#card-pending .value")).to_have_text("5")
    expect(page.locator("#card-oldest")).to_contain_text("ops-alice")
    expect(page.locator("#card-failing .value")).to_have_text("1")
    clients = page.get_by_role("region", name="Live sessions by client and era")
    expect(clients.get_by_role("row", name=re.compile("claude-code"))).to_contain_text("1")
    # Publishes show on the chart, from the counts read every two seconds.
    expect(page.locator(".live")).to_have_text("live")
    with herald.client(ADMIN_KEY) as admin:
        batch = [{"to": "ops-bob", "type": "chart.tick", "text": f"{n}"} for n in range(60)]
        assert admin.post("/v1/events", json=batch).status_code == 202
    expect(page.locator(".legend")).to_contain_text(re.compile(r"peak \d\d+/s"))
    # It reads counts, never the feed item by item: a busy hub costs an open overview nothing more.
    assert [url for url in watch.urls if "/v1/stats" in url]
    assert not [url for url in watch.urls if "/v1/stream" in url]


def test_an_operator_finds_an_agent_enables_its_endpoint_and_sees_a_redelivery_arrive(
    page: Page, herald: HeraldProcess, receiver: Receiver, scene: Scene
) -> None:
    sign_in(page, herald)
    page.get_by_role("link", name="Agents").click()
    agents = page.get_by_role("region", name="Agents")
    expect(agents.get_by_role("row")).to_have_count(51)  # a page of 50, and its header
    page.get_by_label("Find by handle").fill("alice")
    expect(agents.get_by_role("row")).to_have_count(2)
    agents.get_by_role("link", name="ops-alice").click()

    expect(page.get_by_role("heading", name="ops-alice", level=1)).to_be_visible()
    endpoints = page.get_by_role("region", name="Endpoints")
    expect(endpoints).to_contain_text("disabled")
    expect(endpoints).to_contain_text("HTTP 410")
    page.get_by_role("region", name="Open events").get_by_role("link").first.click()

    expect(page.get_by_role("heading", name="Event", level=1)).to_be_visible()
    assert scene.build_event in page.url
    expect(page.locator("#event-text")).to_have_text(BUILD_TEXT)
    timeline = page.locator("#attempts")
    expect(timeline.get_by_role("row")).to_have_count(2)
    first = timeline.get_by_role("row").nth(1)
    expect(first).to_contain_text("webhook")
    expect(first).to_contain_text("undeliverable")
    expect(first).to_contain_text(scene.endpoint)
    expect(first).to_contain_text("HTTP 410")

    # Its endpoint is disabled: enable it, from the page of endpoints.
    page.get_by_role("link", name="Endpoints").click()
    page.get_by_label("Only the disabled or failing").check()
    row = page.locator(f"tr[data-endpoint='{scene.endpoint}']")
    row.get_by_role("button", name=re.compile("^Enable")).click()
    expect(page.locator(f"tr[data-endpoint='{scene.endpoint}']")).to_have_count(0)
    page.get_by_label("Only the disabled or failing").uncheck()
    expect(page.locator(f"tr[data-endpoint='{scene.endpoint}']")).to_contain_text("active")

    # Redeliver: the receiver holds the new delivery until the page has shown the event
    # offered again, so that the attempt it then records can only reach the page live.
    page.go_back()
    expect(page.get_by_role("heading", name="Event", level=1)).to_be_visible()
    expect(page.locator(".live")).to_have_text("live")
    page.get_by_role("button", name="Redeliver").click()
    expect(page.get_by_role("status").filter(has_text="Offered again")).to_be_visible()
    receiver.arrived.get(timeout=30)
    expect(page.locator("#event-status")).to_have_text("pending")
    expect(timeline.get_by_role("row")).to_have_count(2)
    receiver.release.set()
    expect(timeline.get_by_role("row")).to_have_count(3)
    latest = timeline.get_by_role("row").nth(2)
    expect(latest).to_contain_text("webhook")
    expect(latest).to_contain_text("delivered")
    expect(page.locator("#event-status")).to_have_text("delivered")


def test_a_test_event_sent_from_the_page_shows_in_the_tail_which_pauses_and_filters(
    page: Page, herald: HeraldProcess, scene: Scene
) -> None:
    sign_in(page, herald)
    page.get_by_role("link", name="Live tail").click()
    tail = page.locator("#tail-rows")
    expect(page.locator(".live")).to_have_text("live")
    page.get_by_label("To (handle)").fill("ops-bob")
    page.locator("#send-type").fill("console.check")
    page.locator("#send-text").fill("sent from the console")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status").filter(has_text="Sent")).to_be_visible()
    published = tail.locator("tr[data-kind='published']", has_text="console.check")
    expect(published).to_contain_text("ops-bob")
    # Bob's Claude Code session is pushed the event: the attempt follows.
    expect(tail.locator("tr[data-kind='attempt']", has_text="console.check")).to_contain_text(
        "channel"
    )

    # Filtered by type, the tail shows only what matches.
    page.locator("#tail-type").fill("console.*")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator(".live")).to_have_text("live")
    publish(herald, "ops-bob", "other.kind")
    publish(herald, "ops-bob", "console.filtered")
    expect(tail.locator("tr[data-kind='published']")).to_contain_text("console.filtered")
    expect(tail).not_to_contain_text("other.kind")

    # Paused, it follows nothing; resumed, it goes on from where it stopped: nothing is lost.
    page.get_by_role("button", name="Pause").click()
    expect(page.locator(".live")).to_have_text("paused")
    publish(herald, "ops-bob", "console.while-paused")
    expect(tail).not_to_contain_text("console.while-paused")
    page.get_by_role("button", name="Resume").click()
    expect(
        tail.locator("tr[data-kind='published']", has_text="console.while-paused")
    ).to_have_count(1)

    # More than a person reads (the tail asks for 100 items a second at most): the newest, after
    # a row saying the rest was left out.
    page.get_by_role("button", name="Pause").click()
    with herald.client(ADMIN_KEY) as admin:
        flood = [{"to": "ops-bob", "type": f"console.flood-{n}", "text": "x"} for n in range(300)]
        assert admin.post("/v1/events", json=flood).status_code == 202
    page.get_by_role("button", name="Resume").click()
    expect(tail.locator("tr[data-kind='skipped']")).to_contain_text("some items were left out")
    # (Bob's live session is pushed each of them: the newest may be those attempts.)
    expect(tail.locator("tr", has_text="console.flood-299").first).to_be_visible()
    expect(tail.locator("tr[data-kind='published']", has_text="console.flood-0")).to_have_count(0)


def test_a_test_event_sent_to_handles_separated_by_commas_reaches_each_agent(
    page: Page, herald: HeraldProcess, scene: Scene
) -> None:
    sign_in(page, herald)
    page.get_by_role("link", name="Live tail").click()
    page.get_by_label("To (handle)").fill("agent-053, agent-054")
    page.locator("#send-type").fill("listed.check")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status").filter(has_text="Sent 2 events")).to_be_visible()
    with herald.client(ADMIN_KEY) as admin:
        for handle in ("agent-053", "agent-054"):
            asked = {"agent": handle, "type": "listed.check"}
            assert len(admin.get("/v1/events", params=asked).json()["events"]) == 1


def test_a_scheduled_event_is_listed_shown_with_its_due_time_and_cancelled_from_its_page(
    page: Page, herald: HeraldProcess, scene: Scene
) -> None:
    with herald.client(ADMIN_KEY) as admin:
        body = {"to": "agent-052", "type": "later.check", "text": "later", "delay_s": 3600}
        sent = admin.post("/v1/events", json=body)
        assert sent.status_code == 202, sent.text
    event_id = sent.json()["id"]
    sign_in(page, herald)
    page.goto(f"{herald.url}/console/#/events?status=scheduled")
    page.get_by_role("link", name=event_id).click()
    expect(page.locator("#event-status")).to_have_text("scheduled")
    expect(page.locator("#event-due")).to_have_text(re.compile(r"in (59|60) min"))
    page.get_by_role("button", name="Cancel").click()
    expect(page.get_by_role("status").filter(has_text="Cancelled")).to_be_visible()
    expect(page.locator("#event-status")).to_have_text("cancelled")


def test_a_test_event_is_sent_with_the_priority_chosen_in_the_form(
    page: Page, herald: HeraldProcess, scene: Scene
) -> None:
    sign_in(page, herald)
    page.goto(f"{herald.url}/console/#/agents/agent-050")
    page.locator("#send-type").fill("prio.check")
    page.get_by_label("Priority").select_option("low")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status").filter(has_text="Sent")).to_be_visible()
    with herald.client(ADMIN_KEY) as admin:
        asked = {"agent": "agent-050", "type": "prio.check"}
        (event,) = admin.get("/v1/events", params=asked).json()["events"]
    assert event["priority"] == "low"


def test_loop_guard_trips_show_on_the_overview_their_page_and_the_agents_limits(
    page: Page, herald: HeraldProcess, scene: Scene
) -> None:
    with herald.client(ADMIN_KEY) as admin:
        made = admin.post("/v1/agents", json={"handle": "ops-chatty"})
        chatty = created(made)
        limits = {"loop_guard": {"per_minute": 1}}
        assert admin.patch("/v1/agents/ops-chatty", json=limits).status_code == 200
    with herald.client(chatty["api_key"]) as agent:
        assert agent.post("/channel/send", json={"to": "ops-bob", "text": "1"}).status_code == 202
        refused = agent.post("/channel/send", json={"to": "ops-bob", "text": "2"})
    assert refused.status_code == 429
    thread = refused.json()["error"]["thread"]
    sign_in(page, herald)
    expect(page.locator("#card-loop-guards .value")).to_have_text("1")
    page.locator("#card-loop-guards").get_by_role("link").click()
    expect(page.get_by_role("heading", name="Loop guard trips", level=1)).to_be_visible()
    trips = page.get_by_role("region", name="Loop guard trips")
    expect(trips.get_by_role("row", name=re.compile(thread))).to_contain_text("ops-bob")
    expect(trips.get_by_role("row", name=re.compile(thread))).to_contain_text("per_minute: 1")
    trips.get_by_role("link", name="ops-chatty").click()
    expect(page.get_by_role("heading", name="ops-chatty", level=1)).to_be_visible()
    expect(page.locator(".facts")).to_contain_text("600 s, 1 messages a minute")


def test_a_test_event_sent_to_a_topic_reaches_each_subscriber(
    page: Page, herald: HeraldProcess, scene: Scene
) -> None:
    with herald.client(ADMIN_KEY) as admin:
        declared = {"description": "the console's test topic"}
        assert admin.put("/v1/topics/console/check", json=declared).status_code == 201
        for handle in ("agent-051", "agent-052"):
            subscribed = admin.put(f"/v1/topics/console/check/subscribers/{handle}")
            assert subscribed.status_code == 201, subscribed.text
    sign_in(page, herald)
    page.get_by_role("link", name="Live tail").click()
    page.get_by_label("Topic").fill("console/check")
    page.locator("#send-type").fill("topic.check")
    page.get_by_role("button", name="Send").click()
    sent = page.get_by_role("status").filter(has_text="Sent to 2 subscribers of console/check")
    expect(sent).to_be_visible()
    copies = []
    with herald.client(ADMIN_KEY) as admin:
        for handle in ("agent-051", "agent-052"):
            asked = {"agent": handle, "type": "topic.check"}
            (copy,) = admin.get("/v1/events", params=asked).json()["events"]
            copies.append(copy["id"])
    page.goto(f"{herald.url}/console/#/events?topic=console/*")  # the copies, by their topic
    listed = page.get_by_role("region", name="Events")
    for event_id in copies:
        expect(listed.get_by_role("link", name=event_id)).to_be_visible()
    listed.get_by_role("link", name=copies[0]).click()
    expect(page.locator("#event-topic")).to_have_text("console/check")


def publish(herald: HeraldProcess, to: str, type: str) -> str:
    with herald.client(ADMIN_KEY) as admin:
        return published(admin, to, type, f"an event of type {type}")


def test_an_event_s_html_and_odd_unicode_show_as_text(
    page: Page, herald: HeraldProcess, scene: Scene
) -> None:
    sign_in(page, herald)
    expect(page.get_by_role("heading", name="Overview", level=1)).to_be_visible()
    page.goto(f"{herald.url}/console/#/events/{scene.hostile_event}")
    expect(page.locator("#event-text")).to_have_text(HOSTILE_TEXT)
    expect(page.locator("#event-data")).to_contain_text("<script>alert(2)</script>")
    expect(page.locator("main img, main script, main b")).to_have_count(0)
    page.get_by_role("link", name="ops-carol").click()
    expect(page.get_by_role("region", name="Recent events")).to_contain_text("<img src=x")
    expect(page.locator("main img")).to_have_count(0)
    # A search no handle can match is answered, not broken.
    page.goto(f"{herald.url}/console/#/agents")
    page.get_by_label("Find by handle").fill("\u202e<b>")
    expect(page.get_by_role("region", name="Agents")).to_contain_text("part of a handle")


def test_the_console_fits_a_phone_in_the_dark_and_answers_the_keyboard(
    browser: Browser, herald: HeraldProcess, scene: Scene, watch: Watch
) -> None:
    context = browser.new_context(viewport=PHONE, color_scheme="dark", has_touch=True)
    try:
        page = watched(context.new_page(), watch)
        page.goto(f"{herald.url}/console")
        page.keyboard.type(ADMIN_KEY)  # the key's field has the focus
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", name="Overview", level=1)).to_be_visible()
        expect(page.locator(".card").first).to_be_visible()
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert brightness(background) < 60, background
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")

        # Every page is a Tab away: the links of the bar, then Enter. (Tab goes on from where the
        # focus is after signing in, through the overview's links as the page shows them.)
        for _ in range(40):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.textContent") == "Agents":
                break
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", name="Agents", level=1)).to_be_visible()
        page.get_by_label("Find by handle").focus()
        page.keyboard.type("ops-b")
        expect(page.get_by_role("region", name="Agents").get_by_role("row")).to_have_count(2)
        page.keyboard.press("Tab")  # the Search button
        page.keyboard.press("Tab")  # the first agent
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", name="ops-bob", level=1)).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    finally:
        context.close()
    assert watch.dialogs == [] and watch.errors == []


def brightness(css_color: str) -> float:
    red, green, blue = (int(n) for n in re.findall(r"\d+", css_color)[:3])
    return (red + green + blue) / 3


def test_screenshots_of_the_overview_an_agent_and_an_event(
    browser: Browser, herald: HeraldProcess, scene: Scene, tmp_path: Path
) -> None:
    out = Path(os.environ.get(SCREENSHOTS) or tmp_path)
    context = browser.new_context(viewport=LAPTOP, color_scheme="light")
    try:
        page = context.new_page()
        sign_in(page, herald)
        expect(page.locator(".live")).to_have_text("live")
        with herald.client(ADMIN_KEY) as admin:
            batch = [
                {
                    "to": "ops-bob",
                    "type": "alert.cpu",
                    "text": f"CPU on web-{n} above 90% for 5 min",
                }
                for n in range(8)
            ]
            assert admin.post("/v1/events", json=batch).status_code == 202
        expect(page.locator(".legend")).to_contain_text(re.compile(r"peak [1-9]"))
        page.screenshot(path=out / "console-overview.png")
        page.goto(f"{herald.url}/console/#/agents/ops-bob")
        expect(page.get_by_role("region", name="Live sessions")).to_contain_text("claude-code")
        page.screenshot(path=out / "console-agent.png")
        page.goto(f"{herald.url}/console/#/events/{scene.build_event}")
        expect(page.locator("#attempts").get_by_role("row").first).to_be_visible()
        page.screenshot(path=out / "console-event.png")
    finally:
        context.close()
    for name in ("console-overview.png", "console-agent.png", "console-event.png"):
        assert png_size(out / name) == (LAPTOP["width"], LAPTOP["height"])


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", header[16:24])
    return width, height
