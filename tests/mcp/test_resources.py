"""The ``herald://inbox`` resource on both eras, in process: listed, read as JSON oldest first,
and reading it delivers nothing; and ``herald://history``, the acknowledged events newest first."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from herald import Hub
from herald.delivery.engine import Notifier
from herald.mcp.resources import HISTORY_URI, INBOX_URI
from herald.models import EventStatus
from mcp import Client
from tests.mcp.conftest import connect

pytestmark = pytest.mark.anyio
ERAS = ["legacy", "auto"]


async def read_inbox(client: Client) -> dict[str, Any]:
    (contents,) = (await client.read_resource(INBOX_URI)).contents
    assert isinstance(contents, types.TextResourceContents)
    assert contents.mime_type == "application/json"
    return dict(json.loads(contents.text))


@pytest.mark.parametrize("mode", ERAS)
async def test_the_inbox_is_listed_and_says_reading_it_is_no_delivery(
    notifier: Notifier, mode: str
) -> None:
    alice, _ = await notifier.hub.create_agent("alice")
    async with connect(notifier, alice, mode=mode) as (client, _):
        listed, history = (await client.list_resources()).resources
    assert str(listed.uri) == INBOX_URI
    assert listed.description is not None and "not a delivery" in listed.description
    assert str(history.uri) == HISTORY_URI
    assert history.description is not None and "changes nothing" in history.description


@pytest.mark.parametrize("mode", ERAS)
async def test_the_history_shows_acknowledged_events_newest_first_on_both_eras(
    hub: Hub, notifier: Notifier, mode: str
) -> None:
    alice, _ = await notifier.hub.create_agent("alice")
    first = await hub.publish("alice", "t", "first")
    second = await hub.publish("alice", "t", "second")
    pending = await hub.publish("alice", "t", "pending")
    await hub.ack(alice, ids=[first.event.id, second.event.id])
    before = [await hub.get_event(e.event.id) for e in (first, second)]
    async with connect(notifier, alice, mode=mode) as (client, _):
        (contents,) = (await client.read_resource(HISTORY_URI)).contents
    assert isinstance(contents, types.TextResourceContents)
    shown = json.loads(contents.text)
    assert [e["id"] for e in shown["events"]] == [second.event.id, first.event.id]
    assert pending.event.id not in {e["id"] for e in shown["events"]}
    assert shown["next"] is None
    # Reading changes nothing: the acknowledged events are as they were. (The pending one is not
    # compared: on the legacy era, the session's connect pushes it, as it should.)
    assert [await hub.get_event(e.event.id) for e in (first, second)] == before


@pytest.mark.parametrize("mode", ERAS)
async def test_reading_the_inbox_shows_pending_events_oldest_first_and_delivers_none(
    hub: Hub, notifier: Notifier, mode: str
) -> None:
    alice, _ = await hub.create_agent("alice")
    await hub.create_agent("bob")
    first = await hub.publish("alice", "t", "first")
    second = await hub.publish("alice", "t", "second", data={"n": 2})
    await hub.publish("bob", "t", "not alice's")
    async with connect(notifier, alice, mode=mode) as (client, _):
        shown = await read_inbox(client)
        again = await read_inbox(client)  # a look: the same events again
    ids = [first.event.id, second.event.id]
    assert [e["id"] for e in shown["events"]] == [e["id"] for e in again["events"]] == ids
    assert shown["events"][1]["data"] == {"n": 2}
    assert shown["more"] is False
    for published in (first, second):
        event, _ = await hub.get_event(published.event.id)
        assert event.status is not EventStatus.DELIVERED


@pytest.mark.parametrize("mode", ERAS)
async def test_a_resource_herald_does_not_serve_is_refused_by_name(
    notifier: Notifier, mode: str
) -> None:
    alice, _ = await notifier.hub.create_agent("alice")
    async with connect(notifier, alice, mode=mode) as (client, _):
        with pytest.raises(MCPError, match="herald://inbox") as refused:
            await client.read_resource("herald://outbox")
    assert refused.value.error.code == types.INVALID_PARAMS
