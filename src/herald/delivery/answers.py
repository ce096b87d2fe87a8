"""An accepted form is the agent's reply: the same whether the form was pushed to a 2025-era
session (the cascade's elicitation) or returned by a 2026-07-28 ``inbox`` call (input
required)."""

from __future__ import annotations

import logging
from typing import Any

from herald.delivery.base import FormAnswer
from herald.errors import InvalidInput
from herald.hub import Hub
from herald.models import Agent, Reply

log = logging.getLogger("herald.delivery")


async def reply_with(
    hub: Hub, agent: Agent, event_id: str, answer: FormAnswer, where: str
) -> Reply:
    """Record an accepted ``answer`` as the agent's reply to the event (which acknowledges it),
    as ``check_answer`` shapes it.

    Raises:
        NotFound: the event is not one of the agent's own.
        InvalidInput: the answer cannot be a reply even as text (too large, among others).
    """
    text, data = await check_answer(hub, agent, event_id, answer, where)
    return await hub.reply(agent, event_id, text, data)


async def check_answer(
    hub: Hub, agent: Agent, event_id: str, answer: FormAnswer, where: str
) -> tuple[str, dict[str, Any] | None]:
    """The text and data an accepted ``answer`` is recorded with, checked, nothing changed.
    Content that does not fit the form (a client that did not check it) is kept as the reply's
    text only, not passed on as data the sender would misread; ``where`` names the answering
    session in the log.

    Raises:
        NotFound: the event is not one of the agent's own.
        InvalidInput: the answer cannot be a reply even as text (too large, among others).
    """
    text = answer_text(answer)
    try:
        await hub.check_reply(agent, event_id, text, answer.content)
        return text, answer.content
    except InvalidInput as exc:
        log.warning("%s answered %s off its form: %s", where, event_id, exc)
    await hub.check_reply(agent, event_id, text, None)
    return text, None


def answer_text(answer: FormAnswer) -> str:
    fields = ", ".join(f"{key}={value}" for key, value in (answer.content or {}).items())
    return f"answered the form: {fields}" if fields else "answered the form"
