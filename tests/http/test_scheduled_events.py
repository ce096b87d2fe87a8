"""Scheduled events as the operator and publishers see them, against a real ``herald serve`` on
each backend: a publisher key cancels (or recalls) an event it may publish and no other (403,
changing nothing); ``GET /v1/stats`` counts scheduled and cancelled events; an agent's listing
shows its events not yet numbered first, newest published first, and pages through them.
(When a scheduled event is offered, and cancels by the admin: ``test_event_schedules.py``.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.herald_process import HeraldProcess
from tests.http.test_event_lists import new_agents

HOUR_S = 3600


@pytest.fixture
def admin(each_backend: HeraldProcess) -> Iterator[httpx.Client]:
    with each_backend.client(each_backend.admin_key) as client:
        yield client


def scheduled(admin: httpx.Client, agent: dict[str, Any], type_: str = "t") -> str:
    sent = admin.post(
        "/v1/events", json={"to": agent["handle"], "type": type_, "text": "x", "delay_s": HOUR_S}
    )
    assert sent.status_code == 202, sent.text
    return str(sent.json()["id"])


def publisher_key(admin: httpx.Client, **limits: list[str]) -> str:
    made = admin.post(
        "/v1/keys", json={"name": f"k-{uuid.uuid4().hex[:6]}", "scopes": ["publish"], **limits}
    )
    assert made.status_code == 201, made.text
    return str(made.json()["key"])


def shown(admin: httpx.Client, event_id: str) -> dict[str, Any]:
    answer = admin.get(f"/v1/events/{event_id}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_a_publisher_key_cancels_the_events_it_may_publish_and_no_other(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    alice, bob, carol = new_agents(admin, 3)
    prefix = f"ci{uuid.uuid4().hex[:6]}"
    topic = f"{prefix}/main"
    assert admin.put(f"/v1/topics/{topic}", json={"description": "d"}).status_code == 201
    assert admin.put(f"/v1/topics/{topic}/subscribers/{carol['handle']}").status_code == 201
    by_handle = publisher_key(admin, handles=[alice["handle"]])
    by_topic = publisher_key(admin, topics=[f"{prefix}/*"])
    by_type = publisher_key(admin, types=["build.*"])
    for_alice, for_bob = scheduled(admin, alice), scheduled(admin, bob)
    build = scheduled(admin, bob, "build.failed")

    with each_backend.client(by_handle) as publisher:
        cancelled = publisher.delete(f"/v1/events/{for_alice}")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] == "cancelled"
        outside = publisher.delete(f"/v1/events/{for_bob}")
        assert outside.status_code == 403, outside.text
        assert f"event {for_bob!r} is for the agent {bob['handle']!r}" in outside.text
        assert "may not cancel it" in outside.text and "nothing was cancelled" in outside.text
        pending = alone(admin, alice)  # a pending one nothing handed out: recalled
        assert publisher.delete(f"/v1/events/{pending}").json()["status"] == "cancelled"
        missing = publisher.delete("/v1/events/evt_0000000000000000000000")
        assert missing.status_code == 404, missing.text

    with each_backend.client(by_topic) as publisher:
        sent = publisher.post(
            "/v1/events", json={"topic": topic, "type": "t", "text": "x", "delay_s": HOUR_S}
        )
        assert sent.status_code == 202 and sent.json()["reached"] == 1, sent.text
        (copy,) = [receipt["id"] for receipt in sent.json()["events"]]
        assert publisher.delete(f"/v1/events/{copy}").status_code == 200
        outside = publisher.delete(f"/v1/events/{for_bob}")
        assert outside.status_code == 403, outside.text
        assert "published to it directly, not to a topic" in outside.text

    with each_backend.client(by_type) as publisher:
        assert publisher.delete(f"/v1/events/{build}").status_code == 200
        outside = publisher.delete(f"/v1/events/{for_bob}")
        assert outside.status_code == 403 and "has the type 't'" in outside.text

    for event_id in (for_alice, pending, copy, build):
        assert shown(admin, event_id)["status"] == "cancelled"
    untouched = shown(admin, for_bob)  # refused three times: as it was
    assert (untouched["status"], untouched["attempts"]) == ("scheduled", [])
    with each_backend.client(bob["api_key"]) as agent:
        assert agent.delete(f"/v1/events/{for_bob}").status_code == 403


def test_a_topic_key_cancels_by_the_topic_an_event_was_published_to_not_by_subscriptions(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    alice, bob = new_agents(admin, 2)
    prefix = f"ct{uuid.uuid4().hex[:6]}"
    mine, other = f"{prefix}/main", f"{prefix}-other"
    for topic, agents in ((mine, (alice, bob)), (other, (bob,))):
        assert admin.put(f"/v1/topics/{topic}", json={"description": "d"}).status_code == 201
        for agent in agents:
            subscribed = admin.put(f"/v1/topics/{topic}/subscribers/{agent['handle']}")
            assert subscribed.status_code == 201, subscribed.text
    by_topic = publisher_key(admin, topics=[f"{prefix}/*"])
    body = {"type": "t", "text": "x"}  # pending, handed out to no one: recalled by a cancel
    with each_backend.client(by_topic) as publisher:
        sent = publisher.post("/v1/events", json={"topic": mine, **body})
        assert sent.status_code == 202 and sent.json()["reached"] == 2, sent.text
    copies = {
        admin.get(f"/v1/events/{r['id']}").json()["agent"]: r["id"] for r in sent.json()["events"]
    }
    left = admin.delete(f"/v1/topics/{mine}/subscribers/{alice['handle']}")
    assert left.status_code == 204, left.text
    direct = alone(admin, bob)  # bob is still subscribed to the key's topic
    elsewhere = admin.post("/v1/events", json={"topic": other, **body})
    assert elsewhere.status_code == 202, elsewhere.text
    (not_mine,) = [r["id"] for r in elsewhere.json()["events"]]

    with each_backend.client(by_topic) as publisher:
        # alice has left the topic since: her copy was still published to it
        cancelled = publisher.delete(f"/v1/events/{copies[alice['id']]}")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        refused = publisher.delete(f"/v1/events/{direct}")
        assert refused.status_code == 403, refused.text
        assert "published to it directly, not to a topic" in refused.text
        refused = publisher.delete(f"/v1/events/{not_mine}")
        assert refused.status_code == 403, refused.text
        assert f"was published to the topic {other!r}" in refused.text
    assert [shown(admin, e)["status"] for e in (direct, not_mine, copies[bob["id"]])] == [
        "pending"
    ] * 3


def alone(admin: httpx.Client, agent: dict[str, Any]) -> str:
    sent = admin.post("/v1/events", json={"to": agent["handle"], "type": "t", "text": "now"})
    assert sent.status_code == 202, sent.text
    return str(sent.json()["id"])


def test_the_stats_count_scheduled_and_cancelled_events(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    (agent,) = new_agents(admin, 1)
    before = admin.get("/v1/stats").json()["events"]
    kept, dropped = scheduled(admin, agent), scheduled(admin, agent)
    recalled = alone(admin, agent)
    for event_id in (dropped, recalled):
        assert admin.delete(f"/v1/events/{event_id}").status_code == 200
    after = admin.get("/v1/stats").json()["events"]
    assert after["scheduled"] - before["scheduled"] == 1
    assert after["cancelled"] - before["cancelled"] == 2
    assert after["pending"] == before["pending"]
    assert shown(admin, kept)["status"] == "scheduled"


def test_an_agents_listing_shows_its_scheduled_events_first_and_pages_through_them(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    (agent,) = new_agents(admin, 1)
    numbered = [alone(admin, agent) for _ in range(3)]
    first, cancelled, last = (scheduled(admin, agent) for _ in range(3))
    assert admin.delete(f"/v1/events/{cancelled}").status_code == 200
    expected = [last, cancelled, first, *numbered[::-1]]

    for limit in (2, 3, 10):
        seen: list[str] = []
        params = {"agent": agent["handle"], "limit": str(limit)}
        while True:
            page = admin.get("/v1/events", params=params)
            assert page.status_code == 200, page.text
            seen += [e["id"] for e in page.json()["events"]]
            if page.json()["next"] is None:
                break
            params["cursor"] = page.json()["next"]
        assert seen == expected, limit
    narrowed = admin.get("/v1/events", params={"agent": agent["id"], "status": "scheduled"})
    assert [e["id"] for e in narrowed.json()["events"]] == [last, first]


def test_a_topic_publish_for_later_stores_a_scheduled_copy_for_each_subscriber(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    alice, bob = new_agents(admin, 2)
    topic = f"later{uuid.uuid4().hex[:6]}/main"
    assert admin.put(f"/v1/topics/{topic}", json={"description": "d"}).status_code == 201
    for agent in (alice, bob):
        subscribed = admin.put(f"/v1/topics/{topic}/subscribers/{agent['handle']}")
        assert subscribed.status_code == 201, subscribed.text
    sent = admin.post(
        "/v1/events", json={"topic": topic, "type": "t", "text": "x", "delay_s": HOUR_S}
    )
    assert sent.status_code == 202 and sent.json()["reached"] == 2, sent.text
    receipts = sent.json()["events"]
    assert all(r["seq"] < 0 and r["deliver_at"] for r in receipts), receipts
    copies = [shown(admin, r["id"]) for r in receipts]
    assert {(c["agent"], c["status"], c["topic"]) for c in copies} == {
        (alice["id"], "scheduled", topic),
        (bob["id"], "scheduled", topic),
    }
    for agent in (alice, bob):  # not offered before it is due
        with each_backend.client(agent["api_key"]) as client:
            drained = client.post("/channel/heartbeat", json={"cursor": 0})
            assert drained.status_code == 200 and drained.json()["events"] == [], drained.text
