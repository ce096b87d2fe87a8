"""What an MCP Events client sends: the params of ``events/*`` and the arguments of each entry of
herald's event catalogue. The SEP's params are camelCase on the wire; so are these models'."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, Field, model_validator

from herald.endpoint_checks import check_subscription_secret
from herald.inputs.fields import GLOB_RULE, TYPE_GLOB_PATTERN, Handle, Limit, NullIsDefault, whole
from herald.inputs.refusals import Input, Says, refuse, refused_by

MAX_GLOBS = 20
MAX_NAME_CHARS = 256
MAX_CURSOR_CHARS = 256
MAX_AGE_MS = 366 * 86_400_000

TypeGlob = Annotated[
    str,
    Field(pattern=whole(TYPE_GLOB_PATTERN)),
    Says(f"must be an event-type glob of {GLOB_RULE} (for example dm.* or build.failed)"),
]


class DeclaredTypeArguments(Input):
    """The arguments of a subscription to one declared event type."""

    where: ClassVar[str] = "arguments"
    item: ClassVar[str] = "argument"

    sender: Handle | None = Field(
        default=None, alias="from", description="only events sent by this agent handle"
    )


class HeraldEventArguments(DeclaredTypeArguments):
    """The arguments of ``herald.event``: which of the agent's events, by type and sender."""

    types: (
        Annotated[
            list[TypeGlob],
            Field(
                min_length=1,
                max_length=MAX_GLOBS,
                description="only events whose type matches one of these globs (* and ?)",
            ),
            Says(
                f"must be a list of 1-{MAX_GLOBS} event-type globs of {GLOB_RULE}"
                ' (for example ["dm.*"])'
            ),
        ]
        | None
    ) = None


EventName = Annotated[
    str,
    Field(min_length=1, max_length=MAX_NAME_CHARS),
    Says(
        f"must be the name of an entry of events/list (herald.event, or a declared type),"
        f" 1-{MAX_NAME_CHARS} characters"
    ),
]
Arguments = Annotated[
    dict[str, Any], NullIsDefault, Says("must be an object of the entry's arguments")
]
EventsCursor = Annotated[
    str,
    Field(min_length=1, max_length=MAX_CURSOR_CHARS),
    Says("must be a cursor an earlier answer gave, or null to start"),
]
MaxAge = Annotated[
    int,
    Field(ge=0, le=MAX_AGE_MS),
    Says(f"must be a number of milliseconds from 0 to {MAX_AGE_MS}"),
]


Meta = Annotated[dict[str, Any], Says("must be an object: the request's metadata")]


class ListInput(Input):
    """``events/list``: one page of the catalogue."""

    where: ClassVar[str] = "params"

    cursor: Annotated[str, Says("must be the nextCursor of an earlier page")] | None = None
    meta: Meta | None = Field(default=None, alias="_meta")


class StreamInput(Input):
    """``events/stream``: acknowledge up to a cursor, then have what comes after it pushed."""

    where: ClassVar[str] = "params"

    name: EventName
    arguments: Arguments = Field(default_factory=dict)
    cursor: EventsCursor | None = None
    max_age_ms: MaxAge | None = Field(default=None, alias="maxAgeMs")
    meta: Meta | None = Field(default=None, alias="_meta")


class PollInput(StreamInput):
    """``events/poll``: acknowledge up to a cursor, and read what comes after it."""

    max_events: Limit | None = Field(default=None, alias="maxEvents")


MAX_URL_CHARS = 2048
CallbackUrl = Annotated[
    str,
    Field(min_length=1, max_length=MAX_URL_CHARS),
    Says(f"must be the https URL to deliver to, at most {MAX_URL_CHARS} characters"),
]
SubscriptionSecret = Annotated[
    str,
    AfterValidator(lambda value: refused_by(check_subscription_secret, value, "secret")),
    Says("must be whsec_ followed by the standard base64 of 24-64 random bytes"),
]
DeliveryMode = Annotated[str, Says('must be "webhook" (or left out)')]
# Any whole number is taken (SEP-3415: a suggested TTL is never refused, only clamped to the
# operator's bounds); what is not a whole number is a client's mistake, refused.
TtlMs = Annotated[
    int,
    Says(
        "must be a whole number of milliseconds (herald grants it within its own minimum and"
        " maximum), or null for no expiry"
    ),
]


class WebhookDelivery(Input):
    """Where ``events/subscribe`` delivers: the client's https endpoint and the secret it
    verifies signatures with."""

    mode: DeliveryMode | None = None
    url: CallbackUrl
    secret: SubscriptionSecret


class SubscribeInput(StreamInput):
    """``events/subscribe``: have the entry's events POSTed to a webhook until ``refreshBefore``;
    subscribing again with the same name, arguments and URL refreshes it."""

    delivery: WebhookDelivery
    ttl_ms: TtlMs | None = Field(default=None, alias="ttlMs")

    @model_validator(mode="before")
    @classmethod
    def _no_max_events(cls, raw: Any) -> Any:
        # Said apart from the unknown fields: a client that polls too sends it, in good faith.
        if isinstance(raw, dict) and "maxEvents" in raw:
            raise refuse(
                ".maxEvents is not taken by events/subscribe: every matching event is POSTed as"
                " it comes (maxEvents pages events/poll); leave it out"
            )
        return raw

    @property
    def asks_no_expiry(self) -> bool:
        """``ttlMs: null`` was sent (left out is the server's default)."""
        return self.ttl_ms is None and "ttl_ms" in self.model_fields_set


class WebhookTarget(Input):
    """The endpoint of a webhook subscription, as ``events/unsubscribe`` names it."""

    mode: DeliveryMode | None = None
    url: CallbackUrl


class UnsubscribeInput(Input):
    """``events/unsubscribe``: end the webhook subscription of that name, arguments and URL."""

    where: ClassVar[str] = "params"

    name: EventName
    arguments: Arguments = Field(default_factory=dict)
    delivery: WebhookTarget
    meta: Meta | None = Field(default=None, alias="_meta")
