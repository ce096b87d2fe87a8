"""Keys across real processes on one PostgreSQL database: an agent key rotated in one
``herald serve`` works on both during its grace, then on neither; an admin key replaced by
``herald admin-key rotate`` stops in a running serve within a second."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from herald.times import ms_from_iso
from tests.herald_process import ADMIN_KEY, HeraldProcess
from tests.waiting import WAIT_S, wait_until

GRACE_S = 3
"""Bounded waits: far longer than any of them takes on a loaded machine."""
CACHE_S = 1.0
"""How long a process may go on taking a key that another process replaced."""


@pytest.fixture
def two_heralds(postgres_database_url: str) -> Iterator[tuple[HeraldProcess, HeraldProcess]]:
    one = HeraldProcess(postgres_database_url)
    try:
        two = HeraldProcess(postgres_database_url)
        try:
            yield one, two
        finally:
            two.stop()
    finally:
        one.stop()


def key_status(herald: HeraldProcess, key: str) -> int:
    with herald.client(key) as agent:
        return agent.post("/channel/heartbeat", json={}).status_code


def admin_status(herald: HeraldProcess, key: str) -> int:
    with herald.client(key) as admin:
        return admin.get("/v1/agents").status_code


def rotate_admin_key(store_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != "HERALD_ADMIN_KEY"}
    return subprocess.run(
        [sys.executable, "-m", "herald.cli", "admin-key", "rotate", "--store", store_url],
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=WAIT_S,
    )


def test_a_rotated_agent_key_works_on_both_during_its_grace_then_on_neither(
    two_heralds: tuple[HeraldProcess, HeraldProcess],
) -> None:
    with two_heralds[0].client(ADMIN_KEY) as admin:
        agent = admin.post("/v1/agents", json={"handle": f"k-{uuid.uuid4().hex[:8]}"}).json()
        assert all(key_status(h, agent["api_key"]) == 200 for h in two_heralds)
        rotated = admin.post(f"/v1/agents/{agent['id']}/rotate-key", json={"grace_s": GRACE_S})
    assert rotated.status_code == 200, rotated.text
    new_key, until_ms = (
        rotated.json()["api_key"],
        ms_from_iso(rotated.json()["previous_valid_until"]),
    )
    assert abs(until_ms / 1000 - (time.time() + GRACE_S)) < 1.0
    for herald in two_heralds:
        assert key_status(herald, new_key) == 200
        assert key_status(herald, agent["api_key"]) == 200 or time.time() * 1000 >= until_ms
    wait_until(
        lambda: all(key_status(h, agent["api_key"]) == 401 for h in two_heralds),
        "the old key to stop on both",
        within_s=GRACE_S + CACHE_S + 5.0,
    )
    assert time.time() * 1000 >= until_ms, "the old key stopped before its grace ended"
    assert all(key_status(h, new_key) == 200 for h in two_heralds)


def test_a_rotation_without_grace_stops_the_old_key_here_at_once_and_there_within_a_second(
    two_heralds: tuple[HeraldProcess, HeraldProcess],
) -> None:
    one, two = two_heralds
    with one.client(ADMIN_KEY) as admin:
        agent = admin.post("/v1/agents", json={"handle": f"k-{uuid.uuid4().hex[:8]}"}).json()
        assert all(key_status(h, agent["api_key"]) == 200 for h in two_heralds)  # remembered
        rotated = admin.post(f"/v1/agents/{agent['handle']}/rotate-key", json={"grace_s": 0})
    assert rotated.json()["previous_valid_until"] is None
    assert key_status(one, agent["api_key"]) == 401
    wait_until(lambda: key_status(two, agent["api_key"]) == 401, "the old key to stop", CACHE_S + 5)
    assert key_status(two, rotated.json()["api_key"]) == 200


def test_herald_admin_key_rotate_stops_the_old_key_in_a_running_serve(
    two_heralds: tuple[HeraldProcess, HeraldProcess],
) -> None:
    assert all(admin_status(h, ADMIN_KEY) == 200 for h in two_heralds)
    rotated = rotate_admin_key(two_heralds[0].store_url)
    assert rotated.returncode == 0, rotated.stderr
    new_key = rotated.stdout.strip()
    assert new_key.startswith("herald_admin_") and "\n" not in new_key

    def replaced_on_both() -> bool:
        return all(
            admin_status(h, ADMIN_KEY) == 401 and admin_status(h, new_key) == 200
            for h in two_heralds
        )

    wait_until(replaced_on_both, "the new admin key to replace the old one", CACHE_S + 5)


def test_herald_admin_key_rotate_refuses_while_herald_admin_key_is_set(
    postgres_database_url: str,
) -> None:
    herald = HeraldProcess(postgres_database_url)
    try:
        refused = rotate_admin_key(postgres_database_url, HERALD_ADMIN_KEY=ADMIN_KEY)
        assert refused.returncode == 2 and refused.stdout == ""
        (line,) = refused.stderr.splitlines()
        assert "HERALD_ADMIN_KEY is set" in line
        assert admin_status(herald, ADMIN_KEY) == 200
    finally:
        herald.stop()
