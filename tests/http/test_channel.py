"""``GET /channel/history``, the ``history`` MCP tool and the ``herald://history`` resource, on a
real ``herald serve`` on each backend: an agent reads back its own acknowledged events, newest
first, page by page, narrowed by type; reading changes nothing; another agent's events never
show, whatever cursor is sent; bad input is refused by name."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import httpx
import pytest

from herald.mcp.resources import HISTORY_URI, INBOX_URI
from tests.herald_process import HeraldProcess
from tests.http.test_mcp import session

pytestmark = pytest.mark.anyio


def new_agent(herald: HeraldProcess) -> dict[str, Any]:
    with herald.client(herald.admin_key) as admin:
        response = admin.post("/v1/agents", json={"handle": f"hist-{uuid.uuid4().hex[:8]}"})
        assert response.status_code == 201
        return dict(response.json())


def publish(herald: HeraldProcess, to: str, type_: str, text: str) -> str:
    with herald.client(herald.admin_key) as admin:
        response = admin.post("/v1/events", json={"to": to, "type": type_, "text": text})
        assert response.status_code == 202
        return str(response.json()["id"])


def acknowledged(herald: HeraldProcess, agent: dict[str, Any], *types: str) -> list[str]:
    """One event of each type for ``agent``, published in order and acknowledged by id."""
    ids = [publish(herald, agent["handle"], t, f"{t} #{n}") for n, t in enumerate(types)]
    with herald.client(agent["api_key"]) as client:
        assert client.post("/channel/ack", json={"ids": ids}).json() == {"acked": len(ids)}
    return ids


def history(herald: HeraldProcess, key: str, **params: str) -> httpx.Response:
    with herald.client(key) as client:
        return client.get("/channel/history", params=params)


def detail(herald: HeraldProcess, event_id: str) -> dict[str, Any]:
    """The event as the admin reads it: its status and every attempt, reply and delivery."""
    with herald.client(herald.admin_key) as admin:
        return dict(admin.get(f"/v1/events/{event_id}").json())


def forged_cursor(position: str) -> str:
    """A page cursor made by hand, as anyone can make one: it is plain base64."""
    return base64.urlsafe_b64encode(position.encode()).decode().rstrip("=")


def test_history_pages_the_agents_acknowledged_events_newest_first(
    each_backend: HeraldProcess,
) -> None:
    agent = new_agent(each_backend)
    older, middle, newest = acknowledged(each_backend, agent, "a", "b", "c")
    still_pending = publish(each_backend, agent["handle"], "d", "not handled yet")

    first = history(each_backend, agent["api_key"], limit="2")
    assert first.status_code == 200
    page = first.json()
    assert [e["id"] for e in page["events"]] == [newest, middle]
    assert {e["status"] for e in page["events"]} == {"delivered"}
    assert page["next"] is not None
    rest = history(each_backend, agent["api_key"], limit="2", before=page["next"]).json()
    assert [e["id"] for e in rest["events"]] == [older]
    assert rest["next"] is None
    everything = history(each_backend, agent["api_key"]).json()
    assert still_pending not in [e["id"] for e in everything["events"]]


def test_history_takes_a_type_or_a_glob_of_one(each_backend: HeraldProcess) -> None:
    agent = new_agent(each_backend)
    passed, failed, chat = acknowledged(each_backend, agent, "build.passed", "build.failed", "chat")

    builds = history(each_backend, agent["api_key"], type="build.*").json()
    assert [e["id"] for e in builds["events"]] == [failed, passed]
    exact = history(each_backend, agent["api_key"], type="chat").json()
    assert [e["id"] for e in exact["events"]] == [chat]


async def test_reading_history_by_every_way_changes_nothing(each_backend: HeraldProcess) -> None:
    agent = new_agent(each_backend)
    (handled,) = acknowledged(each_backend, agent, "a")
    waiting = publish(each_backend, agent["handle"], "b", "pending")
    before = {i: detail(each_backend, i) for i in (handled, waiting)}

    assert history(each_backend, agent["api_key"]).status_code == 200
    async with session(each_backend, agent["api_key"], "history-test") as (client, _):
        read = await client.call_tool("history", {})
        assert not read.is_error
        (contents,) = (await client.read_resource(HISTORY_URI)).contents

    assert {i: detail(each_backend, i) for i in (handled, waiting)} == before
    assert before[waiting]["status"] == "pending" and before[waiting]["attempts"] == []
    assert [e["id"] for e in read.structured_content["events"]] == [handled]  # type: ignore[index]
    assert [e["id"] for e in json.loads(contents.text)["events"]] == [handled]  # type: ignore[union-attr]


async def test_the_tool_and_the_resource_page_as_the_route_does(
    each_backend: HeraldProcess,
) -> None:
    agent = new_agent(each_backend)
    older, newer = acknowledged(each_backend, agent, "build.passed", "build.failed")
    async with session(each_backend, agent["api_key"], "history-test") as (client, _):
        listed = [str(r.uri) for r in (await client.list_resources()).resources]
        first = await client.call_tool("history", {"limit": 1, "type": "build.*"})
        page = first.structured_content
        assert page is not None and page["next"] is not None
        rest = await client.call_tool("history", {"limit": 1, "before": page["next"]})
    assert listed == [INBOX_URI, HISTORY_URI]
    assert [e["id"] for e in page["events"]] == [newer]
    assert newer in first.content[0].text  # type: ignore[union-attr]
    assert f"before={page['next']}" in first.content[0].text  # type: ignore[union-attr]
    assert [e["id"] for e in rest.structured_content["events"]] == [older]  # type: ignore[index]


async def test_another_agents_events_never_show_whatever_cursor_is_sent(
    each_backend: HeraldProcess,
) -> None:
    alice, bob = new_agent(each_backend), new_agent(each_backend)
    bobs = acknowledged(each_backend, bob, "x", "y")
    acknowledged(each_backend, alice, "x", "y", "z")
    with each_backend.client(each_backend.admin_key) as admin:
        at_alices = admin.get("/v1/events", params={"agent": alice["handle"], "limit": "1"})
    after_alices_newest = at_alices.json()["next"]  # a real cursor, at one of alice's events
    far_ahead = forged_cursor("99999999999999")  # a seq none of them has reached
    cursors: list[dict[str, Any]] = [{}, {"before": after_alices_newest}, {"before": far_ahead}]

    for asked in cursors:
        page = history(each_backend, bob["api_key"], **asked).json()
        assert [e["id"] for e in page["events"]] == bobs[::-1]
    async with session(each_backend, bob["api_key"], "history-test") as (client, _):
        for asked in cursors:
            read = await client.call_tool("history", asked)
            shown = [e["id"] for e in read.structured_content["events"]]  # type: ignore[index]
            assert shown == bobs[::-1]
        (contents,) = (await client.read_resource(HISTORY_URI)).contents
    resource = [e["id"] for e in json.loads(contents.text)["events"]]  # type: ignore[union-attr]
    assert resource == bobs[::-1]


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"before": "bm90IGEgY3Vyc29y"}, "query.before is not a cursor herald gave: send the next"),
        ({"before": "17"}, "query.before is not a cursor herald gave"),
        (
            {"before": forged_cursor(f"1700000000000.evt_{'0' * 26}")},
            "query.before is a cursor of the order an agent's events were once listed in (by"
            " time; they are listed by seq now): start again from the first page, with no cursor",
        ),
        ({"limit": "0"}, "query.limit must be a whole number from 1 to 500"),
        ({"limit": "501"}, "query.limit must be a whole number from 1 to 500"),
        ({"type": "a b"}, "query.type must be an event type, or a glob of one"),
        ({"after": "x"}, "after"),
    ],
)
def test_bad_input_is_refused_saying_what_to_fix(
    each_backend: HeraldProcess, params: dict[str, str], says: str
) -> None:
    agent = new_agent(each_backend)
    refused = history(each_backend, agent["api_key"], **params)
    assert refused.status_code == 422
    assert says in refused.json()["error"]["message"]


async def test_the_tool_refuses_bad_arguments_by_name(each_backend: HeraldProcess) -> None:
    agent = new_agent(each_backend)
    async with session(each_backend, agent["api_key"], "history-test") as (client, _):
        refused = await client.call_tool("history", {"before": "not-one"})
    assert refused.is_error
    assert "history.before is not a cursor herald gave" in refused.content[0].text  # type: ignore[union-attr]


def test_only_an_agents_key_reads_history(each_backend: HeraldProcess) -> None:
    assert history(each_backend, str(each_backend.admin_key)).status_code in (401, 403)
