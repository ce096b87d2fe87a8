"""Finding events and agents through the admin API of a real ``herald serve``: pages of events,
agents by handle with their backlog, the stats, and an event offered again."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from tests.herald_process import HeraldProcess
from tests.http.test_endpoints import new_agent, wait_for_state
from tests.waiting import wait_until
from tests.webhooks.receiver import Receiver


def publish(admin: httpx.Client, handle: str, count: int, type: str = "t") -> list[str]:
    batch = [{"to": handle, "type": type, "text": f"e{n}"} for n in range(count)]
    response = admin.post("/v1/events", json=batch)
    assert response.status_code == 202, response.text
    return [event["id"] for event in response.json()["events"]]


def test_a_walk_of_pages_sees_each_event_once_while_more_are_published(
    admin: httpx.Client,
) -> None:
    alice, bob = new_agent(admin), new_agent(admin)
    existing = publish(admin, alice["handle"], 12) + publish(admin, bob["handle"], 11)
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 4}
    while True:
        page = admin.get("/v1/events", params=params).json()
        seen += [event["id"] for event in page["events"]]
        if page["next"] is None:
            break
        params["cursor"] = page["next"]
        publish(admin, alice["handle"], 2)
        publish(admin, bob["handle"], 1)
    assert len(seen) == len(set(seen))
    assert set(existing) <= set(seen)


def test_an_agents_events_are_paged_by_seq_each_once_while_more_are_published(
    admin: httpx.Client,
) -> None:
    alice, bob = new_agent(admin), new_agent(admin)
    existing = publish(admin, alice["handle"], 7) + publish(admin, alice["handle"], 6)
    publish(admin, bob["handle"], 5)
    seqs: list[int] = []
    params: dict[str, Any] = {"agent": alice["handle"], "limit": 4}
    while True:
        page = admin.get("/v1/events", params=params).json()
        seqs += [event["seq"] for event in page["events"]]
        assert {event["agent"] for event in page["events"]} <= {alice["id"]}
        if page["next"] is None:
            break
        params["cursor"] = page["next"]
        publish(admin, alice["handle"], 2)
        publish(admin, bob["handle"], 1)
    assert seqs == list(range(len(existing), 0, -1))


def test_a_cursor_of_the_other_listing_is_refused_saying_to_start_again(
    admin: httpx.Client,
) -> None:
    alice = new_agent(admin)
    publish(admin, alice["handle"], 3)
    by_time = admin.get("/v1/events", params={"limit": 1}).json()["next"]
    by_seq = admin.get("/v1/events", params={"agent": alice["id"], "limit": 1}).json()["next"]

    old = admin.get("/v1/events", params={"agent": alice["handle"], "cursor": by_time})
    assert old.status_code == 422
    assert old.json()["error"]["message"] == (
        "query.cursor is a cursor of the order an agent's events were once listed in (by time;"
        " they are listed by seq now): start again from the first page, with no cursor"
    )
    crossed = admin.get("/v1/events", params={"cursor": by_seq})
    assert crossed.status_code == 422
    assert "query.cursor is a cursor of one agent's events" in crossed.json()["error"]["message"]


def test_events_are_filtered_by_agent_handle_status_type_and_time(admin: httpx.Client) -> None:
    alice, bob = new_agent(admin), new_agent(admin)
    dm = publish(admin, alice["handle"], 2, type="dm.received")
    build = publish(admin, alice["handle"], 1, type="build.failed")
    publish(admin, bob["handle"], 1, type="dm.received")

    def ids(**params: str) -> list[str]:
        response = admin.get("/v1/events", params=params)
        assert response.status_code == 200, response.text
        return [event["id"] for event in response.json()["events"]]

    assert ids(agent=alice["handle"]) == [*build, *reversed(dm)]
    assert ids(agent=alice["id"], type="dm.*") == list(reversed(dm))
    assert ids(agent=alice["handle"], type="build.failed", status="pending") == build
    assert ids(agent=alice["handle"], status="delivered") == []
    (one,) = admin.get("/v1/events", params={"agent": alice["handle"], "limit": "1"}).json()[
        "events"
    ]
    assert one["id"] == build[0] and one["agent"] == alice["id"] and "attempts" not in one
    created = one["created_at"]
    assert ids(agent=alice["handle"], since=created) == build
    assert ids(agent=alice["handle"], until=created) == list(reversed(dm))


def test_a_narrowed_page_looks_at_the_bound_and_its_next_goes_on_where_it_ended(
    own_store_url: str,
) -> None:
    herald = HeraldProcess(own_store_url, extra_args=("--scan-events", "5"))
    try:
        with herald.client(herald.admin_key) as admin:
            alice = new_agent(admin)
            (build,) = publish(admin, alice["handle"], 1, type="build.failed")
            publish(admin, alice["handle"], 12, type="chat.message")
            pages = []
            params: dict[str, Any] = {"type": "build.*", "limit": 10}
            while True:
                page = admin.get("/v1/events", params=params).json()
                pages.append([event["id"] for event in page["events"]])
                if page["next"] is None:
                    break
                params["cursor"] = page["next"]
                assert len(pages) <= 3, "each page goes on where its look ended"
    finally:
        herald.stop()
    assert len(pages) == 3  # 13 events, 5 at a time
    assert [event_id for page in pages for event_id in page] == [build]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"limit": "0"}, "query.limit must be a whole number from 1 to 500"),
        ({"limit": "501"}, "query.limit must be a whole number from 1 to 500"),
        ({"status": "lost"}, "query.status must be one of pending, sent, delivered, expired"),
        ({"type": "a b"}, "query.type must be an event type, or a glob of one: 1-128 letters"),
        ({"since": "yesterday"}, "query.since must be an ISO 8601 time"),
        ({"cursor": "bm90IGEgY3Vyc29y"}, "query.cursor is not a cursor herald gave"),
        ({"agent": "Nobody!"}, "query.agent must be an agent's id (agt_...) or handle"),
        ({"agent": "nobody-at-all"}, "query.agent names no agent"),
        ({"colour": "red"}, "query has unknown parameter(s) colour; allowed: agent, cursor"),
    ],
)
def test_a_bad_filter_is_refused_naming_the_parameter(
    admin: httpx.Client, params: dict[str, str], message: str
) -> None:
    response = admin.get("/v1/events", params=params)
    assert response.status_code == 422
    assert message in response.json()["error"]["message"]


def test_an_agent_is_named_by_its_handle_on_every_route(admin: httpx.Client) -> None:
    agent = new_agent(admin)
    handle = agent["handle"]
    publish(admin, handle, 2)
    shown = admin.get(f"/v1/agents/{handle}").json()
    assert shown["id"] == agent["id"] and shown["pending"] == 2
    assert shown["live_sessions"] == 0 and shown["last_activity_at"] is not None
    found = admin.get("/v1/agents", params={"search": handle}).json()["agents"]  # a shared hub
    (listed,) = [a for a in found if a["handle"] == handle]
    assert listed["pending"] == 2 and listed["last_activity_at"] == shown["last_activity_at"]
    patched = admin.patch(f"/v1/agents/{handle}", json={"delivery": {"channel": False}})
    assert patched.status_code == 200 and patched.json()["delivery"] == {"channel": False}
    assert admin.get(f"/v1/agents/{handle}/sessions").json() == {"sessions": []}
    assert admin.delete(f"/v1/agents/{handle}").status_code == 204
    missing = admin.get(f"/v1/agents/{handle}")
    assert missing.status_code == 404 and handle in missing.json()["error"]["message"]


def test_the_stats_count_a_known_store(tmp_path: Path) -> None:
    herald = HeraldProcess(f"sqlite:///{tmp_path / 'herald.db'}")
    try:
        with herald.client(herald.admin_key) as admin:
            alice, bob = new_agent(admin), new_agent(admin)
            publish(admin, alice["handle"], 3)
            publish(admin, bob["handle"], 2)
            with herald.client(bob["api_key"]) as bob_client:
                drained = bob_client.post("/channel/heartbeat", json={"limit": 1})
                assert drained.status_code == 200, drained.text
            admin.put(f"/v1/agents/{bob['id']}/webhook", json={"url": "https://93.184.215.14/h"})
            stats = admin.get("/v1/stats").json()
    finally:
        herald.stop()
    assert stats["events"] == {
        "pending": 4,
        "sent": 0,
        "delivered": 1,
        "expired": 0,
        "dead": 0,
        "scheduled": 0,
        "cancelled": 0,
    }
    assert stats["attempts_recorded"] == [
        {"mechanism": "heartbeat", "outcome": "delivered", "count": 1}
    ]
    assert stats["top_pending"] == [
        {"id": alice["id"], "handle": alice["handle"], "pending": 3},
        {"id": bob["id"], "handle": bob["handle"], "pending": 1},
    ]
    assert stats["sessions"] == [] and stats["clients"] == []
    assert stats["endpoints"] == [{"kind": "webhook", "state": "active", "count": 1}]
    # alice's first event, or bob's open one if it was published within the same millisecond
    assert stats["oldest_pending"]["handle"] in {alice["handle"], bob["handle"]}


def test_an_undeliverable_event_reaches_its_fixed_endpoint_after_redeliver_and_enable(
    store_url: str,
) -> None:
    # 503, then 410 Gone: the delivery is given up on, the endpoint disabled.
    receiver = Receiver(script=[(503, {}), (410, {})])
    args = ("--webhook-allow", "loopback", "--webhook-schedule", "0,0")
    herald = HeraldProcess(store_url, extra_args=args)
    try:
        with herald.client(herald.admin_key) as admin:
            agent = new_agent(admin)
            webhook = admin.put(f"/v1/agents/{agent['id']}/webhook", json={"url": receiver.url})
            (event_id,) = publish(admin, agent["handle"], 1)
            disabled = wait_for_state(admin, agent["id"], "disabled")
            failing = admin.get("/v1/endpoints", params={"failing": "true"}).json()
            assert [(e["id"], e["agent_handle"]) for e in failing["endpoints"]] == [
                (disabled["id"], agent["handle"])
            ]
            url = f"/v1/events/{event_id}"
            wait_until(
                lambda: (
                    [a["outcome"] for a in admin.get(url).json()["attempts"]]
                    == ["failed", "undeliverable"]
                ),
                "the delivery to be given up on",
            )
            for _ in range(2):
                receiver.arrived.get(timeout=30)
            assert disabled["next_attempt_at"] is None

            redelivered = admin.post(f"{url}/redeliver")
            assert redelivered.status_code == 200 and redelivered.json()["status"] == "pending"
            (waiting,) = admin.get(f"/v1/agents/{agent['id']}/endpoints").json()["endpoints"]
            assert waiting["state"] == "disabled" and waiting["next_attempt_at"] is not None

            enabled = admin.post(f"/v1/endpoints/{disabled['id']}/enable")
            assert enabled.status_code == 200 and enabled.json()["state"] == "active"
            assert admin.get("/v1/endpoints?failing=true").json()["endpoints"] == []
            third = receiver.arrived.get(timeout=30)
            assert third.headers["webhook-id"] == event_id
            Webhook(webhook.json()["secret"]).verify(third.body, third.headers)
            wait_until(lambda: admin.get(url).json()["status"] == "delivered", "delivered")
            outcomes = [a["outcome"] for a in admin.get(url).json()["attempts"]]
            assert outcomes == ["failed", "undeliverable", "delivered"]
    finally:
        herald.stop()
        receiver.close()


def test_redelivering_a_pending_event_is_a_conflict(admin: httpx.Client) -> None:
    agent = new_agent(admin)
    (event_id,) = publish(admin, agent["handle"], 1)
    response = admin.post(f"/v1/events/{event_id}/redeliver")
    assert response.status_code == 409
    assert "pending already" in response.json()["error"]["message"]
    missing = admin.post(f"/v1/events/evt_{uuid.uuid4().hex}/redeliver")
    assert missing.status_code == 404
    unknown = admin.post(f"/v1/endpoints/end_{uuid.uuid4().hex}/enable")
    assert unknown.status_code == 404


def test_every_agents_endpoints_are_listed_a_page_at_a_time(admin: httpx.Client) -> None:
    made = {}
    for _ in range(3):
        agent = new_agent(admin)
        url = f"https://{agent['handle']}.example/hook"
        put = admin.put(f"/v1/agents/{agent['id']}/webhook", json={"url": url})
        made[put.json()["id"]] = agent["handle"]
    seen: dict[str, str] = {}
    params: dict[str, Any] = {"limit": 2}
    while True:
        page = admin.get("/v1/endpoints", params=params).json()
        for endpoint in page["endpoints"]:
            assert endpoint["id"] not in seen and "secret" not in endpoint
            seen[endpoint["id"]] = endpoint["agent_handle"]
        if page["next"] is None:
            break
        params["cursor"] = page["next"]
    assert made.items() <= seen.items()
    for bad in ({"cursor": "evt_1"}, {"failing": "yes"}, {"limit": "0"}):
        refused = admin.get("/v1/endpoints", params=bad)
        assert refused.status_code == 422 and next(iter(bad)) in refused.text


def test_agents_are_searched_and_listed_a_page_at_a_time(admin: httpx.Client) -> None:
    prefix = f"pg-{uuid.uuid4().hex[:6]}"
    made = [admin.post("/v1/agents", json={"handle": f"{prefix}-{n}"}).json() for n in range(3)]
    first = admin.get("/v1/agents", params={"search": prefix, "limit": 2}).json()
    assert [a["handle"] for a in first["agents"]] == [f"{prefix}-0", f"{prefix}-1"]
    params = {"search": prefix, "limit": 2, "cursor": first["next"]}
    rest = admin.get("/v1/agents", params=params).json()
    assert [a["id"] for a in rest["agents"]] == [made[2]["id"]] and rest["next"] is None
    assert "api_key" not in str(first) and rest["agents"][0]["pending"] == 0
    for bad in ({"search": "%"}, {"cursor": "Bad Cursor"}, {"limit": "501"}):
        refused = admin.get("/v1/agents", params=bad)
        assert refused.status_code == 422 and next(iter(bad)) in refused.text
