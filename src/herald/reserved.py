"""The event types only herald itself sends, and the one of them an agent asks herald to make.

Agents read ``type`` to decide what an event is: a ``reply.received`` answers a question they
asked, a ``permission.request`` asks to allow a tool call. If any agent could send those types,
it could forge an answer or a prompt. So nobody publishes them (nor any ``herald.*`` type): not
an agent, not a publisher key, not the admin key (an application or a script holding it has no
need of them, and one that could forge them could make an agent allow a tool call it was never
asked about). A permission request is built by the hub from checked fields, never from someone's
text; a reply is made by the hub from an agent's answer. Nor may the operator declare them in
the event-type catalogue: herald describes its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from herald.errors import InvalidInput
from herald.models import NewEvent

REPLY_TYPE = "reply.received"
PERMISSION_TYPE = "permission.request"
RESERVED_TYPES = frozenset({REPLY_TYPE, PERMISSION_TYPE})
RESERVED_PREFIX = "herald."

# Claude Code's request ids: 5 letters a-z without l (so that none reads as a 1 or an I).
REQUEST_ID = re.compile(r"[a-km-z]{5}")
MAX_TOOL_NAME_CHARS = 256
MAX_DESCRIPTION_CHARS = 2000
MAX_INPUT_PREVIEW_CHARS = 2000
PERMISSION_FORM = {
    "type": "object",
    "properties": {"behavior": {"type": "string", "enum": ["allow", "deny"]}},
    "required": ["behavior"],
}


def is_reserved(type_: str) -> bool:
    """Whether only herald may send (and declare) the type, compared without regard to case."""
    lowered = type_.lower() if isinstance(type_, str) else ""
    return lowered in RESERVED_TYPES or lowered.startswith(RESERVED_PREFIX)


def refuse_reserved_type(type_: str, where: str = "message") -> None:
    """Refuse a type that only herald may send (compared without regard to case).

    Raises:
        InvalidInput: ``type_`` is reserved; the message lists what is.
    """
    if is_reserved(type_):
        reserved = ", ".join(sorted(RESERVED_TYPES))
        raise InvalidInput(
            f"{where}.type {type_!r} is reserved: only herald sends {reserved} and "
            f"{RESERVED_PREFIX}* events; use a type of your own, such as message.received"
        )


def refuse_reserved_types(events: Sequence[NewEvent]) -> None:
    """Refuse a publish that holds an event of a type only herald sends.

    Raises:
        InvalidInput: naming the first such event (``events[3]`` in a batch) and what is
            reserved.
    """
    if not any(map(is_reserved, {event.type for event in events})):
        return  # the usual publish: each type looked at once, not each event named
    for index, event in enumerate(events):
        refuse_reserved_type(event.type, f"events[{index}]" if len(events) > 1 else "event")


def refuse_reserved_declaration(name: str) -> None:
    """Refuse to declare a type of herald's own in the catalogue: herald describes those itself
    (``herald.event`` among them), and its own events must not be checked against an operator's
    schema.

    Raises:
        InvalidInput: ``name`` is reserved; the message lists what is.
    """
    if is_reserved(name):
        reserved = ", ".join(sorted(RESERVED_TYPES))
        raise InvalidInput(
            f"event type name {name!r} is reserved: herald declares its own types ({reserved}"
            f" and {RESERVED_PREFIX}*, such as herald.event); choose a name of your own, such"
            " as build.failed"
        )
