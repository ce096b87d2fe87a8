"""Events cursors: a position in one agent's events, sent to the client as an opaque string.

A cursor names its agent, so that one agent's cursor sent by another is refused rather than
read as a position in the wrong inbox; the position is the agent's ``seq``, the same one a
heartbeat cursor counts, so a cursor acknowledges exactly as a heartbeat cursor does.
"""

from __future__ import annotations

from herald.errors import InvalidInput
from herald.models import Agent

SEPARATOR = "~"
HELP = "send null to start, or the cursor of your last answer"


def encode(agent: Agent, seq: int) -> str:
    return f"{agent.id}{SEPARATOR}{seq}"


def decode(cursor: str, agent: Agent) -> int:
    """The seq a cursor of ``agent`` stands for.

    Raises:
        InvalidInput: not a cursor herald gave, or a cursor of another agent.
    """
    owner, _, seq = cursor.rpartition(SEPARATOR)
    if not owner or not seq.isascii() or not seq.isdigit() or len(seq) > 19:
        raise InvalidInput(f"params.cursor {cursor[:80]!r} is not a cursor herald gave: {HELP}")
    if owner != agent.id:
        raise InvalidInput(f"params.cursor belongs to another agent: {HELP}")
    return int(seq)
