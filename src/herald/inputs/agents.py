"""What the admin sends about agents: a new agent, its delivery overrides, its webhook or
OpenClaw target, a new signing secret, a new key."""

from __future__ import annotations

import json
from typing import Annotated, ClassVar, Literal

from pydantic import Field

from herald.inputs.fields import MAX_ACK_TIMEOUT_S, MAX_GRACE_S, Handle, NullRefused, Secret, Url
from herald.inputs.refusals import Input, Says
from herald.inputs.subscriptions import MAX_GLOBS, TypeGlob

DEFAULT_ROTATION_GRACE_S = 24 * 3600
MAX_KEY_GRACE_S = 7 * 86400
OpenClawMode = Literal["wake", "agent"]

Switch = Annotated[bool | None, NullRefused, Says("must be true or false")]
AckTimeout = Annotated[
    Annotated[int, Field(ge=1, le=MAX_ACK_TIMEOUT_S)]
    | Annotated[float, Field(ge=1, le=MAX_ACK_TIMEOUT_S)]
    | None,
    NullRefused,
    Says(f"must be a number of seconds from 1 to {MAX_ACK_TIMEOUT_S}"),
]
Grace = Annotated[
    Annotated[int, Field(ge=0, le=MAX_GRACE_S)] | Annotated[float, Field(ge=0, le=MAX_GRACE_S)],
    Says("must be a number of seconds from 0 to 30 days"),
]

KeyGrace = Annotated[
    Annotated[int, Field(ge=0, le=MAX_KEY_GRACE_S)]
    | Annotated[float, Field(ge=0, le=MAX_KEY_GRACE_S)],
    Says(
        f"must be a number of seconds from 0 (the old key stops at once) to {MAX_KEY_GRACE_S}"
        " (7 days)"
    ),
]


class DeliveryOverrides(Input):
    """An agent's own say on how it is reached: ways switched on or off, its ack timeout. Only
    the keys given override (``herald.capabilities.apply_overrides``)."""

    where: ClassVar[str] = "delivery"
    shape: ClassVar[str] = 'an object such as {"channel": true, "ack_timeout_s": 120}'
    item: ClassVar[str] = "key"

    channel: Switch = None
    elicitation: Switch = None
    stream: Switch = None
    log: Switch = None
    ack_timeout_s: AckTimeout = None

    def to_json(self) -> str:
        """The keys given, as JSON for the store."""
        return json.dumps(self.model_dump(exclude_unset=True), separators=(",", ":"))


class PreferencesInput(Input):
    """An agent's own rules for what is pushed to it (``PATCH /v1/agents/{id}``'s
    ``preferences``, ``PUT /channel/preferences``): they replace the ones set before whole; a
    key left out is no rule."""

    where: ClassVar[str] = "preferences"
    shape: ClassVar[str] = 'an object such as {"muted": ["ci.*", "build.succeeded"]}'
    item: ClassVar[str] = "key"

    muted: Annotated[
        list[TypeGlob] | None,
        Field(
            max_length=MAX_GLOBS,
            description="event types (or globs of them) never pushed: kept, and drained",
        ),
        NullRefused,
        Says(f"must be a list of at most {MAX_GLOBS} event types or globs (such as ci.*)"),
    ] = None

    def to_json(self) -> str:
        """The keys given, as JSON for the store."""
        return json.dumps(self.model_dump(exclude_unset=True), separators=(",", ":"))


class PreferencesToolInput(Input):
    """The MCP ``preferences`` tool: read the agent's preferences, or replace them (``set``)."""

    where: ClassVar[str] = "arguments"

    set: Annotated[
        PreferencesInput | None,
        Field(description="the new preferences, replacing the old whole; leave out to read"),
    ] = None


class NewAgentInput(Input):
    """``POST /v1/agents``."""

    where: ClassVar[str] = "agent"

    handle: Annotated[Handle, Says("must be 1-64 characters of a-z, 0-9, _ and -")]
    webhook_url: Url | None = None
    delivery: DeliveryOverrides | None = None


LoopLimit = Annotated[
    int | None, Field(ge=1, le=1_000_000), Says("must be a whole number from 1 to 1000000")
]


class LoopGuardInput(Input):
    """An agent's own loop guard limits (``herald.loop_guard``); each key not given, or null,
    is the serve-wide one."""

    where: ClassVar[str] = "loop_guard"
    shape: ClassVar[str] = 'an object such as {"exchanges": 40, "window_s": 600, "per_minute": 60}'
    item: ClassVar[str] = "key"

    exchanges: LoopLimit = None
    window_s: LoopLimit = None
    per_minute: LoopLimit = None


class DeliveryInput(Input):
    """``PATCH /v1/agents/{id}``: replace the agent's delivery overrides, its preferences, its
    loop guard limits, or several of them (at least one)."""

    where: ClassVar[str] = "agent"

    delivery: DeliveryOverrides | None = None
    preferences: PreferencesInput | None = None
    loop_guard: LoopGuardInput | None = None


class WebhookInput(Input):
    """``PUT /v1/agents/{id}/webhook``: where to POST, and the signing secret (generated if not
    given)."""

    where: ClassVar[str] = "webhook"

    url: Url
    secret: Secret | None = None


class OpenClawInput(Input):
    """``PUT /v1/agents/{id}/openclaw``: an OpenClaw gateway to wake the agent through."""

    where: ClassVar[str] = "openclaw"

    url: Url
    token: Annotated[
        str, Field(min_length=1), Says("must be the gateway's hooks token, a non-empty string")
    ]
    mode: Annotated[
        OpenClawMode,
        Says('must be "wake" (a nudge to drain) or "agent" (the event as a turn)'),
    ] = "wake"


class RotationInput(Input):
    """``POST /v1/agents/{id}/webhook/rotate``: a new signing secret (generated if not given);
    the old one keeps signing for ``grace_s``."""

    where: ClassVar[str] = "rotation"

    grace_s: Grace = DEFAULT_ROTATION_GRACE_S
    secret: Secret | None = None


class KeyRotationInput(Input):
    """``POST /v1/agents/{id_or_handle}/rotate-key``: a new agent key; the old one keeps working
    for ``grace_s`` (by default it stops at once)."""

    where: ClassVar[str] = "rotation"

    grace_s: KeyGrace = 0
