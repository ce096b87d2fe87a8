"""What one session can take, worked out once when it connects.

Declared capabilities decide (elicitation form and url, the event stream); a table of known
client profiles fills only what no handshake says (Claude Code does not announce channels); the
agent's own delivery overrides have the last word. A client that changes with an update changes
one row of ``CLIENT_PROFILES``, not code.

Whether anything can be pushed at all is not the client's declaration but its connection's: the
session's peer says which push paths it offers (``herald.delivery.base.Peer``).
"""

from __future__ import annotations

import fnmatch
import hashlib
from dataclasses import dataclass, replace
from typing import Any

from herald.config import DEFAULTS
from herald.inputs.agents import DeliveryOverrides
from herald.inputs.refusals import parse

LEGACY_VERSIONS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
"""Protocol versions negotiated with ``initialize``: a session in which the server may push at
any time (``herald.mcp.peer.push_paths_for``)."""

STREAM_CAPABILITY = "herald/events"
"""An ``experimental`` client capability: the client shows ``notifications/herald/event``."""


WEBHOOK_ID_EVENT = "event"
"""A delivery's ``webhook-id`` is the event's id (``eventId``), the same on every retry: what the
AI SDK's webhook handler and ChatGPT check today."""
WEBHOOK_ID_MESSAGE = "message"
"""A delivery's ``webhook-id`` is an id of its own (``msg_...``), the same on every retry of it:
what a later text of the Events extension may ask for."""
WEBHOOK_IDS = (WEBHOOK_ID_EVENT, WEBHOOK_ID_MESSAGE)


def delivery_webhook_id(kind: str, subscription_id: str, event_id: str) -> str:
    """The ``webhook-id`` of the delivery of an event to a subscription, of ``kind`` (one of
    ``WEBHOOK_IDS``). A message's own id is derived from both ids, so that every retry of it
    carries the same one, as Standard Webhooks asks, with nothing stored."""
    if kind != WEBHOOK_ID_MESSAGE:
        return event_id
    digest = hashlib.sha256(f"{subscription_id}:{event_id}".encode()).hexdigest()
    return f"msg_{digest[:32]}"


ERROR_CODES_SEP = "sep"
"""The Events extension's error codes, -32023..-32027."""
ERROR_CODES_SKETCH = "sketch"
"""The codes of the extension's earlier design sketch, -32011..-32016, for clients built on it."""


@dataclass(frozen=True)
class EventsProfile:
    """What a client of the MCP Events extension checks that its requests do not say. Both
    capability keys (``events`` and ``extensions["io.modelcontextprotocol/events"]``) are
    advertised to every client, whichever it reads."""

    webhook_id: str = WEBHOOK_ID_EVENT
    """The ``webhook-id`` of its subscriptions' event deliveries (``WEBHOOK_IDS``); control
    envelopes always carry one of their own."""
    error_codes: str = ERROR_CODES_SEP
    """Which band the codes of its ``events/*`` errors are in: ``sep`` or ``sketch``."""


DEPLOYED = EventsProfile()
"""What the deployed clients of the extension check (the default of every profile)."""


@dataclass(frozen=True)
class ClientProfile:
    """What a known client does that its handshake does not say. ``None`` leaves it to the
    handshake."""

    channel: bool | None = None
    elicitation: bool | None = None
    era: str | None = None
    """The protocol era to keep it on when it probes with ``server/discover``: ``legacy`` (the
    probe is refused, so that it falls back to ``initialize``), or None: 2026-07-28."""
    events: EventsProfile = DEPLOYED
    """What it checks of the Events extension (docs/mcp.md lists each known client's, and how
    it is known)."""
    note: str = ""


CLIENT_PROFILES: dict[str, ClientProfile] = {
    "claude-code": ClientProfile(
        channel=True,
        era="legacy",
        note="shows <channel> tags when started with --channels, on the legacy era only",
    ),
    "local-agent-mode-*": ClientProfile(
        channel=False, note="Claude desktop Code tab: no elicitation"
    ),
    "Visual Studio Code": ClientProfile(note="shows elicitation forms"),
    "cursor-vscode": ClientProfile(note="declares elicitation {} (form only)"),
    "codex-mcp-client*": ClientProfile(
        elicitation=False, note="has auto-declined elicitations: do not count on a human"
    ),
    "ai-sdk-mcp-client": ClientProfile(
        note="the AI SDK's MCP client (its default name): reads the top-level events"
        " capability, its webhook handler refuses a delivery whose webhook-id is not its eventId"
    ),
    "openai-mcp": ClientProfile(
        note="ChatGPT's connectors (the name public captures show): webhook subscriptions,"
        " reported to read the top-level events capability and to check webhook-id = eventId"
    ),
}


MCP_LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""MCP's log levels (RFC 5424), least severe first."""
LOG_NOTICE = "notice"
"""The level herald's log deliveries are sent at."""


@dataclass(frozen=True)
class DeliveryCapabilities:
    """The ways herald can reach one session, richest first in the cascade."""

    transport: str
    protocol_version: str
    client_name: str | None = None
    client_version: str | None = None
    channel: bool = False
    elicitation_form: bool = False
    elicitation_url: bool = False
    stream: bool = False
    log: bool = False
    log_level: str | None = None
    """The least severe log level the client asked for (``logging/setLevel``); None: any."""
    ack_timeout_s: float = DEFAULTS.delivery.ack_timeout_s

    @property
    def era(self) -> str:
        return "legacy" if self.protocol_version in LEGACY_VERSIONS else "modern"

    def logs(self, level: str = LOG_NOTICE) -> bool:
        """Whether a log message at ``level`` may be sent: the client reads logs and did not ask
        for more severe ones only."""
        if not self.log:
            return False
        return self.log_level is None or MCP_LOG_LEVELS.index(level) >= MCP_LOG_LEVELS.index(
            self.log_level
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "transport": self.transport,
            "protocol_version": self.protocol_version,
            "era": self.era,
            "client": {"name": self.client_name, "version": self.client_version},
            "channel": self.channel,
            "elicitation": {"form": self.elicitation_form, "url": self.elicitation_url},
            "stream": self.stream,
            "log": self.log,
            "log_level": self.log_level,
            "ack_timeout_s": self.ack_timeout_s,
        }


def profile_for(client_name: str | None) -> ClientProfile:
    if client_name:
        for pattern, profile in CLIENT_PROFILES.items():
            if fnmatch.fnmatchcase(client_name, pattern):
                return profile
    return ClientProfile()


def detect(
    *,
    transport: str,
    protocol_version: str,
    client_info: dict[str, Any] | None,
    client_capabilities: dict[str, Any] | None,
    overrides: dict[str, Any] | None = None,
) -> DeliveryCapabilities:
    """Work out what a session can take from its handshake (wire-shaped dicts, camelCase).

    This is what the client declared, whatever its era; whether its connection can carry a push
    is its peer's to say (on a 2026-07-28 connection nothing can be pushed today: the session is
    served by its tool calls and its events wait in the store).
    """
    info = client_info or {}
    declared = client_capabilities or {}
    profile = profile_for(info.get("name"))
    caps = DeliveryCapabilities(
        transport=transport,
        protocol_version=protocol_version,
        client_name=info.get("name"),
        client_version=info.get("version"),
    )
    elicitation = declared.get("elicitation")
    if isinstance(elicitation, dict):
        # {} means form only (the 2025-06-18 reading); otherwise each mode is declared.
        form = "form" in elicitation or "url" not in elicitation
        url = "url" in elicitation
    else:
        form = url = False
    if profile.elicitation is False:
        form = url = False
    experimental = declared.get("experimental") or {}
    caps = replace(
        caps,
        channel=bool(profile.channel),
        elicitation_form=form,
        elicitation_url=url,
        stream=isinstance(experimental, dict) and STREAM_CAPABILITY in experimental,
        log=True,
    )
    return apply_overrides(caps, overrides or {})


def apply_overrides(caps: DeliveryCapabilities, overrides: dict[str, Any]) -> DeliveryCapabilities:
    """Switch ways on or off for one agent. A switched-on way still needs a push path, which
    only the session's connection (its peer) can offer."""
    changes: dict[str, Any] = {}
    if "ack_timeout_s" in overrides:
        changes["ack_timeout_s"] = float(overrides["ack_timeout_s"])
    for key in ("channel", "stream", "log"):
        if key in overrides:
            changes[key] = bool(overrides[key])
    if overrides.get("elicitation") is False:
        changes["elicitation_form"] = changes["elicitation_url"] = False
    elif overrides.get("elicitation") is True:
        changes["elicitation_form"] = True
    return replace(caps, **changes)


def parse_overrides(raw: Any) -> str:
    """Check an agent's delivery overrides and return them as JSON for the store.

    Raises:
        InvalidInput: an unknown key or a wrong type, named.
    """
    return parse(DeliveryOverrides, raw).to_json()
