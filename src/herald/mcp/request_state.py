"""The ``requestState`` of herald's input-required results (2026-07-28): which forms an
``inbox`` call asked one agent to fill in, signed so that a client can only give it back.

The client holds it between the two rounds, so it is attacker-controlled on return: it is
HMAC-SHA256 signed with the hub's signing key (shared by every process on the store, so that a
retry may reach any of them), bound to the agent, the tool and the events it asks about, and
good for a few minutes by the hub's clock. It is not secret: it names event ids the agent sees.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass

from herald.errors import InvalidInput

STATE_TTL_MS = 5 * 60 * 1000
"""How long the forms of one ``inbox`` call may take to be filled in."""
VERSION = "h1"
FIELD = "params.requestState"
AGAIN = "call inbox again without it"


@dataclass(frozen=True)
class FormsAsked:
    """What one round asked: these events' forms, of this agent, for this tool."""

    agent_id: str
    tool: str
    event_ids: tuple[str, ...]


def seal(key: bytes, asked: FormsAsked, expires_ms: int) -> str:
    """The token for ``asked``, good until ``expires_ms`` (epoch milliseconds)."""
    claims = {
        "a": asked.agent_id,
        "t": asked.tool,
        "e": list(asked.event_ids),
        "x": expires_ms,
    }
    body = _b64(json.dumps(claims, separators=(",", ":")).encode())
    return f"{VERSION}.{body}.{_b64(_sign(key, body))}"


def unseal(key: bytes, token: str, agent_id: str, tool: str, now_ms: int) -> FormsAsked:
    """What a token herald made for this agent and tool asked.

    Raises:
        InvalidInput: the token was not made by this hub for this agent and tool (forged,
            altered, another agent's), or it has expired.
    """
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != VERSION:
        raise InvalidInput(f"{FIELD} is not one herald made: {AGAIN}")
    _, body, signature = parts
    try:
        given = _unb64(signature)
        claims = json.loads(_unb64(body))
    except (ValueError, binascii.Error) as exc:
        raise InvalidInput(f"{FIELD} is not one herald made: {AGAIN}") from exc
    if not hmac.compare_digest(given, _sign(key, body)):
        raise InvalidInput(f"{FIELD} is not one herald made: {AGAIN}")
    # Signed by this hub: the claims are as herald wrote them.
    if claims["a"] != agent_id or claims["t"] != tool:
        raise InvalidInput(f"{FIELD} was made for another agent or tool: {AGAIN}")
    if now_ms >= claims["x"]:
        minutes = STATE_TTL_MS // 60_000
        raise InvalidInput(f"{FIELD} has expired (it is good for {minutes} minutes): {AGAIN}")
    return FormsAsked(agent_id, tool, tuple(claims["e"]))


def _sign(key: bytes, body: str) -> bytes:
    return hmac.new(key, f"{VERSION}.{body}".encode(), hashlib.sha256).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    if not text.isascii():
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
