"""``POST /v1/events`` with ``to`` a list of handles, end to end against a real ``herald serve``
on each backend: one event for each agent in one transaction, answered in order, delivered once
to each by every way (drain, stream, MCP session, webhook); refused whole for an unknown or
repeated handle, or a handle outside a key's scope."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.backends import BACKENDS, serving
from tests.herald_process import HeraldProcess
from tests.http.test_mcp import session
from tests.sse import SSEReader
from tests.waiting import wait_until
from tests.webhooks.receiver import Receiver

TEXT = {"type": "t", "text": "x"}


def new_agents(admin: httpx.Client, count: int) -> list[dict[str, Any]]:
    made = []
    for _ in range(count):
        response = admin.post("/v1/agents", json={"handle": f"l-{uuid.uuid4().hex[:8]}"})
        assert response.status_code == 201, response.text
        made.append(response.json())
    return made


def handles(agents: list[dict[str, Any]]) -> list[str]:
    return [agent["handle"] for agent in agents]


def last_seqs(admin: httpx.Client, agents: list[dict[str, Any]]) -> list[int]:
    return [int(admin.get(f"/v1/agents/{a['id']}").json()["last_seq"]) for a in agents]


def drained(herald: HeraldProcess, agent: dict[str, Any]) -> list[dict[str, Any]]:
    """Every event the agent drains, each acknowledged: what it is delivered, once."""
    seen: list[dict[str, Any]] = []
    with herald.client(agent["api_key"]) as client:
        cursor = 0
        while True:
            answer = client.post("/channel/heartbeat", json={"cursor": cursor, "limit": 100})
            assert answer.status_code == 200, answer.text
            if not answer.json()["events"]:
                return seen
            seen += answer.json()["events"]
            cursor = answer.json()["cursor"]


@pytest.fixture(scope="module", params=BACKENDS)
def each_backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HeraldProcess]:
    """``herald serve`` on SQLite, then on PostgreSQL, sending webhooks to this machine."""
    directory = tmp_path_factory.mktemp(request.param)
    with serving(request.param, directory, "--webhook-allow", "loopback") as process:
        yield process


@pytest.fixture
def admin(each_backend: HeraldProcess) -> Iterator[httpx.Client]:
    with each_backend.client(each_backend.admin_key) as client:
        yield client


def test_a_list_publish_stores_one_event_for_each_agent_answered_in_order_and_drained_once(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    agents = new_agents(admin, 3)
    sent = admin.post(
        "/v1/events",
        json={"to": handles(agents), "type": "build.failed", "text": "red", "data": {"n": 1}},
    )
    assert sent.status_code == 202, sent.text
    receipts = sent.json()["events"]
    assert len(receipts) == 3 and len({r["id"] for r in receipts}) == 3
    assert [r["seq"] for r in receipts] == [1, 1, 1]
    assert not any(r["duplicate"] for r in receipts)
    for agent, receipt in zip(agents, receipts, strict=True):
        (event,) = drained(each_backend, agent)
        assert (event["id"], event["text"], event["data"]) == (receipt["id"], "red", {"n": 1})
        shown = admin.get(f"/v1/events/{receipt['id']}").json()
        assert shown["agent"] == agent["id"] and shown["status"] == "delivered"


def test_a_list_publish_is_streamed_once_to_each_agent(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    agents = new_agents(admin, 2)
    readers = [SSEReader(each_backend.url, agent["api_key"]) for agent in agents]
    try:
        listed = admin.post("/v1/events", json={"to": handles(agents), "type": "t", "text": "both"})
        assert listed.status_code == 202, listed.text
        # Then one event for each alone: the next frame each stream gives is it, not the list's
        # event again.
        for agent in agents:
            alone = {"to": agent["handle"], "type": "t", "text": "alone"}
            assert admin.post("/v1/events", json=alone).status_code == 202
        for reader, receipt in zip(readers, listed.json()["events"], strict=True):
            first, second = reader.next(), reader.next()
            assert first is not None and second is not None
            assert (first.data["id"], first.data["text"]) == (receipt["id"], "both")
            assert second.data["text"] == "alone"
    finally:
        for reader in readers:
            reader.close()


@pytest.mark.anyio
async def test_a_list_publish_is_pushed_once_to_each_agent_s_mcp_session(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    alice, bob = new_agents(admin, 2)
    async with (
        session(each_backend, alice["api_key"]) as (alice_client, alice_received),
        session(each_backend, bob["api_key"]) as (bob_client, bob_received),
    ):
        listed = admin.post("/v1/events", json={"to": handles([alice, bob]), **TEXT})
        assert listed.status_code == 202, listed.text
        for agent in (alice, bob):  # the next push each session gets is this, not the list's
            assert (
                admin.post(
                    "/v1/events", json={"to": agent["handle"], "type": "t", "text": "alone"}
                ).status_code
                == 202
            )
        receipts = listed.json()["events"]
        for client, received, receipt in (
            (alice_client, alice_received, receipts[0]),
            (bob_client, bob_received, receipts[1]),
        ):
            (_, first), (_, second) = await received.next(), await received.next()
            assert first["meta"]["event_id"] == receipt["id"]
            assert "alone" in second["content"]
            acked = await client.call_tool("ack", {"ids": [receipt["id"]]})
            assert acked.structured_content == {"acked": 1}
    for receipt in receipts:
        assert admin.get(f"/v1/events/{receipt['id']}").json()["status"] == "delivered"


def test_a_list_publish_is_sent_once_to_each_agent_s_webhook(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    agents = new_agents(admin, 3)
    receiver = Receiver()
    try:
        for agent in agents:
            url = f"{receiver.url}/{agent['handle']}"
            made = admin.put(f"/v1/agents/{agent['id']}/webhook", json={"url": url})
            assert made.status_code in (200, 201), made.text
        listed = admin.post("/v1/events", json={"to": handles(agents), **TEXT})
        assert listed.status_code == 202, listed.text
        receipts = listed.json()["events"]
        for receipt in receipts:
            wait_until(
                lambda: admin.get(f"/v1/events/{receipt['id']}").json()["status"] == "delivered",  # noqa: B023
                "the webhook's delivery",
            )
        sent = {(r.path, r.headers["webhook-id"]) for r in receiver.requests}
        expected = {(f"/{a['handle']}", r["id"]) for a, r in zip(agents, receipts, strict=True)}
        assert sent == expected and len(receiver.requests) == 3
    finally:
        receiver.close()


def test_a_batch_may_hold_lists_and_is_answered_one_receipt_per_event_stored_in_order(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    alice, bob, carol = new_agents(admin, 3)
    batch = [
        {"to": alice["handle"], "type": "t", "text": "one"},
        {"to": [bob["handle"], carol["handle"]], "type": "t", "text": "two"},
        {"to": [carol["handle"], alice["handle"]], "type": "t", "text": "three"},
    ]
    sent = admin.post("/v1/events", json=batch)
    assert sent.status_code == 202, sent.text
    receipts = sent.json()["events"]
    expected = [(alice, "one"), (bob, "two"), (carol, "two"), (carol, "three"), (alice, "three")]
    assert len(receipts) == len(expected)
    for receipt, (agent, text) in zip(receipts, expected, strict=True):
        shown = admin.get(f"/v1/events/{receipt['id']}").json()
        assert (shown["agent"], shown["text"], shown["seq"]) == (agent["id"], text, receipt["seq"])
    assert [e["text"] for e in drained(each_backend, alice)] == ["one", "three"]
    assert [e["text"] for e in drained(each_backend, carol)] == ["two", "three"]


def test_an_unknown_or_repeated_handle_refuses_the_whole_publish(admin: httpx.Client) -> None:
    agents = new_agents(admin, 2)
    before = last_seqs(admin, agents)
    unknown = admin.post(
        "/v1/events", json={"to": [*handles(agents), "nobody-here"], "type": "t", "text": "x"}
    )
    assert unknown.status_code == 422, unknown.text
    assert "event.to names 'nobody-here', which no agent has" in unknown.json()["error"]["message"]
    in_batch = admin.post(
        "/v1/events",
        json=[
            {"to": agents[0]["handle"], "type": "t", "text": "fine"},
            {"to": [agents[1]["handle"], "nobody-here"], "type": "t", "text": "x"},
        ],
    )
    assert in_batch.status_code == 422, in_batch.text
    assert "events[1].to names 'nobody-here'" in in_batch.json()["error"]["message"]
    twice = admin.post(
        "/v1/events", json={"to": [*handles(agents), agents[0]["handle"]], "type": "t", "text": "x"}
    )
    assert twice.status_code == 422, twice.text
    assert f"event.to holds {agents[0]['handle']!r} more than once" in twice.text
    dry = admin.post(
        "/v1/events?dry_run=true", json={"to": [agents[0]["handle"], "nobody-here"], **TEXT}
    )
    assert dry.status_code == 422 and "names 'nobody-here'" in dry.text
    assert last_seqs(admin, agents) == before


def test_a_dry_run_of_a_list_counts_each_event_it_would_store(admin: httpx.Client) -> None:
    agents = new_agents(admin, 3)
    dry = admin.post("/v1/events?dry_run=true", json={"to": handles(agents), **TEXT})
    assert dry.status_code == 200 and dry.json() == {"checked": 3}
    assert last_seqs(admin, agents) == [0, 0, 0]


def test_a_publish_stores_at_most_a_thousand_events_in_all(admin: httpx.Client) -> None:
    (agent,) = new_agents(admin, 1)
    many = [f"h-{n}" for n in range(600)]
    batch = [{"to": many, **TEXT}, {"to": [f"g-{n}" for n in range(401)], **TEXT}]
    refused = admin.post("/v1/events", json=batch)
    assert refused.status_code == 413, refused.text
    assert "at most 1000 events" in refused.text and "would store 1001" in refused.text
    too_long = admin.post("/v1/events", json={"to": [agent["handle"]] * 1001, **TEXT})
    assert too_long.status_code == 422 and "event.to must be" in too_long.text
    assert last_seqs(admin, [agent]) == [0]


def test_a_dedupe_key_holds_for_each_agent_of_a_list(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    alice, bob, carol = new_agents(admin, 3)
    first = admin.post(
        "/v1/events", json={"to": handles([alice, bob]), **TEXT, "dedupe_key": "release-1"}
    )
    assert first.status_code == 202, first.text
    again = admin.post(
        "/v1/events", json={"to": handles([carol, bob, alice]), **TEXT, "dedupe_key": "release-1"}
    )
    assert again.status_code == 202, again.text  # carol's is new
    (a, b), (c, b2, a2) = first.json()["events"], again.json()["events"]
    assert [c["duplicate"], b2["duplicate"], a2["duplicate"]] == [False, True, True]
    assert (b2["id"], a2["id"]) == (b["id"], a["id"])
    repeated = admin.post(
        "/v1/events", json={"to": handles([alice, carol]), **TEXT, "dedupe_key": "release-1"}
    )
    assert repeated.status_code == 200
    assert [r["id"] for r in repeated.json()["events"]] == [a["id"], c["id"]]
    assert last_seqs(admin, [alice, bob, carol]) == [1, 1, 1]
    assert len(drained(each_backend, carol)) == 1


def test_a_key_limited_to_handles_must_cover_every_handle_of_a_list(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    alice, bob, carol = new_agents(admin, 3)
    made = admin.post(
        "/v1/keys", json={"name": "ci", "scopes": ["publish"], "handles": handles([alice, bob])}
    )
    assert made.status_code == 201, made.text
    with each_backend.client(made.json()["key"]) as publisher:
        within = publisher.post("/v1/events", json={"to": handles([bob, alice]), **TEXT})
        assert within.status_code == 202, within.text
        outside = publisher.post("/v1/events", json={"to": handles([alice, carol, bob]), **TEXT})
        assert outside.status_code == 403, outside.text
        assert f"event is for the agent {carol['handle']!r}" in outside.text
        in_batch = publisher.post(
            "/v1/events", json=[{"to": alice["handle"], **TEXT}, {"to": [carol["handle"]], **TEXT}]
        )
        assert in_batch.status_code == 403, in_batch.text
        assert f"events[1] is for the agent {carol['handle']!r}" in in_batch.text
    assert last_seqs(admin, [alice, bob, carol]) == [1, 1, 0]
