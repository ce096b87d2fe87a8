"""Positions in one agent's events, sent to the client as an opaque string: the cursor of
``events/poll`` and ``events/stream``, and the SSE id of ``GET /channel/stream``.

A position names its agent, so that one agent's position sent by another is refused rather than
read as a place in the wrong inbox; and the history of the store it was given in
(``Store.history``), because seqs are handed out again after a restore: a position from another
history is no place in this one, and whoever sends it gets every pending event again, told that
history was lost. The place itself is the agent's ``seq``, the same one a heartbeat cursor
counts, so a cursor acknowledges exactly as a heartbeat cursor does.

A position without a history (``agt_…~200``, given by herald before positions carried one) is
taken as one from another history: it may come from before a restore, and reading it as a place
could skip events without a word, where reading it as none costs a client at most events it saw
once more, told so.
"""

from __future__ import annotations

import re

from herald.errors import InvalidInput
from herald.models import Agent

SEPARATOR = "~"
HELP = "send null to start, or the cursor of your last answer"
HISTORY = re.compile(r"[0-9a-z]{1,64}")
"""A store's history as positions carry it (``Store.history`` is letters and digits)."""
POSITION = re.compile(rf"[^~\s]{{1,64}}(~{HISTORY.pattern})?~[0-9]{{1,18}}")
"""A position herald gives (or gave, before positions carried their history)."""


def encode(agent: Agent, history: str, seq: int) -> str:
    return position(agent.id, history, seq)


def position(agent_id: str, history: str, seq: int) -> str:
    return f"{agent_id}{SEPARATOR}{history}{SEPARATOR}{seq}"


def decode(
    cursor: str, agent: Agent, history: str, *, what: str = "params.cursor", fix: str = HELP
) -> int | None:
    """The seq a position of ``agent`` stands for in the store's ``history``; None when it was
    given in another history of the store (or in none that it says). ``what`` names where it
    came from, and ``fix`` what to send instead, in the error.

    Raises:
        InvalidInput: not a position herald gave, or one of another agent.
    """
    if not POSITION.fullmatch(cursor):
        raise InvalidInput(f"{what} {cursor[:80]!r} is not a cursor herald gave: {fix}")
    owner, *given, seq = cursor.split(SEPARATOR)
    if owner != agent.id:
        raise InvalidInput(f"{what} belongs to another agent: {fix}")
    return int(seq) if given == [history] else None
