"""In-process MCP clients against herald's server, with everything they receive in one queue."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pydantic
import pytest
from mcp.client.extension import ClientExtension, NotificationBinding
from mcp.server.lowlevel import Server

from herald import Hub
from herald.delivery.engine import Notifier
from herald.mcp import create_server
from herald.models import Agent
from herald.testing import ManualClock
from mcp import Client


class AnyParams(pydantic.BaseModel):
    """Whatever the notification carries (``meta`` included, which the SDK's own params model
    would take for ``_meta``)."""

    model_config = pydantic.ConfigDict(extra="allow")


class Received:
    """Everything a test client is sent, in order, with bounded waits."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()

    def put(self, method: str, params: Any) -> None:
        dumped = params.model_dump(mode="json", by_alias=True, exclude_none=True) if params else {}
        self.queue.put_nowait((method, dumped))

    async def next(self, timeout_s: float = 10.0) -> tuple[str, dict[str, Any]]:
        async with asyncio.timeout(timeout_s):
            return await self.queue.get()


class HeraldNotifications(ClientExtension):
    """Lets the SDK client receive the notifications it has no schema for."""

    identifier = "test/herald-notifications"

    def __init__(self, received: Received) -> None:
        self.received = received

    def notifications(self) -> list[NotificationBinding[Any]]:
        def binding(method: str) -> NotificationBinding[Any]:
            async def handler(params: AnyParams) -> None:
                self.received.put(method, params)

            return NotificationBinding(method=method, params_type=AnyParams, handler=handler)

        return [
            binding(method)
            for method in (
                "notifications/claude/channel",
                "notifications/herald/event",
                *EVENTS_NOTIFICATIONS,
            )
        ]


EVENTS_NOTIFICATIONS = tuple(
    f"notifications/events/{kind}" for kind in ("active", "event", "heartbeat", "terminated")
)


@pytest.fixture
async def hub(tmp_path: Path, clock: ManualClock) -> AsyncIterator[Hub]:
    """A hub whose clock moves only when the test says: deadlines pass at once, when told."""
    async with Hub.from_url(f"sqlite:///{tmp_path / 'h.db'}", clock=clock) as opened:
        yield opened


@pytest.fixture
async def notifier(hub: Hub) -> AsyncIterator[Notifier]:
    service = Notifier(hub, backlog_limit=5)
    yield service
    await service.close()


@contextlib.asynccontextmanager
async def connect(
    notifier: Notifier,
    agent: Agent,
    *,
    mode: str = "legacy",
    name: str = "test-client",
    answer: types.ElicitResult | None = None,
    server: Server[Any] | None = None,
) -> AsyncIterator[tuple[Client, Received]]:
    """An SDK client connected in process as ``agent``, registered with the notifier (legacy)."""

    async def identify(ctx: Any) -> Agent:
        return agent

    received = Received()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.put("notifications/message", params)

    async def on_elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        received.put("elicitation/create", params)
        assert answer is not None
        return answer

    target = server or create_server(notifier, identify=identify, transport="memory")
    before = len(notifier.sessions_of(agent.id))
    async with Client(
        target,
        mode=mode,  # type: ignore[arg-type]
        client_info=types.Implementation(name=name, version="1.0"),
        extensions=[HeraldNotifications(received)],
        logging_callback=on_log,
        elicitation_callback=on_elicit if answer is not None else None,
    ) as client:
        if client.protocol_version != "2026-07-28":
            await notifier.wait_for_sessions(agent.id, before + 1)
        yield client, received
