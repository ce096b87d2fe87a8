"""What the admin asks of ``GET /v1/stream``: which items (an agent, event types), where to go
on from (the id of the last item received, as ``Last-Event-ID`` or ``?after=``), and how many
items a second at most."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field

from herald.feed import FeedResume
from herald.inputs.listing import AgentName, TypeFilter, whole_number
from herald.inputs.refusals import Input, Says, refuse

AFTER = (
    " must be the id of an item of this stream, as it was sent (it is also read from the"
    " Last-Event-ID header); leave it out to start from now"
)


def _cursor(value: Any) -> FeedResume:
    cursor = FeedResume.parse(value) if isinstance(value, str) else None
    if cursor is None:
        raise refuse(AFTER)
    return cursor


After = Annotated[
    FeedResume, BeforeValidator(_cursor, json_schema_input_type=str), Says(AFTER.strip())
]


MAX_RATE = 10_000
MaxRate = Annotated[
    int,
    Field(ge=1, le=MAX_RATE),
    BeforeValidator(whole_number),
    Says(f"must be a whole number of items a second, from 1 to {MAX_RATE:,}"),
]


class FeedInput(Input):
    """``GET /v1/stream``'s query parameters (``after`` from ``Last-Event-ID`` when it is sent)."""

    where: ClassVar[str] = "query"
    item: ClassVar[str] = "parameter"

    agent: AgentName | None = None
    type: TypeFilter | None = None
    after: After | None = None
    max_rate: MaxRate | None = None
    """The most items a second this client wants (a person reading, rather than a program):
    when more happen, it is sent the newest and a ``skipped`` item for the rest."""
