"""``POST /channel/stream-token``: a short-lived token with which a web page follows one agent's
stream, ``GET /channel/stream?token=...``, through ``EventSource`` (which cannot send an
``Authorization`` header). The agent's key stays with the page's own backend, which asks for
the token and hands the page only that.

A token is not stored: it names its agent and when it expires, and is HMAC-SHA256 signed with
the hub's signing key (shared by every process on the store) over those and the hash of the
agent's key as it was then. So it is refused (401) once it expires, and once the agent's key is
rotated (with a grace or not: the key it was made under is no longer the agent's key), and by
every route but the stream (it is no key). It travels in a URL, so it is never logged: uvicorn's
access log hides it (``herald.logs.QueryTokensHidden``), and no refusal repeats it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald import answers
from herald.errors import Forbidden, NotFound, UnknownKey
from herald.http.auth import STREAM_TOKEN_PREFIX, bearer_key, require_agent
from herald.http.described import AGENT_ONLY, described
from herald.http.io import json_response
from herald.http.services import services
from herald.hub import Hub
from herald.keys import hash_key
from herald.logs import HIDDEN_PARAMETER
from herald.models import Agent
from herald.times import iso_ms

TOKEN_TTL_MS = 5 * 60 * 1000
"""How long a token opens the stream: a page asks its backend for a new one to reconnect."""
QUERY = HIDDEN_PARAMETER
"""The query parameter of ``GET /channel/stream`` that carries it: the one no log line shows."""
AGAIN = "ask POST /channel/stream-token for a new one (with the agent's key, server-side)"


@described(
    "Make a token for a web page to follow the agent's stream",
    keys=AGENT_ONLY,
    answers={201: answers.StreamToken},
    description=(
        "For a page's EventSource, which cannot send Authorization: GET"
        " /channel/stream?token=... opens the agent's stream for 5 minutes after this, and until"
        " the agent's key is rotated; every other route refuses it. Ask with the agent's current"
        " key, from the page's own backend: the key never goes to the browser."
    ),
    tag="channel",
)
async def stream_token(request: Request) -> Response:
    hub = services(request).hub
    agent = await require_agent(hub, request)
    if not hmac.compare_digest(hash_key(bearer_key(request)), agent.key_hash):
        raise Forbidden(
            "this key was replaced by a rotation and only works for its grace: a stream token"
            " is made with the agent's current key"
        )
    expires_ms = hub.now() + TOKEN_TTL_MS
    answer: answers.StreamToken = {
        "token": _seal(await hub.signing_key(), agent.id, agent.key_hash, expires_ms),
        "expires_at": iso_ms(expires_ms),
    }
    return json_response(answer, 201)


async def agent_for_token(hub: Hub, token: str) -> Agent:
    """The agent whose stream ``token`` opens.

    Raises:
        UnknownKey: not a token herald made, expired, or its agent's key was rotated (or the
            agent deleted) since it was made.
    """
    made = token.startswith(STREAM_TOKEN_PREFIX)
    parts = token.removeprefix(STREAM_TOKEN_PREFIX).split(".") if made else []
    if len(parts) != 3 or not (parts[1].isascii() and parts[1].isdigit() and len(parts[1]) < 16):
        raise UnknownKey(f"?{QUERY}= is not a stream token herald made: {AGAIN}")
    agent_id, expires = parts[0], int(parts[1])
    if hub.now() >= expires:
        minutes = TOKEN_TTL_MS // 60_000
        raise UnknownKey(f"the stream token has expired (it works for {minutes} minutes): {AGAIN}")
    try:
        agent = await hub.get_agent(agent_id)
    except NotFound:
        agent = None
    if agent is None or not hmac.compare_digest(
        token.encode(), _seal(await hub.signing_key(), agent.id, agent.key_hash, expires).encode()
    ):
        raise UnknownKey(
            "the stream token no longer works: its agent's key was rotated since it was made"
            f" (or it is not one herald made): {AGAIN}"
        )
    return agent


def _seal(key: bytes, agent_id: str, key_hash: str, expires_ms: int) -> str:
    # A purpose of its own in what is signed: nothing else herald signs with this key can pass
    # for a stream token.
    signed = f"stream-token.{agent_id}.{expires_ms}.{key_hash}".encode()
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    signature = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    return f"{STREAM_TOKEN_PREFIX}{agent_id}.{expires_ms}.{signature}"


ROUTES = [Route("/channel/stream-token", stream_token, methods=["POST"])]
