"""``herald.serve.serve``: the hub that ``herald serve`` runs, started from Python with a
``ServeConfig`` and stopped with an event."""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from herald import ServeConfig, open_store
from herald.config import HttpConfig, KeyLimits
from herald.serve import serve
from tests.herald_process import HeraldProcess
from tests.http.test_mcp import new_agent, publish
from tests.webhooks.receiver import HANG, Received, Receiver

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


STOPPED_AS_IT_LISTENS = """
import asyncio, os, signal, sys
from herald import ServeConfig
from herald.config import HttpConfig
from herald.serve import serve

def announce(line):
    print(line, flush=True)
    if "listening on" in line:
        os.kill(os.getpid(), signal.SIGTERM)  # a supervisor that stops it as soon as it may

config = ServeConfig(store_url=sys.argv[1], log_level="warning", http=HttpConfig(port=0))
asyncio.run(serve(config, admin_key=sys.argv[2], announce=announce))
"""


def test_a_hub_stopped_the_moment_it_says_it_listens_stops_cleanly(tmp_path: Path) -> None:
    """Whoever waits for the line that says it listens may stop it then: the stop is kept for
    after the close (no WAL left beside the file), not the end of the process mid-start."""
    served = tmp_path / "served"
    served.mkdir()
    store_url = f"sqlite:///{served / 'hub.db'}"
    done = subprocess.run(
        [sys.executable, "-c", STOPPED_AS_IT_LISTENS, store_url, ADMIN_KEY],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -signal.SIGTERM and "listening on" in done.stdout, done.stderr
    assert sorted(p.name for p in served.iterdir()) == ["hub.db", "hub.db.lock"]  # no WAL left


LONG_CLAIMS = ("--webhook-allow", "loopback", "--webhook-timeout", "60")
"""A claim keeps a delivery from any worker for 3 x 60 s + 30 s: far past every wait below."""


@pytest.fixture
def hanging() -> Iterator[Receiver]:
    """A receiver that leaves the first request hanging (until the test ends)."""
    receiver = Receiver(script=[(HANG, {})])
    # A stopped hub's request is answered to a closed connection: expected, not worth a trace.
    receiver.server.handle_error = lambda request, client_address: None
    yield receiver
    receiver.release.set()
    receiver.close()


def in_flight(herald: HeraldProcess, receiver: Receiver) -> tuple[str, Received]:
    """An event to a new agent whose webhook is ``receiver``, and its request, left hanging:
    the delivery is claimed by ``herald``."""
    agent = new_agent(herald)
    with herald.client(herald.admin_key) as admin:
        hook = admin.put(f"/v1/agents/{agent['id']}/webhook", json={"url": receiver.url})
        assert hook.status_code in (200, 201), hook.text
    event_id = publish(herald, agent["handle"], "in flight")
    return event_id, receiver.arrived.get(timeout=30)


def test_a_webhook_in_flight_when_a_sqlite_hub_was_killed_is_sent_again_at_its_restart(
    tmp_path: Path, hanging: Receiver
) -> None:
    store_url = f"sqlite:///{tmp_path / 'herald.db'}"
    herald = HeraldProcess(store_url, extra_args=LONG_CLAIMS)
    try:
        event_id, first = in_flight(herald, hanging)
        herald.kill()
        herald = HeraldProcess(store_url, extra_args=LONG_CLAIMS)
        again = hanging.arrived.get(timeout=60)
        assert again.headers["webhook-id"] == first.headers["webhook-id"] == event_id
        assert any("1 webhook delivery was in flight" in line for line in herald.output())
    finally:
        herald.stop()


def test_a_webhook_answered_while_a_sqlite_hub_stops_is_delivered_and_not_sent_again(
    tmp_path: Path, hanging: Receiver
) -> None:
    store_url = f"sqlite:///{tmp_path / 'herald.db'}"
    herald = HeraldProcess(store_url, extra_args=(*LONG_CLAIMS, "--log-level", "info"))
    try:
        event_id, _ = in_flight(herald, hanging)
        herald.process.send_signal(signal.SIGTERM)  # a restart, a deploy
        herald.wait_for_line(lambda text: "webhook requests in flight have 5 s" in text)
        hanging.release.set()  # answered within the grace
        herald.stop()
        # The grace began as herald began to stop, not once its HTTP server had done waiting
        # for its own open requests (that would make a stop last both, one after the other).
        said = herald.output()
        began = next(n for n, line in enumerate(said) if "requests in flight have" in line)
        assert not any("Waiting for application shutdown" in line for line in said[:began])
        assert any("Waiting for application shutdown" in line for line in said[began:])
        herald = HeraldProcess(store_url, extra_args=LONG_CLAIMS)
        assert not any("in flight when herald last stopped" in line for line in herald.output())
        with herald.client(herald.admin_key) as admin:
            found = admin.get(f"/v1/events/{event_id}").json()
        assert found["status"] == "delivered", found
        assert [a["outcome"] for a in found["attempts"]] == ["delivered"]
        assert [r.headers["webhook-id"] for r in hanging.requests] == [event_id]
    finally:
        herald.stop()


def test_a_second_ctrl_c_cuts_the_webhook_stop_grace_short_and_the_delivery_is_kept(
    tmp_path: Path, hanging: Receiver
) -> None:
    store_url = f"sqlite:///{tmp_path / 'herald.db'}"
    grace = ("--webhook-stop-grace", "600", "--log-level", "info")
    herald = HeraldProcess(store_url, extra_args=(*LONG_CLAIMS, *grace))
    try:
        event_id, first = in_flight(herald, hanging)
        herald.process.send_signal(signal.SIGINT)
        herald.wait_for_line(lambda text: "webhook requests in flight have 600 s" in text)
        herald.process.send_signal(signal.SIGINT)  # stop now, not in ten minutes
        herald.process.wait(timeout=30)
        # Cut off, the request in flight is not lost: the next start sends it again at once
        # (not once its claim runs out, minutes later), with the same webhook-id.
        herald = HeraldProcess(store_url, extra_args=LONG_CLAIMS)
        assert any("in flight when herald last stopped: sent again" in line
                   for line in herald.output())  # fmt: skip
        again = hanging.arrived.get(timeout=30)
        assert again.headers["webhook-id"] == first.headers["webhook-id"] == event_id
    finally:
        herald.stop()


@pytest.mark.parametrize("end", ["stopped", "killed"])
def test_a_webhook_in_flight_when_one_of_two_postgres_hubs_ends_is_sent_by_the_other(
    postgres_database_url: str, hanging: Receiver, end: str
) -> None:
    # Stopped, it gives the request in flight 1 s to be answered; this one hangs: cut off.
    grace = ("--webhook-stop-grace", "1", "--log-level", "info")
    ending = HeraldProcess(postgres_database_url, extra_args=(*LONG_CLAIMS, *grace))
    other: HeraldProcess | None = None
    try:
        event_id, first = in_flight(ending, hanging)
        other = HeraldProcess(postgres_database_url, extra_args=LONG_CLAIMS)
        if end == "stopped":
            ending.stop()  # a restart or a deploy: SIGTERM, and the hub frees its claims
            said = "the webhook requests in flight have 1 s to be answered"
            ending.wait_for_line(lambda text: said in text)
        else:
            ending.kill()  # SIGKILL: nothing of it lives to free its claim; the other sees it gone
        again = hanging.arrived.get(timeout=60)
        assert again.headers["webhook-id"] == first.headers["webhook-id"] == event_id
        if end == "killed":
            line = "1 webhook delivery was claimed by a herald process that is gone: sent again"
            other.wait_for_line(lambda text: line in text)
    finally:
        ending.stop()
        if other is not None:
            other.stop()
