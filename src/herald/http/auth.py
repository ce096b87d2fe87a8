"""Who is calling: the admin, an agent, or no one herald knows."""

from __future__ import annotations

from starlette.requests import Request

from herald.errors import Forbidden, Unauthorized
from herald.hub import Hub
from herald.models import Agent


def bearer_key(request: Request) -> str:
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized("send a key as 'Authorization: Bearer <key>'")
    return key.strip()


async def require_admin(hub: Hub, request: Request) -> None:
    key = bearer_key(request)
    if await hub.is_admin_key(key):
        return
    if await hub.agent_for_key(key) is not None:
        raise Forbidden(
            "this route needs the admin key; an agent key only drains and acks its own events"
        )
    raise Unauthorized("the key is not known to this herald")


async def require_agent(hub: Hub, request: Request) -> Agent:
    key = bearer_key(request)
    agent = await hub.agent_for_key(key)
    if agent is not None:
        return agent
    if await hub.is_admin_key(key):
        raise Forbidden("this route needs an agent's key, not the admin key")
    raise Unauthorized("the key is not known to this herald")


async def admin_or_agent(hub: Hub, request: Request) -> Agent | None:
    """The calling agent, or None for the admin."""
    key = bearer_key(request)
    if await hub.is_admin_key(key):
        return None
    agent = await hub.agent_for_key(key)
    if agent is None:
        raise Unauthorized("the key is not known to this herald")
    return agent
