"""What the operator reads of loop guards, against a real ``herald serve`` on each backend:
``GET /v1/loop-guards`` lists a message a loop guard refused (429 over ``POST /channel/send``),
newest first, as the feed shows it, and counts the last day's (a bad limit is refused saying what
to send); ``GET /v1/agents/{id}`` shows the limits that hold for an agent, its own or the
serve's, each one it left out still the serve's."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.backends import BACKENDS, serving
from tests.herald_process import HeraldProcess


@pytest.fixture(scope="module", params=BACKENDS)
def herald(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HeraldProcess]:
    directory = tmp_path_factory.mktemp(request.param)
    flags = ("--loop-exchanges", "7", "--loop-window", "120", "--loop-per-minute", "1")
    with serving(request.param, directory, *flags) as process:
        yield process


def new_agent(herald: HeraldProcess) -> dict[str, Any]:
    with herald.client(herald.admin_key) as admin:
        answer = admin.post("/v1/agents", json={"handle": f"lg-{uuid.uuid4().hex[:8]}"})
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def test_a_refused_message_is_listed_newest_first_and_counted(herald: HeraldProcess) -> None:
    alice, bob = new_agent(herald), new_agent(herald)
    with herald.client(herald.admin_key) as admin:
        before = admin.get("/v1/loop-guards").json()["last_day"]
    threads = []
    for sender, to in ((alice, bob), (bob, alice)):
        with herald.client(sender["api_key"]) as agent:
            sent = agent.post("/channel/send", json={"to": to["handle"], "text": "one"})
            assert sent.status_code == 202, sent.text
            refused = agent.post("/channel/send", json={"to": to["handle"], "text": "two"})
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "loop_guard"
        threads.append(refused.json()["error"]["thread"])
    with herald.client(herald.admin_key) as admin:
        listed = admin.get("/v1/loop-guards", params={"limit": "2"})
        assert listed.status_code == 200, listed.text
        bad = admin.get("/v1/loop-guards", params={"limit": "0"})
    assert listed.json()["last_day"] == before + 2
    newest, older = listed.json()["trips"]
    assert (newest["agent"]["id"], newest["to"], newest["thread"]) == (
        bob["id"],
        alice["handle"],
        threads[1],
    )
    assert (newest["kind"], newest["limit"], newest["maximum"]) == ("loop_guard", "per_minute", 1)
    assert (older["agent"]["handle"], older["thread"]) == (alice["handle"], threads[0])
    assert bad.status_code == 422 and "query.limit" in bad.json()["error"]["message"]


def test_an_agent_read_shows_its_loop_guard_limits_its_own_or_the_serves(
    herald: HeraldProcess,
) -> None:
    agent = new_agent(herald)
    with herald.client(herald.admin_key) as admin:
        shown = admin.get(f"/v1/agents/{agent['handle']}").json()
        assert shown["loop_guard"] == {"exchanges": 7, "window_s": 120, "per_minute": 1}
        assert shown["id"] == agent["id"] and "pending" in shown
        raised = admin.patch(f"/v1/agents/{agent['id']}", json={"loop_guard": {"exchanges": 40}})
        assert raised.status_code == 200, raised.text
        by_id = admin.get(f"/v1/agents/{agent['id']}").json()
    assert by_id["loop_guard"] == {"exchanges": 40, "window_s": 120, "per_minute": 1}
