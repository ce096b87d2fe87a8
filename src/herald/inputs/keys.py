"""What the admin sends about publisher keys: a new key, with its scopes and, if it is to be
narrower than every agent and every type, the handles and event types it may publish; and the
senders it may name in an event's ``from`` (none unless listed)."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal, get_args

from pydantic import Field

from herald.inputs.fields import GLOB_RULE, Handle, whole
from herald.inputs.refusals import Input, Says
from herald.inputs.subscriptions import MAX_GLOBS, TypeGlob
from herald.inputs.topics import GLOB_RULE as TOPIC_GLOB_RULE
from herald.inputs.topics import TopicGlob

Scope = Literal["publish"]
SCOPES: tuple[str, ...] = get_args(Scope)
"""Every scope a publisher key may have: only publishing, today."""
PUBLISH = "publish"
MAX_NAME_CHARS = 128
MAX_HANDLES = 100
SENDER_GLOB_PATTERN = re.compile(r"[a-z0-9_*?-]{1,64}")
"""A handle, with ``*`` for any run of its characters and ``?`` for one."""

SenderGlob = Annotated[
    str,
    Field(pattern=whole(SENDER_GLOB_PATTERN)),
    Says("must be an agent handle or a glob of handles (a-z, 0-9, _ -, * and ?)"),
]

Scopes = Annotated[
    list[Scope],
    Field(min_length=1, max_length=len(SCOPES)),
    Says(f'must be a list of scopes, each one of: {", ".join(SCOPES)} (for example ["publish"])'),
]


class NewPublisherKeyInput(Input):
    """``POST /v1/keys``."""

    where: ClassVar[str] = "key"

    name: Annotated[
        str,
        Field(min_length=1, max_length=MAX_NAME_CHARS),
        Says(f"must be 1-{MAX_NAME_CHARS} characters saying who publishes with the key"),
    ]
    scopes: Scopes
    handles: (
        Annotated[
            list[Handle],
            Field(min_length=1, max_length=MAX_HANDLES),
            Says(
                f"must be a list of 1-{MAX_HANDLES} agent handles the key may publish to, or"
                " left out for every agent"
            ),
        ]
        | None
    ) = None
    senders: Annotated[
        list[SenderGlob],
        Field(max_length=MAX_HANDLES),
        Says(
            f"must be a list of at most {MAX_HANDLES} handles (or globs such as ci-*) the key"
            ' may name as an event\'s "from", the agent that gets the replies; ["*"] for any,'
            " left out for none"
        ),
    ] = Field(default_factory=list)
    types: (
        Annotated[
            list[TypeGlob],
            Field(min_length=1, max_length=MAX_GLOBS),
            Says(
                f"must be a list of 1-{MAX_GLOBS} event-type globs the key may publish, of"
                f' {GLOB_RULE} (for example ["build.*"]), or left out for every type'
            ),
        ]
        | None
    ) = None
    topics: (
        Annotated[
            list[TopicGlob],
            Field(min_length=1, max_length=MAX_GLOBS),
            Says(
                f"must be a list of 1-{MAX_GLOBS} topics the key may publish to, each"
                f' {TOPIC_GLOB_RULE} (for example ["repo/*"]), or left out; a key limited to'
                " topics publishes to no agent directly unless handles are listed too"
            ),
        ]
        | None
    ) = None
