"""Topics end to end against a real ``herald serve`` on each backend: the operator declares
them and subscribes agents, agents subscribe themselves (``/channel/topics``), and a publish with
``topic`` gives every agent subscribed at that moment its own event, delivered once by drain and
by stream and by webhook; an agent not subscribed gets nothing. Rights: an agent handles only
its own subscriptions, a key limited to topics publishes nowhere else. One server per backend
for the module, each test with topics and agents of its own."""

from __future__ import annotations

import concurrent.futures
import queue
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.backends import BACKENDS, serving
from tests.herald_process import HeraldProcess
from tests.http.test_event_lists import drained, last_seqs, new_agents
from tests.sse import SSEReader
from tests.webhooks.receiver import Receiver

TEXT = {"type": "repo.pushed", "text": "a push"}


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


def declared(admin: httpx.Client, prefix: str = "repo") -> str:
    """A new topic's name, declared."""
    name = f"{prefix}/{uuid.uuid4().hex[:8]}"
    put = admin.put(f"/v1/topics/{name}", json={"description": f"what happens to {name}"})
    assert put.status_code == 201, put.text
    return name


def subscribe(herald: HeraldProcess, agent: dict[str, Any], topic: str) -> httpx.Response:
    with herald.client(agent["api_key"]) as client:
        return client.post("/channel/topics", json={"topic": topic})


def test_a_topic_publish_gives_each_subscriber_one_event_drained_once_and_others_none(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    topic = declared(admin)
    alice, bob, carol = new_agents(admin, 3)
    for agent in (alice, bob):
        subscribed = subscribe(each_backend, agent, topic)
        assert subscribed.status_code == 201, subscribed.text
        assert [s["topic"] for s in subscribed.json()["subscriptions"]] == [topic]
    sent = admin.post("/v1/events", json={"topic": topic, **TEXT, "data": {"sha": "abc"}})
    assert sent.status_code == 202, sent.text
    answer = sent.json()
    assert (answer["topic"], answer["reached"], answer["note"]) == (topic, 2, None)
    receipts = {r["id"] for r in answer["events"]}
    for agent in (alice, bob):
        (event,) = drained(each_backend, agent)
        assert event["id"] in receipts and event["data"] == {"sha": "abc"}
        assert event["topic"] == topic  # each copy says which topic it came from
        shown = admin.get(f"/v1/events/{event['id']}").json()
        assert shown["agent"] == agent["id"] and shown["status"] == "delivered"
        assert shown["topic"] == topic
    assert drained(each_backend, carol) == []
    assert last_seqs(admin, [alice, bob, carol]) == [1, 1, 0]


def test_a_topic_publish_is_streamed_once_to_each_subscriber(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    topic = declared(admin)
    agents = new_agents(admin, 2)
    for agent in agents:
        assert subscribe(each_backend, agent, topic).status_code == 201
    readers = [SSEReader(each_backend.url, agent["api_key"]) for agent in agents]
    try:
        sent = admin.post("/v1/events", json={"topic": topic, **TEXT, "text": "both"})
        assert sent.status_code == 202, sent.text
        for agent in agents:  # then one for each alone: the next frame is it, not a copy
            alone = {"to": agent["handle"], "type": "t", "text": "alone"}
            assert admin.post("/v1/events", json=alone).status_code == 202
        ids = {r["id"] for r in sent.json()["events"]}
        for reader in readers:
            first, second = reader.next(), reader.next()
            assert first is not None and second is not None
            assert first.data["id"] in ids and first.data["text"] == "both"
            assert first.data["topic"] == topic
            assert second.data["text"] == "alone" and second.data["topic"] is None
    finally:
        for reader in readers:
            reader.close()


def test_glob_subscriptions_reach_the_topics_they_match_and_no_other(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    prefix = f"org{uuid.uuid4().hex[:6]}"
    mine, other = declared(admin, f"{prefix}/repo"), declared(admin, f"{prefix}/team")
    (alice,) = new_agents(admin, 1)
    assert subscribe(each_backend, alice, f"{prefix}/repo/*").status_code == 201
    assert admin.get(f"/v1/topics/{mine}").json()["subscribers"] == 1
    assert admin.get(f"/v1/topics/{other}").json()["subscribers"] == 0
    listed = {t["name"]: t["subscribers"] for t in admin.get("/v1/topics").json()["topics"]}
    assert (listed[mine], listed[other]) == (1, 0)
    reached = admin.post("/v1/events", json={"topic": mine, **TEXT})
    missed = admin.post("/v1/events", json={"topic": other, **TEXT})
    assert (reached.json()["reached"], missed.json()["reached"]) == (1, 0)
    assert [e["id"] for e in drained(each_backend, alice)] == [reached.json()["events"][0]["id"]]


def listed(admin: httpx.Client, **params: str) -> list[dict[str, Any]]:
    """Every event ``GET /v1/events`` lists with those filters, page after page, newest first."""
    found: list[dict[str, Any]] = []
    while True:
        page = admin.get("/v1/events", params=params)
        assert page.status_code == 200, page.text
        found += page.json()["events"]
        if page.json()["next"] is None:
            return found
        params = {**params, "cursor": page.json()["next"]}


def read_back(herald: HeraldProcess, agent: dict[str, Any], **params: str) -> list[str]:
    """The ids of the agent's acknowledged events ``GET /channel/history`` gives, newest first."""
    with herald.client(agent["api_key"]) as client:
        page = client.get("/channel/history", params=params)
    assert page.status_code == 200, page.text
    return [event["id"] for event in page.json()["events"]]


def test_each_copy_names_its_topic_and_is_listed_and_read_back_by_it(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    prefix = f"org{uuid.uuid4().hex[:6]}"
    repo, team = declared(admin, f"{prefix}/repo"), declared(admin, f"{prefix}/team")
    alice, bob = new_agents(admin, 2)
    for agent, topic in ((alice, repo), (alice, team), (bob, repo)):
        assert subscribe(each_backend, agent, topic).status_code == 201
    pushed = admin.post("/v1/events", json={"topic": repo, **TEXT}).json()
    # With a dedupe key each copy is stored as one of a batch (every column its own value).
    keyed = admin.post("/v1/events", json={"topic": team, **TEXT, "dedupe_key": "k"}).json()
    direct = admin.post("/v1/events", json={"to": alice["handle"], **TEXT}).json()
    copies = {admin.get(f"/v1/events/{r['id']}").json()["agent"]: r["id"] for r in pushed["events"]}
    (in_team,) = [r["id"] for r in keyed["events"]]
    assert admin.get(f"/v1/events/{in_team}").json()["topic"] == team
    assert admin.get(f"/v1/events/{direct['id']}").json()["topic"] is None

    of_alice = listed(admin, agent=alice["handle"], topic=repo)
    assert [(e["id"], e["topic"]) for e in of_alice] == [(copies[alice["id"]], repo)]
    everyone = {e["id"] for e in listed(admin, topic=f"{prefix}/*")}
    assert everyone == {*copies.values(), in_team}  # not the direct event
    bad = admin.get("/v1/events", params={"topic": "no spaces"})
    assert bad.status_code == 422 and "topic" in bad.text

    drained_ids = [e["id"] for e in drained(each_backend, alice)]  # acknowledged: history
    assert drained_ids == [copies[alice["id"]], in_team, direct["id"]]
    assert read_back(each_backend, alice, topic=team) == [in_team]
    assert read_back(each_backend, alice, topic=f"{prefix}/*") == [in_team, copies[alice["id"]]]
    assert read_back(each_backend, alice) == drained_ids[::-1]
    assert read_back(each_backend, bob, topic=repo) == []  # bob's copy is not acknowledged


def test_a_topic_without_subscribers_is_a_202_that_says_so(admin: httpx.Client) -> None:
    topic = declared(admin)
    sent = admin.post("/v1/events", json={"topic": topic, **TEXT})
    assert sent.status_code == 202, sent.text
    assert sent.json()["reached"] == 0 and sent.json()["events"] == []
    assert f"no agent is subscribed to {topic!r}" in sent.json()["note"]


def test_an_unsubscribed_agent_gets_no_more_and_a_deleted_topic_is_refused(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    topic = declared(admin)
    alice, bob = new_agents(admin, 2)
    assert subscribe(each_backend, alice, topic).status_code == 201
    put = admin.put(f"/v1/topics/{topic}/subscribers/{bob['handle']}")
    assert put.status_code == 201, put.text
    with each_backend.client(alice["api_key"]) as client:
        assert client.delete(f"/channel/topics/{topic}").status_code == 204
        assert client.get("/channel/topics").json() == {"subscriptions": []}
        again = client.delete(f"/channel/topics/{topic}")
        assert again.status_code == 404 and "not subscribed" in again.text
    assert admin.post("/v1/events", json={"topic": topic, **TEXT}).json()["reached"] == 1
    assert admin.delete(f"/v1/topics/{topic}/subscribers/{bob['handle']}").status_code == 204
    assert admin.post("/v1/events", json={"topic": topic, **TEXT}).json()["reached"] == 0
    assert admin.delete(f"/v1/topics/{topic}").status_code == 204
    gone = admin.post("/v1/events", json={"topic": topic, **TEXT})
    assert gone.status_code == 404 and f"no topic is named {topic!r}" in gone.text
    assert last_seqs(admin, [alice, bob]) == [0, 1]


def test_a_subscription_made_during_publishes_gets_each_event_whole_or_not_at_all(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    """Agents subscribe while a topic is published to: each publish reaches exactly the agents
    subscribed as it was stored, and each agent gets every event after the first it got."""
    topic = declared(admin)
    agents = new_agents(admin, 12)

    def publish_all() -> list[set[str]]:
        with each_backend.client(each_backend.admin_key) as client:
            answers = [client.post("/v1/events", json={"topic": topic, **TEXT}) for _ in range(15)]
        assert all(a.status_code == 202 for a in answers)
        return [{r["id"] for r in a.json()["events"]} for a in answers]

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        published = pool.submit(publish_all)
        for agent in agents:
            assert subscribe(each_backend, agent, topic).status_code == 201
        reached = published.result()
    owner = {}
    for agent in agents:
        for event in drained(each_backend, agent):
            owner[event["id"]] = agent["id"]
    counts = [len(ids) for ids in reached]
    assert counts == sorted(counts)  # subscribers only join
    for ids in reached:  # each event of a publish is stored, and each for another agent
        assert len({owner[i] for i in ids}) == len(ids)
    assert sum(counts) == sum(last_seqs(admin, agents))
    for agent in agents:  # once it has one publish's event, it has every later one's
        got = [any(owner[i] == agent["id"] for i in ids) for ids in reached]
        assert got == sorted(got), f"{agent['handle']} missed a publish after its first"


def test_an_agent_handles_only_its_own_subscriptions(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    topic = declared(admin)
    alice, bob = new_agents(admin, 2)
    with each_backend.client(alice["api_key"]) as client:
        other = client.put(f"/v1/topics/{topic}/subscribers/{bob['handle']}")
        assert other.status_code == 403, other.text
        assert client.put(f"/v1/topics/{topic}", json={"description": "mine"}).status_code == 403
        assert client.get("/v1/topics").status_code == 403
        assert client.put(f"/channel/topics/{topic}").status_code == 201
    with each_backend.client(bob["api_key"]) as client:
        assert client.get("/channel/topics").json() == {"subscriptions": []}
        assert client.delete(f"/channel/topics/{topic}").status_code == 404
    subscribers = admin.get(f"/v1/topics/{topic}/subscribers").json()["subscriptions"]
    assert [s["handle"] for s in subscribers] == [alice["handle"]]


def test_a_key_limited_to_topics_publishes_to_those_alone(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    prefix = f"ci{uuid.uuid4().hex[:6]}"
    allowed, elsewhere = declared(admin, prefix), declared(admin)
    (alice,) = new_agents(admin, 1)
    for topic in (allowed, elsewhere):
        assert subscribe(each_backend, alice, topic).status_code == 201
    made = admin.post(
        "/v1/keys", json={"name": "ci", "scopes": ["publish"], "topics": [f"{prefix}/*"]}
    )
    assert made.status_code == 201, made.text
    assert made.json()["topics"] == [f"{prefix}/*"]
    handled = admin.post(
        "/v1/keys", json={"name": "direct", "scopes": ["publish"], "handles": [alice["handle"]]}
    )
    with each_backend.client(made.json()["key"]) as publisher:
        within = publisher.post("/v1/events", json={"topic": allowed, **TEXT})
        assert within.status_code == 202 and within.json()["reached"] == 1
        outside = publisher.post("/v1/events", json={"topic": elsewhere, **TEXT})
        assert outside.status_code == 403, outside.text
        assert f"event is for the topic {elsewhere!r}" in outside.text
        direct = publisher.post("/v1/events", json={"to": alice["handle"], **TEXT})
        assert direct.status_code == 403 and "publishes only to topics" in direct.text
    with each_backend.client(handled.json()["key"]) as publisher:
        to_topic = publisher.post("/v1/events", json={"topic": allowed, **TEXT})
        assert (
            to_topic.status_code == 403 and f"event is for the topic {allowed!r}" in to_topic.text
        )
    assert last_seqs(admin, [alice]) == [1]


def test_bad_names_and_bodies_get_clear_refusals_and_change_nothing(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    topic = declared(admin)
    (alice,) = new_agents(admin, 1)
    bad = admin.put("/v1/topics/repo herald", json={"description": "x"})
    assert bad.status_code == 422 and "topic 'repo herald' must be a topic's name" in bad.text
    routed = admin.put("/v1/topics/repo/subscribers/a/b", json={"description": "x"})
    assert routed.status_code == 422 and "must not have 'subscribers' after a '/'" in routed.text
    glob = admin.put("/v1/topics/repo/*", json={"description": "x"})
    assert glob.status_code == 422 and "must be a topic's name" in glob.text
    empty = admin.put(f"/v1/topics/{topic}", json={})
    assert empty.status_code == 422 and "topic.description" in empty.text
    # The words are a topic's, not an event type's.
    assert "saying what the topic's events are about" in empty.text
    assert "event of this type" not in empty.text
    both = admin.post("/v1/events", json={"topic": topic, "to": alice["handle"], **TEXT})
    assert both.status_code == 422 and "send to (agents' handles) or topic" in both.text
    named = admin.post("/v1/events", json={"topic": "repo herald", **TEXT})
    assert named.status_code == 422 and "event.topic must be a topic's name" in named.text
    undeclared = admin.post("/v1/events", json={"topic": "repo/never-declared", **TEXT})
    assert undeclared.status_code == 404
    assert "no topic is named 'repo/never-declared'" in undeclared.text
    unknown = subscribe(each_backend, alice, "repo/never-declared")
    assert unknown.status_code == 404 and "'repo/never-declared'" in unknown.text
    pattern = subscribe(each_backend, alice, "repo/[abc]")
    assert pattern.status_code == 422 and "subscription.topic must be" in pattern.text
    assert last_seqs(admin, [alice]) == [0]
    assert admin.get(f"/v1/topics/{topic}").json()["subscribers"] == 0


def test_a_dry_run_of_a_topic_publish_counts_its_subscribers_and_stores_nothing(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    prefix = f"dry{uuid.uuid4().hex[:6]}"  # its glob matches no other test's topic
    topic = declared(admin, prefix)
    agents = new_agents(admin, 2)
    for agent in agents:
        subscribe(each_backend, agent, topic)
    subscribe(each_backend, agents[0], f"{prefix}/*")  # still one agent
    dry = admin.post("/v1/events?dry_run=true", json={"topic": topic, **TEXT})
    assert dry.status_code == 200 and dry.json() == {"checked": 2}
    assert last_seqs(admin, agents) == [0, 0]
    reserved = admin.post(
        "/v1/events?dry_run=true", json={"topic": topic, **TEXT, "type": "herald.x"}
    )
    assert reserved.status_code == 422, reserved.text


def test_a_topic_publish_is_sent_once_to_each_subscribers_webhook(
    each_backend: HeraldProcess, admin: httpx.Client
) -> None:
    receiver = Receiver()
    try:
        topic = declared(admin)
        agents = new_agents(admin, 2)
        for agent in agents:
            path = f"/v1/agents/{agent['id']}/webhook"
            put = admin.put(path, json={"url": f"{receiver.url}/{agent['handle']}"})
            assert put.status_code == 200, put.text
            assert subscribe(each_backend, agent, topic).status_code == 201
        sent = admin.post("/v1/events", json={"topic": topic, **TEXT})
        assert sent.status_code == 202 and sent.json()["reached"] == 2
        arrived = [receiver.arrived.get(timeout=30) for _ in agents]
        with pytest.raises(queue.Empty):
            receiver.arrived.get(timeout=2)  # a second send would have arrived by now
        by_path = {request.path.strip("/"): request.json for request in arrived}
        assert set(by_path) == {agent["handle"] for agent in agents}
        ids = {receipt["id"] for receipt in sent.json()["events"]}
        assert {body["id"] for body in by_path.values()} == ids
        assert {body["topic"] for body in by_path.values()} == {topic}
    finally:
        receiver.close()
