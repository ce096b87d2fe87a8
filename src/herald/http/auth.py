"""Who is calling: the admin, an agent, a publisher, or no one herald knows."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from herald.config import MetricsConfig
from herald.errors import Forbidden, HeraldError, Unauthorized, UnknownKey
from herald.hub import Hub
from herald.keys import hash_key, matches
from herald.logs import HIDDEN_PARAMETER
from herald.models import Agent, PublisherKey


@dataclass(frozen=True)
class MetricsAccess:
    """Who besides the admin may read ``GET /metrics``: the holder of the token of this hash,
    or, when ``open``, anyone."""

    token_hash: str | None = None
    open: bool = False

    @classmethod
    def of(cls, config: MetricsConfig) -> MetricsAccess:
        """Only the token's hash is kept: it is compared in constant time, as keys are."""
        token_hash = hash_key(config.token) if config.token is not None else None
        return cls(token_hash, config.open)


STREAM_TOKEN_PREFIX = "herald_stream_"
"""A stream token's (``herald.http.stream_tokens``): no key, refused wherever a key is asked."""
ONLY_ON_THE_STREAM = (
    "a stream token opens GET /channel/stream as ?token= and nothing else: send a key as"
    " 'Authorization: Bearer <key>'"
)


def bearer_key(request: Request) -> str:
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        if HIDDEN_PARAMETER in request.query_params:  # a stream token, on another route
            raise Unauthorized(ONLY_ON_THE_STREAM)
        raise Unauthorized("send a key as 'Authorization: Bearer <key>'")
    return key.strip()


async def require_admin(hub: Hub, request: Request) -> None:
    key = bearer_key(request)
    if await hub.is_admin_key(key):
        return
    raise await _refusal(hub, key, "the admin key")


async def require_agent(hub: Hub, request: Request) -> Agent:
    key = bearer_key(request)
    agent = await hub.agent_for_key(key)
    if agent is not None:
        return agent
    raise await _refusal(hub, key, "an agent's key")


async def require_metrics_reader(hub: Hub, request: Request, token_hash: str | None) -> None:
    """The metrics token (if the hub has one) or the admin key."""
    key = bearer_key(request)
    if token_hash is not None and matches(key, token_hash):
        return
    if await hub.is_admin_key(key):
        return
    raise await _refusal(hub, key, "the admin key or the metrics token")


async def admin_or_agent(hub: Hub, request: Request) -> Agent | None:
    """The calling agent, or None for the admin."""
    key = bearer_key(request)
    if await hub.is_admin_key(key):
        return None
    agent = await hub.agent_for_key(key)
    if agent is None:
        raise await _refusal(hub, key, "the admin key or an agent's key")
    return agent


async def admin_or_publisher(hub: Hub, request: Request) -> PublisherKey | None:
    """The calling publisher key, or None for the admin. The admin key is checked first, and
    in memory: publishing with it costs no trip to the store."""
    key = bearer_key(request)
    if await hub.is_admin_key(key):
        return None
    publisher = await hub.publisher_keys.for_key(key)
    if publisher is None:
        raise await _refusal(hub, key, "the admin key or a publisher key")
    return publisher


async def _refusal(hub: Hub, key: str, needed: str) -> HeraldError:
    """Why ``key`` is refused on a route that takes only ``needed``: 403, saying what the key
    may do, when herald knows it; 401 when it does not. (Each lookup answers at once for a
    key without its kind's prefix.)"""
    if key.startswith(STREAM_TOKEN_PREFIX):
        return UnknownKey(ONLY_ON_THE_STREAM)
    if await hub.is_admin_key(key):
        return Forbidden(f"this route needs {needed}, not the admin key")
    if await hub.agent_for_key(key) is not None:
        return Forbidden(
            f"this route needs {needed}; an agent key only drains and acks its own events"
        )
    if await hub.publisher_keys.for_key(key) is not None:
        return Forbidden(f"this route needs {needed}; a publisher key only publishes")
    return UnknownKey(
        "the key is not known to this herald (mistyped, revoked, or replaced by a rotation):"
        " send the key its operator gave for this herald"
    )
