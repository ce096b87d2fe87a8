"""Forms on 2026-07-28 (MRTR): the ``inbox`` tool asks for the answers to interactive events
in its result, since that era's server cannot send a form request of its own.

First round: when the events the call would show include interactive ones and this request's
client declared form elicitation, the result is ``input_required``: one form per such event
(keyed by its id) and a signed ``requestState`` naming them. Second round (the client retries
with ``inputResponses`` and the state): an accepted form becomes the event's reply, exactly as
a form answered on the 2025 era does (``herald.delivery.answers``); a declined or cancelled one
leaves the event pending. Then the inbox is shown as usual, without the events just asked
about, which are never asked again in that call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from herald.capabilities import LEGACY_VERSIONS, detect
from herald.delivery import render
from herald.delivery.answers import check_answer
from herald.delivery.base import FormAnswer
from herald.errors import HeraldError, InvalidInput
from herald.hub import Hub
from herald.inputs.channel import InboxInput
from herald.inputs.refusals import parse
from herald.mcp.request_state import STATE_TTL_MS, FormsAsked, seal, unseal
from herald.models import Agent, Attempt, Event

TOOL = "inbox"
MECHANISM = "input_required"
"""The name attempts of this way are recorded with."""


def takes_forms(ctx: ServerRequestContext[Any], agent: Agent) -> bool:
    """Whether this request's client declared form elicitation (on 2026-07-28 each request
    declares its own), and the agent has not switched forms off."""
    session = ctx.session
    declared = session.client_capabilities
    client = session.client_params
    caps = detect(
        transport="mcp",
        protocol_version=session.protocol_version,
        client_info=client.client_info.model_dump(by_alias=True) if client else None,
        client_capabilities=declared.model_dump(by_alias=True, exclude_none=True)
        if declared
        else None,
    )
    return caps.elicitation_form and agent.delivery.get("elicitation") is not False


async def ask(
    hub: Hub, agent: Agent, arguments: dict[str, Any]
) -> types.InputRequiredResult | None:
    """The forms of the interactive events among those the call would show, or None (none, or
    arguments the tool itself will refuse). Nothing is held or delivered by asking."""
    try:
        limit = parse(InboxInput, arguments).limit
    except HeraldError:
        return None
    forms = [event for event in await hub.open_events(agent.id, 0, limit) if event.interactive]
    if not forms:
        return None
    asked = FormsAsked(agent.id, TOOL, tuple(event.id for event in forms))
    state = seal(await hub.signing_key(), asked, hub.now() + STATE_TTL_MS)
    requests: dict[str, types.InputRequest] = {event.id: _form(event) for event in forms}
    return types.InputRequiredResult(input_requests=requests, request_state=state)


def _form(event: Event) -> types.ElicitRequest:
    assert event.reply_schema is not None
    params = types.ElicitRequestFormParams(
        message=render.headline(event),
        requested_schema=event.reply_schema,
    )
    return types.ElicitRequest(params=params)


ANSWER_SHAPE = ' {"action": "accept", "content": {...}}, or "decline" or "cancel"'


def check_retry(params: Mapping[str, Any] | None) -> None:
    """Refuse in herald's words what the SDK's model of a ``tools/call`` retry would refuse
    without one ("Invalid request parameters", no data): a ``requestState`` that is not a
    string, ``inputResponses`` that are not an object, an answer that is not an object or a
    form answer with a wrong ``action`` or ``content``. Anything else is left to the SDK (an
    answer with no ``action`` may be another kind of input).

    Raises:
        InvalidInput: naming the field and what to send.
    """
    params = params or {}
    state = params.get("requestState")
    if state is not None and not isinstance(state, str):
        raise InvalidInput(
            "params.requestState must be the requestState string of the input_required result"
            " this call answers, given back unchanged"
        )
    responses = params.get("inputResponses")
    if responses is None:
        return
    if not isinstance(responses, Mapping):
        raise InvalidInput(
            "params.inputResponses must be an object: each asked event's id to the answer to"
            " its form"
        )
    for key, given in responses.items():
        if isinstance(given, Mapping) and "action" not in given:
            continue
        try:
            types.ElicitResult.model_validate(given)
        except ValidationError:
            raise InvalidInput(
                f"params.inputResponses.{key} must be the answer to its form:{ANSWER_SHAPE}"
            ) from None


async def retry_gate(
    ctx: ServerRequestContext[Any],
    call_next: Callable[[ServerRequestContext[Any]], Awaitable[Any]],
) -> Any:
    """The middleware that runs ``check_retry`` on a 2026-07-28 ``tools/call`` before the SDK
    checks its params (it sees them first)."""
    if ctx.method == "tools/call" and ctx.session.protocol_version not in LEGACY_VERSIONS:
        try:
            check_retry(ctx.params)
        except InvalidInput as exc:
            raise MCPError(types.INVALID_PARAMS, exc.message) from exc
    return await call_next(ctx)


async def answer(
    hub: Hub,
    agent: Agent,
    state: str,
    responses: Mapping[str, Any] | None,
    session_id: str,
) -> tuple[tuple[str, ...], list[str]]:
    """Take the answers to the forms ``state`` asked about. Returns those events (the inbox
    shows none of them in this call) and a line for each, for the result. Every answer is
    checked before any is taken: a refused retry changes nothing.

    Raises:
        InvalidInput: ``state`` was not made by herald for this agent (forged, altered), or it
            has expired; or an answer is not an elicitation result, or cannot be a reply (too
            large, among others). Nothing is changed.
    """
    asked = unseal(await hub.signing_key(), state, agent.id, TOOL, hub.now())
    answers: dict[str, types.ElicitResult | None] = {}
    for event_id in asked.event_ids:
        given = (responses or {}).get(event_id)
        if given is not None and not isinstance(given, types.ElicitResult):
            raise InvalidInput(
                f"params.inputResponses.{event_id} must be the answer to its form:{ANSWER_SHAPE}"
            )
        answers[event_id] = given
    takings = [
        await _check(hub, agent, event_id, given, session_id) for event_id, given in answers.items()
    ]
    notes = [await _take(hub, agent, taking, session_id) for taking in takings]
    return asked.event_ids, notes


@dataclass(frozen=True)
class _Taking:
    """One answer, checked: what taking it does."""

    event_id: str
    event: Event | None
    """None: the event was answered or acknowledged meanwhile."""
    action: str
    reply: tuple[str, dict[str, Any] | None] | None
    """The reply's text and data, for an accepted form."""


async def _check(
    hub: Hub, agent: Agent, event_id: str, given: types.ElicitResult | None, session_id: str
) -> _Taking:
    event = await hub.find_event(event_id)
    if event is None or event.agent_id != agent.id or not event.status.is_open:
        # Answered or acknowledged meanwhile (a state given back twice, among others).
        return _Taking(event_id, None, "cancel", None)
    action = given.action if given is not None else "cancel"
    if action != "accept":
        return _Taking(event_id, event, action, None)
    assert given is not None
    content = dict(given.content) if given.content is not None else None
    try:
        reply = await check_answer(
            hub, agent, event_id, FormAnswer(action, content), f"session {session_id}"
        )
    except InvalidInput as exc:
        raise InvalidInput(
            f"params.inputResponses.{event_id} cannot be the reply to event {event_id}:"
            f" {exc.message}. No answer was taken: send a smaller answer to its form, or"
            ' "decline" to leave the event pending'
        ) from exc
    return _Taking(event_id, event, action, reply)


async def _take(hub: Hub, agent: Agent, taking: _Taking, session_id: str) -> str:
    event, event_id = taking.event, taking.event_id
    if event is None:
        return f"Event {event_id} was already handled; this answer to its form was not used."
    if taking.reply is not None:
        await hub.record_attempts(
            [Attempt(event_id, hub.now(), MECHANISM, "delivered", session_id)]
        )
        await hub.reply(agent, event_id, *taking.reply)
        return f"Your answer to event {event_id} ({render.headline(event)}) is its reply."
    error = "the form was declined" if taking.action == "decline" else "the form was not answered"
    await hub.record_attempts(
        [Attempt(event_id, hub.now(), MECHANISM, "failed", session_id, error)]
    )
    return (
        f"Event {event_id} ({render.headline(event)}): {error}; it stays pending. Answer it with"
        f" reply (event_id {event_id}), or ack it."
    )
