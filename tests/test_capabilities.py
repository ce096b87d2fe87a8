"""Capability detection against recorded and documented client handshakes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from herald.capabilities import (
    CLIENT_PROFILES,
    ERROR_CODES_SEP,
    ERROR_CODES_SKETCH,
    WEBHOOK_ID_EVENT,
    WEBHOOK_ID_MESSAGE,
    WEBHOOK_IDS,
    DeliveryCapabilities,
    EventsProfile,
    delivery_webhook_id,
    detect,
    parse_overrides,
    profile_for,
)
from herald.config import DEFAULTS
from herald.delivery.base import EVERY_PUSH_PATH, NO_PUSH_PATH
from herald.errors import InvalidInput
from herald.mcp.peer import push_paths_for

RECORDED = Path(__file__).resolve().parent / "data" / "clients"


def recorded(name: str) -> dict[str, Any]:
    return json.loads((RECORDED / name).read_text())


def from_initialize(message: dict[str, Any], **overrides: Any) -> Any:
    params = message["params"]
    return detect(
        transport="stdio",
        protocol_version=params["protocolVersion"],
        client_info=params["clientInfo"],
        client_capabilities=params["capabilities"],
        overrides=overrides,
    )


def test_claude_code_gets_channel_and_forms_on_the_legacy_era() -> None:
    caps = from_initialize(recorded("claude-code-2.1.328.initialize.json"))
    assert caps.era == "legacy" and push_paths_for(caps.protocol_version) == EVERY_PUSH_PATH
    assert caps.channel and caps.elicitation_form and caps.elicitation_url and caps.log
    assert not caps.stream
    assert caps.ack_timeout_s == DEFAULTS.delivery.ack_timeout_s


def test_the_claude_code_probe_on_2026_07_28_declares_forms_but_has_no_push_path() -> None:
    meta = recorded("claude-code-2.1.328.server-discover.json")["params"]["_meta"]
    caps = detect(
        transport="stdio",
        protocol_version=meta["io.modelcontextprotocol/protocolVersion"],
        client_info=meta["io.modelcontextprotocol/clientInfo"],
        client_capabilities=meta["io.modelcontextprotocol/clientCapabilities"],
    )
    assert caps.era == "modern" and push_paths_for(caps.protocol_version) == NO_PUSH_PATH
    assert caps.elicitation_form and caps.elicitation_url and not caps.stream


@pytest.mark.parametrize(
    ("name", "elicitation", "channel", "form", "url"),
    [
        ("claude-code", {}, True, True, False),
        ("local-agent-mode-1234", None, False, False, False),
        ("Visual Studio Code", {"form": {}, "url": {}}, False, True, True),
        ("cursor-vscode", {}, False, True, False),
        ("codex-mcp-client", {"form": {}}, False, False, False),
        ("some-new-client", {"url": {}}, False, False, True),
    ],
)
def test_the_client_table_fills_only_what_the_handshake_does_not_say(
    name: str, elicitation: dict[str, Any] | None, channel: bool, form: bool, url: bool
) -> None:
    declared = {"elicitation": elicitation} if elicitation is not None else {}
    caps = detect(
        transport="streamable-http",
        protocol_version="2025-11-25",
        client_info={"name": name, "version": "1"},
        client_capabilities=declared,
    )
    assert (caps.channel, caps.elicitation_form, caps.elicitation_url) == (channel, form, url)
    assert caps.log


def test_a_client_declares_the_event_stream_itself() -> None:
    caps = detect(
        transport="streamable-http",
        protocol_version="2025-06-18",
        client_info={"name": "dashboard"},
        client_capabilities={"experimental": {"herald/events": {}}},
    )
    assert caps.stream and caps.era == "legacy"


def test_agent_overrides_switch_ways_whatever_the_era() -> None:
    claude = recorded("claude-code-2.1.328.initialize.json")
    caps = from_initialize(claude, channel=False, elicitation=False, ack_timeout_s=30)
    assert not caps.channel and not caps.elicitation_form and caps.ack_timeout_s == 30
    plain = detect(
        transport="stdio", protocol_version="2025-11-25", client_info=None, client_capabilities=None
    )
    assert not plain.channel
    forced = detect(
        transport="stdio",
        protocol_version="2025-11-25",
        client_info=None,
        client_capabilities=None,
        overrides={"channel": True, "log": False},
    )
    assert forced.channel and not forced.log
    modern = detect(
        transport="stdio",
        protocol_version="2026-07-28",
        client_info=None,
        client_capabilities=None,
        overrides={"channel": True},
    )
    assert modern.channel  # declared; pushed only if its peer offers a push path


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"chanel": True}, "unknown key"),
        ({"channel": "yes"}, "true or false"),
        ({"ack_timeout_s": 0}, "ack_timeout_s"),
        ([], "object"),
    ],
)
def test_bad_overrides_are_refused(raw: Any, fragment: str) -> None:
    with pytest.raises(InvalidInput, match=fragment):
        parse_overrides(raw)


def test_log_deliveries_respect_the_level_the_client_asked_for() -> None:
    caps = DeliveryCapabilities("stdio", "2025-11-25", log=True)
    assert caps.logs()  # no level asked for: any
    assert replace(caps, log_level="debug").logs() and replace(caps, log_level="notice").logs()
    assert not replace(caps, log_level="warning").logs()
    assert not replace(caps, log=False).logs()
    assert replace(caps, log_level="warning").to_json()["log_level"] == "warning"


@pytest.mark.parametrize("name", ["ai-sdk-mcp-client", "openai-mcp", "claude-code", "unknown"])
def test_the_deployed_clients_of_events_get_the_event_id_and_the_extensions_codes(
    name: str,
) -> None:
    assert profile_for(name).events == EventsProfile(WEBHOOK_ID_EVENT, ERROR_CODES_SEP)


def test_every_profile_asks_for_a_webhook_id_and_a_band_of_codes_herald_knows() -> None:
    for pattern, profile in CLIENT_PROFILES.items():
        assert profile.events.webhook_id in WEBHOOK_IDS, pattern
        assert profile.events.error_codes in (ERROR_CODES_SEP, ERROR_CODES_SKETCH), pattern


def test_a_message_webhook_id_is_one_per_delivery_and_the_same_on_each_retry() -> None:
    first = delivery_webhook_id(WEBHOOK_ID_MESSAGE, "sub_0123456789abcdef", "evt_1")
    assert first == delivery_webhook_id(WEBHOOK_ID_MESSAGE, "sub_0123456789abcdef", "evt_1")
    assert first.startswith("msg_") and len(first) == 36
    others = {
        delivery_webhook_id(WEBHOOK_ID_MESSAGE, "sub_0123456789abcdef", "evt_2"),
        delivery_webhook_id(WEBHOOK_ID_MESSAGE, "sub_fedcba9876543210", "evt_1"),
    }
    assert first not in others and len(others) == 2
    assert delivery_webhook_id(WEBHOOK_ID_EVENT, "sub_0123456789abcdef", "evt_1") == "evt_1"
