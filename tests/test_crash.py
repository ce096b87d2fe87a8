"""A hub killed with SIGKILL mid-publish loses no event it acknowledged, and stores none twice."""

from __future__ import annotations

import threading
from collections import Counter

import httpx

from tests.herald_process import ADMIN_KEY, HeraldProcess

WRITERS = 4
KILL_AFTER = 400


def publish_until_refused(
    url: str, writer: int, acknowledged: list[str], enough: threading.Event, lock: threading.Lock
) -> None:
    with httpx.Client(
        base_url=url, headers={"authorization": f"Bearer {ADMIN_KEY}"}, timeout=10
    ) as client:
        for n in range(100_000):
            text = f"w{writer}-{n}"
            try:
                response = client.post(
                    "/v1/events", json={"to": "alice", "type": "t", "text": text}
                )
            except httpx.HTTPError:
                return
            assert response.status_code == 202, response.text
            with lock:
                acknowledged.append(text)
                if len(acknowledged) >= KILL_AFTER:
                    enough.set()


def test_every_acknowledged_publish_survives_a_sigkill_exactly_once(store_url: str) -> None:
    herald = HeraldProcess(store_url)
    with herald.client(herald.admin_key) as admin:
        created = admin.post("/v1/agents", json={"handle": "alice"})
        assert created.status_code == 201
        agent_key = created.json()["api_key"]
    acknowledged: list[str] = []
    enough, lock = threading.Event(), threading.Lock()
    writers = [
        threading.Thread(
            target=publish_until_refused, args=(herald.url, w, acknowledged, enough, lock)
        )
        for w in range(WRITERS)
    ]
    for thread in writers:
        thread.start()
    assert enough.wait(timeout=120), "the publishers did not get going"
    herald.kill()
    for thread in writers:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in writers)

    restarted = HeraldProcess(store_url)
    try:
        stored = drain_everything(restarted, agent_key)
    finally:
        restarted.stop()
    counts = Counter(text for _, text in stored)
    assert max(counts.values()) == 1, "an event was stored twice"
    missing = [text for text in acknowledged if counts[text] != 1]
    assert not missing, f"{len(missing)} acknowledged publishes were lost, e.g. {missing[:5]}"
    assert [seq for seq, _ in stored] == list(range(1, len(stored) + 1))


def drain_everything(herald: HeraldProcess, agent_key: str) -> list[tuple[int, str]]:
    stored: list[tuple[int, str]] = []
    cursor = 0
    with herald.client(agent_key) as client:
        while True:
            response = client.post("/channel/heartbeat", json={"cursor": cursor, "limit": 100})
            events = response.json()["events"]
            if not events:
                return stored
            stored.extend((e["seq"], e["text"]) for e in events)
            cursor = response.json()["cursor"]
