"""The operator's commands end to end: ``herald ...`` as a subprocess against a real
``herald serve``, its ``--json`` lines parsed, its errors one line and a non-zero exit."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from herald.times import ms_from_iso
from tests.herald_process import HeraldProcess
from tests.waiting import wait_until
from tests.webhooks.receiver import Receiver


@pytest.fixture(scope="module")
def herald(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeraldProcess]:
    process = HeraldProcess(f"sqlite:///{tmp_path_factory.mktemp('operator') / 'hub.db'}")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def webhook_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeraldProcess]:
    process = HeraldProcess(
        f"sqlite:///{tmp_path_factory.mktemp('webhooks') / 'hub.db'}",
        extra_args=("--webhook-allow", "loopback"),
    )
    yield process
    process.stop()


@pytest.fixture
def webhook_herald(webhook_hub: HeraldProcess) -> Iterator[HeraldProcess]:
    """A hub that sends webhooks to the loopback, shared by the module's webhook tests: each
    leaves it with no agent (so none of its endpoints), for the next one's hub-wide counts."""
    yield webhook_hub
    with webhook_hub.client(webhook_hub.admin_key) as admin:
        for agent in admin.get("/v1/agents").json()["agents"]:
            assert admin.delete(f"/v1/agents/{agent['id']}").status_code < 300


def herald_command(
    herald: HeraldProcess, *args: str, key: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HERALD_URL": herald.url, "HERALD_ADMIN_KEY": key or herald.admin_key}
    return subprocess.run(
        [sys.executable, "-m", "herald.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def json_lines(herald: HeraldProcess, *args: str) -> list[dict[str, Any]]:
    done = herald_command(herald, *args, "--json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_agents_are_added_listed_shown_by_handle_and_removed(herald: HeraldProcess) -> None:
    (made,) = json_lines(herald, "agent", "add", "op-alice")
    assert made["handle"] == "op-alice" and made["api_key"].startswith("herald_agent_")
    listed = json_lines(herald, "agent", "list")
    assert "op-alice" in {agent["handle"] for agent in listed}
    assert [a["handle"] for a in json_lines(herald, "agent", "list", "--search", "p-ali")] == [
        "op-alice"
    ]
    (shown,) = json_lines(herald, "agent", "show", made["id"])
    assert shown["id"] == made["id"] and "api_key" not in shown
    table = herald_command(herald, "agent", "list")
    assert table.returncode == 0 and "op-alice" in table.stdout  # a table for people
    assert herald_command(herald, "agent", "rm", made["id"]).returncode == 0
    assert "op-alice" not in {agent["handle"] for agent in json_lines(herald, "agent", "list")}


def test_send_publishes_one_event_and_event_show_gives_its_attempts(herald: HeraldProcess) -> None:
    json_lines(herald, "agent", "add", "op-bob")
    (sent,) = json_lines(
        herald, "send", "op-bob", "build failed", "--type", "build.failed", "--data", '{"n": 1}'
    )
    assert sent["id"].startswith("evt_") and sent["duplicate"] is False
    (event,) = json_lines(herald, "event", "show", sent["id"])
    assert event["type"] == "build.failed" and event["data"] == {"n": 1}
    assert event["attempts"] == [] and event["status"] == "pending"


def test_send_to_a_comma_list_sends_one_event_to_each_agent_or_none(
    herald: HeraldProcess,
) -> None:
    for handle in ("op-list-a", "op-list-b"):
        json_lines(herald, "agent", "add", handle)
    sent = json_lines(herald, "send", "op-list-a,op-list-b", "deploy done", "--dedupe-key", "d1")
    assert [row["to"] for row in sent] == ["op-list-a", "op-list-b"]
    assert len({row["id"] for row in sent}) == 2 and not any(row["duplicate"] for row in sent)
    for row in sent:
        (event,) = json_lines(herald, "event", "show", row["id"])
        assert event["text"] == "deploy done" and event["seq"] == row["seq"]
    refused = herald_command(herald, "send", "op-list-b,op-nobody", "again")
    assert refused.returncode == 1 and "'op-nobody', which no agent has" in refused.stderr
    (shown,) = json_lines(herald, "agent", "show", "op-list-b")
    assert shown["last_seq"] == 1
    table = herald_command(herald, "send", "op-list-a,op-list-b", "done", "--dedupe-key", "d1")
    assert table.returncode == 0 and "one event for each agent" in table.stdout


def test_send_schedules_with_delay_or_at_and_event_cancel_cancels(herald: HeraldProcess) -> None:
    json_lines(herald, "agent", "add", "op-later")
    (later,) = json_lines(herald, "send", "op-later", "standup", "--delay", "1h")
    when = datetime.datetime.now(datetime.timezone(datetime.timedelta(hours=1)))
    when = when.replace(microsecond=0) + datetime.timedelta(days=2)
    (at,) = json_lines(herald, "send", "op-later", "review", "--at", when.isoformat())
    assert "deliver_at" in later and ms_from_iso(at["deliver_at"]) == when.timestamp() * 1000
    listed = json_lines(herald, "events", "--agent", "op-later", "--status", "scheduled")
    assert {e["id"] for e in listed} == {later["id"], at["id"]}
    (cancelled,) = json_lines(herald, "event", "cancel", later["id"])
    assert cancelled["status"] == "cancelled"
    listed = json_lines(herald, "events", "--agent", "op-later", "--status", "cancelled")
    assert [e["id"] for e in listed] == [later["id"]]
    json_lines(herald, "agent", "add", "op-later-too")
    listed = herald_command(herald, "send", "op-later,op-later-too", "retro", "--delay", "1h")
    # A list's scheduled receipts say when each is due, as one event's does.
    assert listed.returncode == 0 and "scheduled, one event for each agent" in listed.stdout
    assert "deliver_at" in listed.stdout
    both = herald_command(herald, "send", "op-later", "x", "--delay", "60", "--at", "2099-01-01")
    assert both.returncode != 0 and "not allowed with argument" in both.stderr


def test_send_priority_is_stored_with_the_event_to_agents_and_to_a_topic(
    herald: HeraldProcess,
) -> None:
    json_lines(herald, "agent", "add", "op-prio")
    (low,) = json_lines(herald, "send", "op-prio", "fyi", "--priority", "low")
    (plain,) = json_lines(herald, "send", "op-prio", "plain")
    json_lines(herald, "topics", "add", "op/prio", "priorities")
    json_lines(herald, "topics", "subscribe", "op/prio", "op-prio")
    (topical,) = json_lines(herald, "send", "--topic", "op/prio", "now", "--priority", "urgent")
    shown = [json_lines(herald, "event", "show", e["id"])[0] for e in (low, plain, topical)]
    assert [e["priority"] for e in shown] == ["low", "normal", "urgent"]
    wrong = herald_command(herald, "send", "op-prio", "x", "--priority", "critical")
    assert wrong.returncode != 0 and "invalid choice: 'critical'" in wrong.stderr


def test_topics_are_declared_subscribed_sent_to_shown_and_removed(herald: HeraldProcess) -> None:
    for handle in ("op-topic-a", "op-topic-b"):
        json_lines(herald, "agent", "add", handle)
    (declared,) = json_lines(herald, "topics", "add", "op/repo", "pushes to the repo")
    assert (declared["name"], declared["subscribers"]) == ("op/repo", 0)
    (subscribed,) = json_lines(herald, "topics", "subscribe", "op/*", "op-topic-a")
    assert subscribed["topic"] == "op/*" and subscribed["handle"] == "op-topic-a"
    json_lines(herald, "topics", "subscribe", "op/repo", "op-topic-b")
    listed = {t["name"]: t["subscribers"] for t in json_lines(herald, "topics", "list")}
    assert listed["op/repo"] == 2
    sent = json_lines(herald, "send", "--topic", "op/repo", "pushed", "--type", "repo.pushed")
    assert len(sent) == 2 and len({row["id"] for row in sent}) == 2
    copies = json_lines(herald, "events", "--topic", "op/r*")  # each copy names its topic
    assert {row["id"] for row in copies} == {row["id"] for row in sent}
    assert {row["topic"] for row in copies} == {"op/repo"}
    table = herald_command(herald, "events", "--topic", "op/repo")
    assert table.returncode == 0 and "op/repo" in table.stdout, table.stderr
    shown = json_lines(herald, "topics", "show", "op/repo")
    assert shown[0]["name"] == "op/repo"
    assert {row["handle"] for row in shown[1:]} == {"op-topic-a", "op-topic-b"}
    json_lines(herald, "topics", "unsubscribe", "op/*", "op-topic-a")
    json_lines(herald, "topics", "unsubscribe", "op/repo", "op-topic-b")
    nobody = herald_command(herald, "send", "--topic", "op/repo", "again", "--json")
    assert nobody.returncode == 0 and "no agent is subscribed to 'op/repo'" in nobody.stderr
    both = herald_command(herald, "send", "--topic", "op/repo", "op-topic-a", "text")
    assert both.returncode == 1 and "send --topic takes only TEXT" in both.stderr
    assert herald_command(herald, "topics", "rm", "op/repo").returncode == 0
    gone = herald_command(herald, "send", "--topic", "op/repo", "late")
    assert gone.returncode == 1 and "no topic is named 'op/repo'" in gone.stderr


def test_send_file_sends_every_line_once_even_when_sent_again(
    herald: HeraldProcess, tmp_path: Path
) -> None:
    json_lines(herald, "agent", "add", "op-carol")
    events = tmp_path / "events.jsonl"
    lines = [{"to": "op-carol", "type": "bulk", "text": f"event {n}"} for n in range(2500)]
    events.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    (first,) = json_lines(herald, "send", "--file", str(events))
    assert (first["events"], first["stored"], first["already_there"]) == (2500, 2500, 0)
    (again,) = json_lines(herald, "send", "--file", str(events))  # interrupted, say: resent
    assert (again["stored"], again["already_there"]) == (0, 2500)


def test_a_bad_line_is_named_and_nothing_is_sent(herald: HeraldProcess, tmp_path: Path) -> None:
    (dave,) = json_lines(herald, "agent", "add", "op-dave")
    events = tmp_path / "bad.jsonl"
    events.write_text('{"to": "op-dave", "type": "t", "text": "fine"}\n{not json\n')
    done = herald_command(herald, "send", "--file", str(events))
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and f"{events}:2: not JSON" in done.stderr
    (shown,) = json_lines(herald, "agent", "show", dave["id"])
    assert shown["last_seq"] == 0


def test_errors_are_one_line_with_a_non_zero_exit(herald: HeraldProcess) -> None:
    wrong_key = herald_command(herald, "agent", "list", key="herald_admin_" + "x" * 40)
    assert wrong_key.returncode == 1 and wrong_key.stderr.startswith("herald: GET /v1/agents: 401")
    assert wrong_key.stderr.count("\n") == 1
    unknown = herald_command(herald, "event", "show", "evt_nothing")
    assert unknown.returncode == 1 and "404" in unknown.stderr
    nowhere = subprocess.run(
        [sys.executable, "-m", "herald.cli", "agent", "list", "--url", "http://127.0.0.1:9"],
        env={**os.environ, "HERALD_ADMIN_KEY": herald.admin_key},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert nowhere.returncode == 1 and "cannot reach the hub" in nowhere.stderr


def test_endpoints_lists_each_agents_webhook(herald: HeraldProcess) -> None:
    (agent,) = json_lines(herald, "agent", "add", "op-erin")
    (webhook,) = json_lines(herald, "agent", "set-webhook", agent["id"], "https://example.com/hook")
    assert webhook["secret"].startswith("whsec_")
    listed = [e for e in json_lines(herald, "endpoints") if e["agent"] == "op-erin"]
    assert [e["url"] for e in listed] == ["https://example.com/hook"]
    assert [
        e for e in json_lines(herald, "endpoints", "--failing") if e["agent"] == "op-erin"
    ] == []
    assert agent["id"]


def test_status_tells_whether_the_hub_is_healthy(herald: HeraldProcess) -> None:
    (status,) = json_lines(herald, "status")
    assert status["store"] == "ready" and status["hub"] == herald.url
    assert set(status["events"]) >= {"pending", "delivered"} and status["live sessions"] >= 0
    table = herald_command(herald, "status")
    assert table.returncode == 0 and "herald status" in table.stdout


def test_events_lists_newest_first_and_an_agent_is_found_by_handle(herald: HeraldProcess) -> None:
    json_lines(herald, "agent", "add", "op-frank")
    for text in ("one", "two"):
        json_lines(herald, "send", "op-frank", text, "--type", "note")
    listed = json_lines(herald, "events", "--agent", "op-frank")
    assert [event["text"] for event in listed] == ["two", "one"]
    (shown,) = json_lines(herald, "agent", "show", "op-frank")
    assert shown["pending"] == 2
    (status,) = json_lines(herald, "status")
    assert status["events"]["pending"] >= 2 and status["oldest pending"]


def test_an_event_is_redelivered_once_delivered(herald: HeraldProcess) -> None:
    (agent,) = json_lines(herald, "agent", "add", "op-grace")
    (sent,) = json_lines(herald, "send", "op-grace", "read already")
    with herald.client(agent["api_key"]) as client:
        assert client.post("/channel/heartbeat", json={}).status_code == 200  # at most once
    (event,) = json_lines(herald, "event", "show", sent["id"])
    assert event["status"] == "delivered"
    json_lines(herald, "event", "redeliver", sent["id"])
    (event,) = json_lines(herald, "event", "show", sent["id"])
    assert event["status"] == "pending"
    again = herald_command(herald, "event", "redeliver", sent["id"])
    assert again.returncode == 1 and "409" in again.stderr


def test_a_publisher_key_is_added_used_to_send_listed_and_revoked(herald: HeraldProcess) -> None:
    json_lines(herald, "agent", "add", "op-hank")
    (made,) = json_lines(
        herald, "key", "add", "ci", "--handle", "op-hank", "--type", "build.*", "--sender", "op-*"
    )
    assert made["key"].startswith("herald_pub_") and made["handles"] == ["op-hank"]
    assert made["senders"] == ["op-*"]
    sent = herald_command(
        herald, "send", "op-hank", "red", "--type", "build.failed", "--json", key=made["key"]
    )
    assert sent.returncode == 0, sent.stderr
    outside = herald_command(herald, "send", "op-hank", "hi", "--type", "chat", key=made["key"])
    assert outside.returncode == 1 and "403" in outside.stderr
    listed = {key["id"]: key for key in json_lines(herald, "key", "list")}
    assert listed[made["id"]]["senders"] == ["op-*"]
    json_lines(herald, "key", "revoke", made["id"])
    revoked = herald_command(herald, "send", "op-hank", "red", "--type", "build.x", key=made["key"])
    assert revoked.returncode == 1 and "401" in revoked.stderr


def test_every_line_is_checked_before_any_is_sent_and_each_refused_line_is_named(
    herald: HeraldProcess, tmp_path: Path
) -> None:
    json_lines(herald, "agent", "add", "op-ivy")
    lines: list[dict[str, Any]] = [
        {"to": "op-ivy", "type": "bulk", "text": f"event {n}"} for n in range(2500)
    ]
    lines[1199]["to"] = "nobody-here"  # lines 1200 and 1800: the second batch, after a good one
    lines[1799]["text"] = ""
    lines[2299]["surprise"] = True  # line 2300: the third batch
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    done = herald_command(herald, "send", "--file", str(events))
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    said = done.stderr
    assert f"{events}:1200: event.to: no agent has the handle 'nobody-here'" in said
    assert f"{events}:1800: event.text" in said and f"{events}:2300: event" in said
    assert "surprise" in said and said.rstrip().endswith(
        "nothing was sent: fix them and send again"
    )
    (shown,) = json_lines(herald, "agent", "show", "op-ivy")
    assert shown["pending"] == 0  # not even the good batch before them
    lines[1199]["to"], lines[1799]["text"] = "op-ivy", "fixed"
    del lines[2299]["surprise"]
    events.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    (sent,) = json_lines(herald, "send", "--file", str(events))
    assert (sent["stored"], sent["already_there"]) == (2500, 0)
    more = tmp_path / "more.jsonl"
    more.write_text(events.read_text() + json.dumps({"to": "op-ivy", "type": "b", "text": "x"}))
    (added,) = json_lines(herald, "send", "--file", str(more))
    assert (added["stored"], added["already_there"]) == (1, 2500)


def test_a_file_of_lists_is_sent_in_batches_of_at_most_1000_events_stored(
    herald: HeraldProcess, tmp_path: Path
) -> None:
    """A line whose to is a list counts one event for each handle: 1,200 lines for three
    agents are 3,600 events, which no batch of 1,000 lines could carry (the hub refuses a
    publish of over 1,000 events). A line of more than 1,000 handles is refused by the hub,
    named by its number, and nothing is sent."""
    handles = ["op-list-x", "op-list-y", "op-list-z"]
    for handle in handles:
        json_lines(herald, "agent", "add", handle)
    lines: list[dict[str, Any]] = [
        {"to": handles, "type": "bulk", "text": f"event {n}"} for n in range(1200)
    ]
    lines[1099]["to"] = [f"op-many-{n}" for n in range(1001)]
    events = tmp_path / "lists.jsonl"
    events.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    done = herald_command(herald, "send", "--file", str(events))
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert f"{events}:1100: event.to" in done.stderr and "1000" in done.stderr
    assert done.stderr.rstrip().endswith("nothing was sent: fix them and send again")
    assert [json_lines(herald, "agent", "show", h)[0]["pending"] for h in handles] == [0, 0, 0]
    lines[1099]["to"] = handles
    events.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    (sent,) = json_lines(herald, "send", "--file", str(events))
    assert (sent["events"], sent["stored"], sent["already_there"]) == (1200, 3600, 0)
    shown = [json_lines(herald, "agent", "show", h)[0] for h in handles]
    assert [agent["pending"] for agent in shown] == [1200, 1200, 1200]
    (again,) = json_lines(herald, "send", "--file", str(events))
    assert (again["stored"], again["already_there"]) == (0, 3600)


def test_an_agents_key_is_rotated_with_a_grace_and_an_openclaw_gateway_set(
    herald: HeraldProcess,
) -> None:
    (agent,) = json_lines(herald, "agent", "add", "op-jack")
    (rotated,) = json_lines(herald, "agent", "rotate-key", "op-jack", "--grace", "60")
    assert rotated["api_key"] != agent["api_key"] and rotated["previous_valid_until"]
    for key in (agent["api_key"], rotated["api_key"]):  # the old one still, for its grace
        with herald.client(key) as client:
            assert client.post("/channel/heartbeat", json={}).status_code == 200
    (gateway,) = json_lines(
        herald, "agent", "set-openclaw", "op-jack", "https://gateway.example", "--token", "t" * 32
    )
    assert gateway["url"] == "https://gateway.example"
    kinds = {e["kind"] for e in json_lines(herald, "endpoints") if e["agent"] == "op-jack"}
    assert kinds == {"openclaw"}


def test_an_agents_loop_guard_limits_are_raised_each_left_out_kept_serve_wide(
    herald: HeraldProcess,
) -> None:
    json_lines(herald, "agent", "add", "op-loop")
    (limits,) = json_lines(
        herald, "agent", "set-loop-guard", "op-loop", "--exchanges", "40", "--per-minute", "90"
    )
    assert limits == {"exchanges": 40, "window_s": 600, "per_minute": 90}
    refused = herald_command(herald, "agent", "set-loop-guard", "op-loop", "--window", "0")
    assert refused.returncode != 0 and "window_s" in refused.stderr


def test_event_show_tells_when_a_failing_webhook_is_tried_next(
    webhook_herald: HeraldProcess,
) -> None:
    receiver = Receiver(otherwise=500)  # failing until the test is done: its retries fail too
    herald = webhook_herald
    try:
        json_lines(herald, "agent", "add", "op-kim")
        json_lines(herald, "agent", "set-webhook", "op-kim", receiver.url)
        (sent,) = json_lines(herald, "send", "op-kim", "to a failing receiver")
        receiver.arrived.get(timeout=30)  # the first try, answered 500
        for _ in range(200):  # the try is recorded in the background: a bounded wait for it
            (event,) = json_lines(herald, "event", "show", sent["id"])
            if event["deliveries"] and event["deliveries"][0]["tries"] == 1:
                break
        (delivery,) = event["deliveries"]
        assert delivery["state"] == "waiting" and delivery["next_attempt_at"]
        assert "500" in delivery["last_error"]
        table = herald_command(herald, "event", "show", sent["id"])
        assert "next retry" in table.stdout
    finally:
        receiver.close()


def test_a_disabled_endpoint_is_listed_as_failing_and_enabled_by_its_command(
    webhook_herald: HeraldProcess,
) -> None:
    receiver = Receiver(script=[(410, {}), (204, {})])  # 410 Gone disables the endpoint
    herald = webhook_herald
    try:
        json_lines(herald, "agent", "add", "op-lou")
        json_lines(herald, "agent", "set-webhook", "op-lou", receiver.url)
        (sent,) = json_lines(herald, "send", "op-lou", "to a gone receiver")
        receiver.arrived.get(timeout=30)
        for _ in range(200):  # the endpoint is disabled in the background: a bounded wait
            failing = json_lines(herald, "endpoints", "--failing")
            if failing:
                break
        (disabled,) = failing
        assert (disabled["agent"], disabled["state"]) == ("op-lou", "disabled")
        json_lines(herald, "event", "redeliver", sent["id"])
        (enabled,) = json_lines(herald, "endpoint", "enable", disabled["id"])
        assert enabled["state"] == "active"
        assert json_lines(herald, "endpoints", "--failing") == []
        again = receiver.arrived.get(timeout=30)  # the event reaches it once enabled
        assert again.headers["webhook-id"] == sent["id"]
        table = herald_command(herald, "endpoints")
        assert table.returncode == 0 and "op-lou" in table.stdout and "active" in table.stdout
    finally:
        receiver.close()


def test_version_prints_the_installed_packages_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "herald.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"herald {importlib.metadata.version('herald')}"


def test_drain_and_bridge_find_the_hub_in_herald_url_like_the_other_commands(
    herald: HeraldProcess,
) -> None:
    (agent,) = json_lines(herald, "agent", "add", "op-kim")
    json_lines(herald, "send", "op-kim", "found by HERALD_URL")
    env = {**os.environ, "HERALD_URL": herald.url, "HERALD_API_KEY": agent["api_key"]}
    drained = subprocess.run(
        [sys.executable, "-m", "herald.cli", "drain"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert drained.returncode == 0, drained.stderr
    assert [json.loads(line)["text"] for line in drained.stdout.splitlines()] == [
        "found by HERALD_URL"
    ]
    from herald.cli import build_parser

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HERALD_URL", herald.url)
        bridge = build_parser(loaded=["bridge"]).parse_args(["bridge"])
    assert bridge.url == herald.url


def test_event_show_says_why_no_way_has_tried_an_event(herald: HeraldProcess) -> None:
    (agent,) = json_lines(herald, "agent", "add", "op-nia")
    (sent,) = json_lines(herald, "send", "op-nia", "nowhere to go")
    (event,) = json_lines(herald, "event", "show", sent["id"])
    assert event["attempts"] == [] and event["deliveries"] == []
    assert event["waiting"].startswith(
        "no live session; no webhook, no OpenClaw target: waiting to be drained"
    )
    table = herald_command(herald, "event", "show", sent["id"])
    assert table.returncode == 0 and "not tried yet: no live session" in table.stdout
    with herald.client(agent["api_key"]) as client:
        own = client.get(f"/v1/events/{sent['id']}").json()
        assert own["waiting"] is None  # the agent's own key is not told of its endpoints
        assert client.post("/channel/heartbeat", json={}).status_code == 200  # taken at once
    (event,) = json_lines(herald, "event", "show", sent["id"])
    assert event["waiting"] is None and [a["outcome"] for a in event["attempts"]] == ["delivered"]


def test_a_failing_endpoint_is_shown_failing_since_its_first_failure_and_counted_so(
    webhook_herald: HeraldProcess,
) -> None:
    receiver = Receiver(otherwise=500)  # failing until the test is done: its retries fail too
    herald = webhook_herald
    try:
        json_lines(herald, "agent", "add", "op-ola")
        json_lines(herald, "agent", "set-webhook", "op-ola", receiver.url)
        json_lines(herald, "send", "op-ola", "to a failing receiver")
        receiver.arrived.get(timeout=30)  # the first try, answered 500
        endpoint = wait_until(  # the failure is recorded in the background
            lambda: next((e for e in json_lines(herald, "endpoints") if e["failing_since"]), None),
            "the endpoint's first failure recorded",
            within_s=90,  # each look is a CLI run: a loaded machine takes seconds for one
        )
        assert endpoint["state"] == "failing" and "500" in endpoint["last_error"]
        assert [e["id"] for e in json_lines(herald, "endpoints", "--failing")] == [endpoint["id"]]
        (status,) = json_lines(herald, "status")
        assert status["endpoints"] == {"failing": 1}
        table = herald_command(herald, "endpoints")
        assert "failing" in table.stdout and "active" not in table.stdout
    finally:
        receiver.close()


def test_events_narrowed_past_the_hubs_look_says_older_ones_may_match(tmp_path: Path) -> None:
    herald = HeraldProcess(f"sqlite:///{tmp_path / 'hub.db'}", extra_args=("--scan-events", "3"))
    try:
        json_lines(herald, "agent", "add", "op-ivan")
        json_lines(herald, "send", "op-ivan", "old", "--type", "build.failed")
        for text in ("a", "b", "c"):
            json_lines(herald, "send", "op-ivan", text, "--type", "note")
        done = herald_command(herald, "events", "--type", "build.*", "--json")
    finally:
        herald.stop()
    assert done.returncode == 0 and done.stdout == ""
    assert "older ones may match" in done.stderr
