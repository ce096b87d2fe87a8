"""Two ``herald serve`` processes on one PostgreSQL database: a session live on one holds back
the other's webhook until the ack timeout, and once its process is killed the other sends
within the documented bound (the presence TTL, then one scheduling round)."""

from __future__ import annotations

import contextlib
import queue
import uuid
from typing import Any

import pytest

from tests.herald_process import HeraldProcess
from tests.http.test_mcp import session
from tests.waiting import WAIT_S, until
from tests.webhooks.receiver import Receiver

pytestmark = pytest.mark.anyio

PRESENCE_TTL_S = 2.0
BOUND_S = PRESENCE_TTL_S + 1.0 + 5.0
"""The documented bound (TTL, then a scheduling round of at most a second), with room for a
loaded machine."""


def add_agent(herald: HeraldProcess, receiver: Receiver, name: str) -> dict[str, Any]:
    with herald.client(herald.admin_key) as admin:
        agent = admin.post("/v1/agents", json={"handle": f"{name}-{uuid.uuid4().hex[:8]}"}).json()
        hook = admin.put(
            f"/v1/agents/{agent['id']}/webhook", json={"url": f"{receiver.url}/{name}"}
        )
        assert hook.status_code == 200, hook.text
        return dict(agent)


def publish(herald: HeraldProcess, agent: dict[str, Any], text: str) -> None:
    with herald.client(herald.admin_key) as admin:
        answer = admin.post("/v1/events", json={"to": agent["handle"], "type": "t", "text": text})
        assert answer.status_code == 202, answer.text


def sessions_seen(herald: HeraldProcess, agent: dict[str, Any]) -> list[dict[str, Any]]:
    with herald.client(herald.admin_key) as admin:
        return list(admin.get(f"/v1/agents/{agent['id']}/sessions").json()["sessions"])


async def one_session(herald: HeraldProcess, agent: dict[str, Any]) -> bool:
    return len(sessions_seen(herald, agent)) == 1


def next_webhook(receiver: Receiver, timeout_s: float) -> str:
    try:
        return receiver.arrived.get(timeout=timeout_s).path
    except queue.Empty:
        raise AssertionError(f"no webhook within {timeout_s:g} s") from None


def serve_two(database_url: str, ack_timeout_s: float) -> tuple[HeraldProcess, HeraldProcess]:
    args = ("--webhook-allow", "loopback", "--presence-ttl", str(PRESENCE_TTL_S))
    args += ("--ack-timeout", str(ack_timeout_s))
    first = HeraldProcess(database_url, extra_args=args)
    try:
        return first, HeraldProcess(database_url, extra_args=args)
    except BaseException:
        first.stop()
        raise


async def test_a_session_on_one_process_holds_back_the_others_webhook_until_it_dies(
    postgres_database_url: str,
) -> None:
    receiver = Receiver()
    first, second = serve_two(postgres_database_url, ack_timeout_s=3600)
    try:
        present = add_agent(second, receiver, "present")
        absent = add_agent(second, receiver, "absent")
        async with contextlib.AsyncExitStack() as connection:
            await connection.enter_async_context(session(first, present["api_key"]))
            # The second process sees the first's session through the store.
            await until(lambda: one_session(second, present), "the session")
            (seen,) = sessions_seen(second, present)
            assert seen["can_push"] is True and seen["era"] == "legacy"

            publish(second, present, "held back: its session may still acknowledge it")
            publish(second, absent, "nothing holds this one")
            # The round that sent this one considered the first event too, and held it back.
            assert next_webhook(receiver, WAIT_S) == "/absent"
            assert receiver.arrived.empty()

            first.kill()  # SIGKILL: its session is never taken out of the store
            assert next_webhook(receiver, BOUND_S) == "/present"
            assert sessions_seen(second, present) == []
            connection.push_async_exit(_ignore_the_broken_connection)
    finally:
        first.stop()
        second.stop()
        receiver.close()


async def test_a_session_on_one_process_holds_back_the_others_webhook_only_until_the_ack_timeout(
    postgres_database_url: str,
) -> None:
    receiver = Receiver()
    first, second = serve_two(postgres_database_url, ack_timeout_s=2)
    try:
        present = add_agent(second, receiver, "present")
        async with session(first, present["api_key"]) as (_client, received):
            await until(lambda: one_session(second, present), "the session")
            publish(second, present, "pushed, never acknowledged")
            method, _ = await received.next()
            assert method == "notifications/claude/channel"  # the first process pushed it
            # Not acknowledged within the ack timeout: the webhook goes, the session still live.
            assert next_webhook(receiver, WAIT_S) == "/present"
            assert len(sessions_seen(second, present)) == 1
    finally:
        first.stop()
        second.stop()
        receiver.close()


async def _ignore_the_broken_connection(*exc_info: object) -> bool:
    """The client's session ends on a killed server: its errors on the way out are expected."""
    return True
