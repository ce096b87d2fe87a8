"""What the admin sends about agents: a new agent, its delivery overrides, its webhook or
OpenClaw target, a new signing secret, a new key."""

from __future__ import annotations

import functools
import json
import zoneinfo
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from herald.inputs.fields import MAX_ACK_TIMEOUT_S, MAX_GRACE_S, Handle, NullRefused, Secret, Url
from herald.inputs.refusals import Input, Says, refuse
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


ClockTime = Annotated[
    str,
    Field(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$"),
    Says('must be a time of day as "HH:MM", from "00:00" to "23:59"'),
]
MAX_DIGESTS = 20
MAX_DIGEST_WINDOW_S = 86_400


@functools.cache
def _zone_names() -> frozenset[str]:
    """The zones' names the zone database lists. ``ZoneInfo`` also opens files of its folder
    that name no zone: ``localtime`` is this machine's own zone (processes of one store on
    machines set differently would disagree on its hours), ``posixrules`` and ``right/...``
    are the database's own files."""
    return frozenset(zoneinfo.available_timezones() - {"localtime"})


def _known_zone(name: str) -> str:
    """An IANA time zone's name, refused with the name when the zone database has none."""
    try:
        zoneinfo.ZoneInfo(name)
        if name not in _zone_names():
            raise KeyError(name)
    except (KeyError, ValueError, OSError):  # not found, not a key, not a readable zone
        raise refuse(
            f" {name!r} is no IANA time zone herald knows: give one such as Europe/Berlin,"
            " America/New_York or UTC"
        ) from None
    return name


class QuietHoursInput(Input):
    """No push but urgent between ``start`` and ``end`` on the wall clock of ``zone``, then one
    summary of what arrived (``herald.push_windows``)."""

    where: ClassVar[str] = "quiet_hours"
    shape: ClassVar[str] = (
        'an object such as {"zone": "Europe/Berlin", "start": "22:00", "end": "07:00"}'
    )
    item: ClassVar[str] = "key"

    zone: Annotated[
        str,
        Field(min_length=1, max_length=64, description="an IANA time zone, such as Europe/Berlin"),
        Says("must be an IANA time zone's name, such as Europe/Berlin"),
        AfterValidator(_known_zone),
    ]
    start: Annotated[ClockTime, Field(description='when they begin, "HH:MM" (such as "22:00")')]
    end: Annotated[
        ClockTime, Field(description='when they end, "HH:MM"; before start: the next day')
    ]

    @model_validator(mode="after")
    def _not_empty(self) -> QuietHoursInput:
        if self.start == self.end:
            raise refuse(
                f" starts and ends at {self.start}: give an end other than the start"
                ' (before it for hours across midnight, such as "22:00" to "07:00")'
            )
        return self


class DigestInput(Input):
    """Events of ``types`` in bursts: the first pushed, the rest of ``window_s`` seconds summed
    up in one push at the window's end (``herald.push_windows``)."""

    where: ClassVar[str] = "digest"
    shape: ClassVar[str] = 'an object such as {"types": ["ci.*"], "window_s": 600}'
    item: ClassVar[str] = "key"

    types: Annotated[
        list[TypeGlob],
        Field(min_length=1, max_length=MAX_GLOBS, description="event types (or globs of them)"),
        Says(f"must be a list of 1-{MAX_GLOBS} event types or globs (such as ci.*)"),
    ]
    window_s: Annotated[
        int,
        Field(ge=1, le=MAX_DIGEST_WINDOW_S, description="how long a burst's window lasts"),
        Says(f"must be a whole number of seconds from 1 to {MAX_DIGEST_WINDOW_S} (a day)"),
    ]


class PreferencesInput(Input):
    """An agent's own rules for what is pushed to it (``PATCH /v1/agents/{id}``'s
    ``preferences``, ``PUT /channel/preferences``): they replace the ones set before whole; a
    key left out is no rule."""

    where: ClassVar[str] = "preferences"
    shape: ClassVar[str] = (
        'an object such as {"muted": ["ci.*"], "quiet_hours": {"zone": "Europe/Berlin",'
        ' "start": "22:00", "end": "07:00"}, "digests": [{"types": ["build.*"], "window_s": 600}]}'
    )
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
    quiet_hours: Annotated[
        QuietHoursInput | None,
        Field(description="no push but urgent meanwhile; then one summary push"),
        NullRefused,
    ] = None
    digests: Annotated[
        list[DigestInput] | None,
        Field(
            max_length=MAX_DIGESTS,
            description="bursts of these types: the first pushed, the rest summed up in one push",
        ),
        NullRefused,
        Says(
            f'must be a list of at most {MAX_DIGESTS} digests such as {{"types": ["ci.*"],'
            ' "window_s": 600}'
        ),
    ] = None

    def to_json(self) -> str:
        """The keys given, as JSON for the store (an empty list of digests is no rule)."""
        given = self.model_dump(exclude_unset=True)
        if not given.get("digests", True):
            del given["digests"]
        return json.dumps(given, separators=(",", ":"))


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
