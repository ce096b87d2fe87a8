"""``GET /v1/agents/{id}`` against a real ``herald serve`` on each backend: one agent with the
loop guard limits that hold for its sends, the serve-wide ones until the operator raises its
own, each limit it left out still the serve's."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.backends import BACKENDS, serving
from tests.herald_process import HeraldProcess


@pytest.fixture(scope="module", params=BACKENDS)
def herald(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HeraldProcess]:
    directory = tmp_path_factory.mktemp(request.param)
    flags = ("--loop-exchanges", "7", "--loop-window", "120", "--loop-per-minute", "9")
    with serving(request.param, directory, *flags) as process:
        yield process


def test_an_agent_read_shows_its_loop_guard_limits_its_own_or_the_serves(
    herald: HeraldProcess,
) -> None:
    handle = f"lg-{uuid.uuid4().hex[:8]}"
    with herald.client(herald.admin_key) as admin:
        made = admin.post("/v1/agents", json={"handle": handle})
        assert made.status_code == 201, made.text
        shown = admin.get(f"/v1/agents/{handle}").json()
        assert shown["loop_guard"] == {"exchanges": 7, "window_s": 120, "per_minute": 9}
        assert shown["id"] == made.json()["id"] and "pending" in shown
        raised = admin.patch(f"/v1/agents/{handle}", json={"loop_guard": {"exchanges": 40}})
        assert raised.status_code == 200, raised.text
        by_id = admin.get(f"/v1/agents/{made.json()['id']}").json()
        assert by_id["loop_guard"] == {"exchanges": 40, "window_s": 120, "per_minute": 9}
        missing = admin.get(f"/v1/agents/nobody-{uuid.uuid4().hex[:6]}")
        assert missing.status_code == 404
