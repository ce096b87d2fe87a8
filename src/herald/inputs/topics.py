"""What the operator and agents send about topics: a topic's description (``PUT
/v1/topics/{name}``), an agent's subscription (``POST /channel/topics``, the ``subscribe`` MCP
tool), and the names and globs in routes' paths, each checked with the words that say what to
send."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar

from pydantic import Field

from herald.errors import InvalidInput
from herald.inputs.event_types import MAX_DESCRIPTION_CHARS, Description
from herald.inputs.fields import whole
from herald.inputs.refusals import Input, Says
from herald.validation import TOPIC_PATTERN

TOPIC_GLOB_PATTERN = re.compile(r"[A-Za-z0-9_.:/*?-]{1,128}")
"""A topic's name (``validation.TOPIC_PATTERN``) that may hold * and ?."""
NAME_RULE = "1-128 letters, digits and _ . : / - (for example repo/herald)"
ROUTE_WORD = "subscribers"
"""The word after a topic's name in the routes of its subscribers."""
GLOB_RULE = f"a topic's name ({NAME_RULE}), or a glob of names with * for any run and ? for one"

TopicName = Annotated[
    str, Field(pattern=whole(TOPIC_PATTERN)), Says(f"must be a topic's name of {NAME_RULE}")
]
TopicGlob = Annotated[
    str,
    Field(pattern=whole(TOPIC_GLOB_PATTERN)),
    Says(f"must be {GLOB_RULE}, such as repo/*"),
]


TopicDescription = Annotated[
    Description,
    # An event type's words ("what an event of this type means") would mislead here.
    Says(
        f"must be a string of 1-{MAX_DESCRIPTION_CHARS} characters saying what the topic's"
        " events are about"
    ),
]


class TopicInput(Input):
    """``PUT /v1/topics/{name}``: what the topic is for (the name is the route's)."""

    where: ClassVar[str] = "topic"
    shape: ClassVar[str] = 'a JSON object such as {"description": "pushes to herald\'s repo"}'

    description: TopicDescription


class TopicSubscribeInput(Input):
    """``POST /channel/topics`` and the ``subscribe`` tool: the topic, or a glob of topics, the
    agent subscribes to."""

    where: ClassVar[str] = "subscription"
    shape: ClassVar[str] = 'a JSON object such as {"topic": "repo/*"}'

    topic: Annotated[
        TopicGlob,
        Field(description="a topic's name, or a glob of names (* any run, ? one character)"),
    ]


class TopicsInput(Input):
    """The ``topics`` tool: no arguments."""

    where: ClassVar[str] = "arguments"


def is_glob(pattern: str) -> bool:
    """Whether a subscription's pattern is a glob rather than one topic's name."""
    return "*" in pattern or "?" in pattern


def check_topic_name(name: str, where: str = "topic") -> str:
    """A topic's name as a route or a publish gives it.

    Raises:
        InvalidInput: it is not one; the message says what a name holds.
    """
    if TOPIC_PATTERN.fullmatch(name) is None:
        raise InvalidInput(f"{where} {name!r} must be a topic's name of {NAME_RULE}")
    if ROUTE_WORD in name.split("/")[1:]:
        # /v1/topics/{name}/subscribers names a topic's subscribers: such a topic would be
        # out of reach of its own routes.
        raise InvalidInput(f"{where} {name!r} must not have {ROUTE_WORD!r} after a '/'")
    return name


def check_topic_glob(pattern: str, where: str = "topic") -> str:
    """A subscription's pattern as a route gives it.

    Raises:
        InvalidInput: it is neither a topic's name nor a glob of them.
    """
    if TOPIC_GLOB_PATTERN.fullmatch(pattern) is None:
        raise InvalidInput(f"{where} {pattern!r} must be {GLOB_RULE}, such as repo/*")
    return pattern
