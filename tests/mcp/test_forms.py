"""Forms on 2026-07-28 (MRTR), in process: ``inbox`` asks for the answers to interactive events
as an input-required result; an accepted form becomes the event's reply, a declined one leaves
it pending, and a requestState herald did not make, or made for another agent, or too long ago,
is refused."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pydantic
import pytest
from mcp.shared.exceptions import MCPError

from herald import EventStatus, Hub
from herald.delivery.engine import Notifier
from herald.mcp.request_state import STATE_TTL_MS
from herald.testing import ManualClock
from mcp import Client
from tests.mcp.conftest import connect

pytestmark = pytest.mark.anyio

FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
ACCEPT = types.ElicitResult(action="accept", content={"ok": True})


class RawParams(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")


class RawCall(types.Request[RawParams, str]):
    """A ``tools/call`` as sent, unchecked by the client's own model of it."""


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def first_round(client: Client) -> types.InputRequiredResult:
    asked = await client.session.call_tool("inbox", {}, allow_input_required=True)
    assert isinstance(asked, types.InputRequiredResult)
    return asked


async def status_of(hub: Hub, event_id: str) -> EventStatus:
    event, _ = await hub.get_event(event_id)
    return event.status


async def test_an_accepted_form_is_the_events_reply_and_the_rest_of_the_inbox_follows(
    hub: Hub, notifier: Notifier
) -> None:
    alice, _ = await hub.create_agent("alice")
    bob, _ = await hub.create_agent("bob")
    plain = await hub.publish("alice", "t", "just news")
    form = await hub.publish("alice", "question", "Approve the release?", reply=FORM, sender="bob")
    async with connect(notifier, alice, mode="auto", answer=ACCEPT) as (client, received):
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("inbox", {})
        method, params = await received.next()
    assert method == "elicitation/create" and params["requestedSchema"] == FORM
    assert "Approve the release?" in params["message"]
    (reply,) = await hub.replies(form.event.id)
    assert reply.data_json == '{"ok":true}'
    assert await status_of(hub, form.event.id) is EventStatus.DELIVERED
    assert "just news" in text_of(result) and "is its reply" in text_of(result)
    assert [e["id"] for e in result.structured_content["events"]] == [plain.event.id]
    assert await status_of(hub, plain.event.id) is EventStatus.DELIVERED
    assert [e.type for e in (await hub.drain(bob)).events] == ["reply.received"]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_or_cancelled_form_leaves_its_event_pending(
    hub: Hub, notifier: Notifier, action: str
) -> None:
    alice, _ = await hub.create_agent("alice")
    form = await hub.publish("alice", "question", "Approve?", reply=FORM)
    plain = await hub.publish("alice", "t", "just news")
    answer = types.ElicitResult(action=action)  # type: ignore[arg-type]
    async with connect(notifier, alice, mode="auto", answer=answer) as (client, _):
        result = await client.call_tool("inbox", {})
    assert "stays pending" in text_of(result)
    assert [e["id"] for e in result.structured_content["events"]] == [plain.event.id]
    assert await hub.replies(form.event.id) == []
    assert await status_of(hub, form.event.id) is EventStatus.PENDING


async def test_a_client_that_declared_no_forms_gets_the_event_as_text(
    hub: Hub, notifier: Notifier
) -> None:
    alice, _ = await hub.create_agent("alice")
    form = await hub.publish("alice", "question", "Approve?", reply=FORM)
    async with connect(notifier, alice, mode="auto") as (client, _):
        result = await client.call_tool("inbox", {})
    assert "call reply with event_id" in text_of(result)
    assert await status_of(hub, form.event.id) is EventStatus.DELIVERED


async def test_a_forged_request_state_is_refused_and_changes_nothing(
    hub: Hub, notifier: Notifier
) -> None:
    alice, _ = await hub.create_agent("alice")
    form = await hub.publish("alice", "question", "Approve?", reply=FORM)
    async with connect(notifier, alice, mode="auto", answer=ACCEPT) as (client, _):
        asked = await first_round(client)
        assert asked.request_state is not None
        version, body, signature = asked.request_state.split(".")
        forged = [
            "h1.e30.AAAA",
            f"{version}.{body}x.{signature}",
            f"{version}.{body}.{signature[:-2]}AA",
            "not a state",
        ]
        for state in forged:
            with pytest.raises(MCPError, match="requestState is not one herald made") as refused:
                await client.session.call_tool(
                    "inbox",
                    {},
                    input_responses={form.event.id: ACCEPT},
                    request_state=state,
                    allow_input_required=True,
                )
            assert refused.value.error.code == types.INVALID_PARAMS
    assert await hub.replies(form.event.id) == []
    assert await status_of(hub, form.event.id) is EventStatus.PENDING


async def test_another_agents_request_state_is_refused(hub: Hub, notifier: Notifier) -> None:
    alice, _ = await hub.create_agent("alice")
    bob, _ = await hub.create_agent("bob")
    form = await hub.publish("alice", "question", "Approve?", reply=FORM)
    async with connect(notifier, alice, mode="auto", answer=ACCEPT) as (client, _):
        state = (await first_round(client)).request_state
    async with connect(notifier, bob, mode="auto", answer=ACCEPT) as (client, _):
        with pytest.raises(MCPError, match="made for another agent"):
            await client.session.call_tool(
                "inbox",
                {},
                input_responses={form.event.id: ACCEPT},
                request_state=state,
                allow_input_required=True,
            )
    assert await hub.replies(form.event.id) == []


async def test_an_expired_request_state_is_refused(
    hub: Hub, notifier: Notifier, clock: ManualClock
) -> None:
    alice, _ = await hub.create_agent("alice")
    form = await hub.publish("alice", "question", "Approve?", reply=FORM, ttl_s=3600)
    async with connect(notifier, alice, mode="auto", answer=ACCEPT) as (client, _):
        state = (await first_round(client)).request_state
        clock.advance(STATE_TTL_MS / 1000)
        with pytest.raises(MCPError, match="has expired"):
            await client.session.call_tool(
                "inbox",
                {},
                input_responses={form.event.id: ACCEPT},
                request_state=state,
                allow_input_required=True,
            )
    assert await status_of(hub, form.event.id) is EventStatus.PENDING


async def test_a_request_state_answers_once(hub: Hub, notifier: Notifier) -> None:
    alice, _ = await hub.create_agent("alice")
    form = await hub.publish("alice", "question", "Approve?", reply=FORM)
    async with connect(notifier, alice, mode="auto", answer=ACCEPT) as (client, _):
        state = (await first_round(client)).request_state
        for _ in range(2):
            result = await client.session.call_tool(
                "inbox",
                {},
                input_responses={form.event.id: ACCEPT},
                request_state=state,
                allow_input_required=True,
            )
    assert isinstance(result, types.CallToolResult)
    assert "already handled" in text_of(result)
    assert len(await hub.replies(form.event.id)) == 1


async def test_no_log_message_and_no_session_on_2026_07_28(hub: Hub, notifier: Notifier) -> None:
    alice, _ = await hub.create_agent("alice")
    async with connect(notifier, alice, mode="auto", answer=ACCEPT) as (client, received):
        await hub.publish("alice", "t", "news")
        await hub.publish("alice", "question", "Approve?", reply=FORM)
        await client.call_tool("inbox", {})
        assert (await received.next())[0] == "elicitation/create"
        await client.call_tool("send_message", {"to": "alice", "text": "to myself"})
        # Nothing is pushed on this era: no session is registered for the cascade.
        assert notifier.sessions_of(alice.id) == []
        assert received.queue.empty()


async def test_a_retry_with_one_answer_refused_takes_none_and_names_it(
    hub: Hub, notifier: Notifier
) -> None:
    alice, _ = await hub.create_agent("alice")
    noted = {"type": "object", "properties": {"note": {"type": "string"}}}
    fine = await hub.publish("alice", "question", "Approve?", reply=FORM)
    huge = await hub.publish("alice", "question", "Why?", reply=noted)
    too_large = types.ElicitResult(action="accept", content={"note": "x" * 300_000})
    async with connect(notifier, alice, mode="auto", answer=ACCEPT) as (client, _):
        state = (await first_round(client)).request_state
        with pytest.raises(MCPError) as refused:
            await client.session.call_tool(
                "inbox",
                {},
                input_responses={fine.event.id: ACCEPT, huge.event.id: too_large},
                request_state=state,
                allow_input_required=True,
            )
    for event in (fine, huge):
        assert await hub.replies(event.event.id) == []
        assert await status_of(hub, event.event.id) is EventStatus.PENDING
    assert refused.value.error.code == types.INVALID_PARAMS
    message = refused.value.error.message
    assert f"params.inputResponses.{huge.event.id}" in message
    assert "No answer was taken" in message and "smaller answer" in message


@pytest.mark.parametrize(
    ("retry", "names"),
    [
        ({"requestState": 5}, "params.requestState must be the requestState string"),
        ({"inputResponses": []}, "params.inputResponses must be an object"),
        ({"inputResponses": {"evt_1": {"action": "maybe"}}}, "params.inputResponses.evt_1 must"),
        ({"inputResponses": {"evt_1": "accept"}}, "params.inputResponses.evt_1 must"),
    ],
)
async def test_a_malformed_retry_is_refused_naming_the_field(
    hub: Hub, notifier: Notifier, retry: dict[str, Any], names: str
) -> None:
    alice, _ = await hub.create_agent("alice")
    form = await hub.publish("alice", "question", "Approve?", reply=FORM)
    async with connect(notifier, alice, mode="auto", answer=ACCEPT) as (client, _):
        state = (await first_round(client)).request_state
        call = RawCall(
            method="tools/call",
            params=RawParams(name="inbox", arguments={}, **{"requestState": state, **retry}),
        )
        with pytest.raises(MCPError) as refused:
            await client.session.send_request(call, pydantic.TypeAdapter(dict[str, Any]))
    assert refused.value.error.code == types.INVALID_PARAMS
    assert names in refused.value.error.message
    assert await status_of(hub, form.event.id) is EventStatus.PENDING
