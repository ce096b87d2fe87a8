"""``herald.serve.serve``: the hub that ``herald serve`` runs, started from Python with a
``ServeConfig`` and stopped with an event."""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
from pathlib import Path

import httpx
import pytest

from herald import ServeConfig, open_store
from herald.config import HttpConfig, KeyLimits
from herald.serve import serve
from tests.herald_process import HeraldProcess
from tests.http.test_mcp import new_agent, publish
from tests.webhooks.receiver import HANG, Receiver

pytestmark = pytest.mark.anyio

ADMIN_KEY = "herald-test-admin-key-0123456789abcdef"


async def test_serve_runs_the_hub_its_config_describes_until_told_to_stop(
    tmp_path: Path,
) -> None:
    config = ServeConfig(
        store_url=f"sqlite:///{tmp_path / 'herald.db'}",
        log_level="warning",
        http=HttpConfig(port=0),
        limits=KeyLimits(publish_burst=2),
    )
    lines: list[str] = []
    listening = asyncio.Event()

    def announce(line: str) -> None:
        lines.append(line)
        if "listening on" in line:
            listening.set()

    stop = asyncio.Event()
    running = asyncio.create_task(serve(config, admin_key=ADMIN_KEY, announce=announce, stop=stop))
    try:
        async with asyncio.timeout(30):
            await listening.wait()
        (url,) = [m.group(1) for line in lines if (m := re.search(r"on (http://\S+)", line))]
        headers = {"authorization": f"Bearer {ADMIN_KEY}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=10) as admin:
            assert (await admin.post("/v1/agents", json={"handle": "alice"})).status_code == 201
            batch = [{"to": "alice", "type": "t", "text": f"e{n}"} for n in range(3)]
            over_burst = await admin.post("/v1/events", json=batch)
            assert over_burst.status_code == 413, over_burst.text
            assert (await admin.post("/v1/events", json=batch[:2])).status_code == 202
    finally:
        stop.set()
        async with asyncio.timeout(30):
            await running
    assert not any("new admin key" in line for line in lines)


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
async def test_a_stopped_hub_leaves_its_sqlite_file_whole(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    served = tmp_path / "served"
    served.mkdir()
    herald = HeraldProcess(f"sqlite:///{served / 'hub.db'}")
    agent = new_agent(herald)
    event_id = publish(herald, agent["handle"], "kept")
    herald.process.send_signal(stop_signal)
    herald.process.wait(timeout=30)
    assert sorted(p.name for p in served.iterdir()) == ["hub.db", "hub.db.lock"]  # no WAL left
    copy = tmp_path / "copy.db"
    shutil.copy(served / "hub.db", copy)  # the file alone, as a plain copy takes it
    store = await open_store(f"sqlite:///{copy}")
    try:
        found = await store.get_event(event_id)
        assert found is not None and found.text == "kept"
    finally:
        await store.close()


def test_a_webhook_in_flight_when_a_sqlite_hub_was_killed_is_sent_again_at_its_restart(
    tmp_path: Path,
) -> None:
    # A claim would keep the delivery from any worker for 3 x 60 s + 30 s: far past the wait.
    args = ("--webhook-allow", "loopback", "--webhook-timeout", "60")
    store_url = f"sqlite:///{tmp_path / 'herald.db'}"
    receiver = Receiver(script=[(HANG, {})])
    # The killed hub's request is answered to a closed connection: expected, not worth a trace.
    receiver.server.handle_error = lambda request, client_address: None
    herald = HeraldProcess(store_url, extra_args=args)
    try:
        agent = new_agent(herald)
        with herald.client(herald.admin_key) as admin:
            hook = admin.put(f"/v1/agents/{agent['id']}/webhook", json={"url": receiver.url})
            assert hook.status_code in (200, 201), hook.text
        event_id = publish(herald, agent["handle"], "in flight")
        first = receiver.arrived.get(timeout=30)  # and left hanging: the delivery is claimed
        herald.kill()
        herald = HeraldProcess(store_url, extra_args=args)
        again = receiver.arrived.get(timeout=60)
        assert again.headers["webhook-id"] == first.headers["webhook-id"] == event_id
        assert any("1 webhook delivery was in flight" in line for line in herald.output())
    finally:
        herald.stop()
        receiver.release.set()
        receiver.close()


def test_a_webhook_in_flight_when_one_of_two_postgres_hubs_stops_is_sent_by_the_other_at_once(
    postgres_database_url: str,
) -> None:
    # A claim would keep the delivery from any worker for 3 x 60 s + 30 s: far past the wait.
    args = ("--webhook-allow", "loopback", "--webhook-timeout", "60")
    receiver = Receiver(script=[(HANG, {})])
    receiver.server.handle_error = lambda request, client_address: None
    stopping = HeraldProcess(postgres_database_url, extra_args=args)
    staying: HeraldProcess | None = None
    try:
        agent = new_agent(stopping)
        with stopping.client(stopping.admin_key) as admin:
            hook = admin.put(f"/v1/agents/{agent['id']}/webhook", json={"url": receiver.url})
            assert hook.status_code in (200, 201), hook.text
        event_id = publish(stopping, agent["handle"], "in flight")
        first = receiver.arrived.get(timeout=30)  # and left hanging: claimed by the first hub
        staying = HeraldProcess(postgres_database_url, extra_args=args)
        stopping.stop()  # a restart or a deploy: SIGTERM, while the request hangs
        again = receiver.arrived.get(timeout=60)
        assert again.headers["webhook-id"] == first.headers["webhook-id"] == event_id
    finally:
        stopping.stop()
        if staying is not None:
            staying.stop()
        receiver.release.set()
        receiver.close()


def test_a_webhook_in_flight_when_one_of_two_postgres_hubs_is_killed_is_sent_by_the_other(
    postgres_database_url: str,
) -> None:
    # A claim would keep the delivery from any worker for 3 x 60 s + 30 s: far past the wait.
    args = ("--webhook-allow", "loopback", "--webhook-timeout", "60")
    receiver = Receiver(script=[(HANG, {})])
    receiver.server.handle_error = lambda request, client_address: None
    killed = HeraldProcess(postgres_database_url, extra_args=args)
    surviving: HeraldProcess | None = None
    try:
        agent = new_agent(killed)
        with killed.client(killed.admin_key) as admin:
            hook = admin.put(f"/v1/agents/{agent['id']}/webhook", json={"url": receiver.url})
            assert hook.status_code in (200, 201), hook.text
        event_id = publish(killed, agent["handle"], "in flight")
        first = receiver.arrived.get(timeout=30)  # and left hanging: claimed by the first hub
        surviving = HeraldProcess(postgres_database_url, extra_args=args)
        killed.kill()  # SIGKILL: nothing of it lives to free its claim
        again = receiver.arrived.get(timeout=60)
        assert again.headers["webhook-id"] == first.headers["webhook-id"] == event_id
        line = "1 webhook delivery was claimed by a herald process that is gone: sent again"
        surviving.wait_for_line(lambda text: line in text)
    finally:
        killed.stop()
        if surviving is not None:
            surviving.stop()
        receiver.release.set()
        receiver.close()
