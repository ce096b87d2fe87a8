"""Setting an agent's webhook or OpenClaw target, rotating secrets: the admin's operations."""

from __future__ import annotations

from herald.addresses import AddressGuard
from herald.endpoint_checks import check_secret, check_url, new_secret
from herald.errors import NotFound
from herald.hub import Hub
from herald.ids import new_id
from herald.inputs.agents import DEFAULT_ROTATION_GRACE_S, OpenClawMode
from herald.models import Endpoint, Kind


async def admit(guard: AddressGuard, url: str, name: str = "url") -> str | None:
    """Check a target URL as it is set, before anything changes: its form, and where it points
    under the policy. A host that does not resolve now is accepted (DNS may be down; each
    delivery checks it again, and retries): the answer is then a warning saying so.

    Raises:
        InvalidInput: a malformed URL.
        AddressRefused: the URL points where the policy refuses, and the message names the
            ``--webhook-allow`` class that would allow it, if any.
    """
    return await guard.admit(check_url(url, name))


async def set_webhook(
    hub: Hub, agent_id: str, url: str, secret: str | None = None
) -> tuple[Endpoint, str]:
    """Point the agent's webhook at ``url``; returns it with its signing secret (generated when
    not given), which is shown this once.

    Raises:
        InvalidInput: a malformed URL or secret. NotFound: no such agent.
    """
    await hub.get_agent(agent_id)
    secret = check_secret(secret) if secret is not None else new_secret()
    endpoint = Endpoint(
        new_id("end_"), agent_id, Kind.WEBHOOK, check_url(url, "url"), secret, hub.now()
    )
    await hub.endpoints.put(endpoint)
    return endpoint, secret


async def set_openclaw(
    hub: Hub, agent_id: str, url: str, token: str, mode: OpenClawMode = "wake"
) -> Endpoint:
    """Point the agent at an OpenClaw gateway (its base URL, its hooks token, ``wake`` or
    ``agent`` mode), as ``herald.inputs.agents.OpenClawInput`` checked them.

    Raises:
        InvalidInput: a malformed URL. NotFound: no such agent.
    """
    await hub.get_agent(agent_id)
    endpoint = Endpoint(
        new_id("end_"), agent_id, Kind.OPENCLAW, check_url(url, "url"), token, hub.now(), mode
    )
    await hub.endpoints.put(endpoint)
    return endpoint


async def rotate_webhook_secret(
    hub: Hub, agent_id: str, grace_s: float = DEFAULT_ROTATION_GRACE_S, secret: str | None = None
) -> tuple[Endpoint, str]:
    """A new signing secret; the old one keeps signing for ``grace_s`` (checked by
    ``herald.inputs.agents.RotationInput``) so that receivers can switch. Returns the endpoint
    and the new secret, shown this once.

    Raises:
        InvalidInput: a bad secret. NotFound: the agent has no webhook.
    """
    secret = check_secret(secret) if secret is not None else new_secret()
    webhook = await _endpoint(hub, agent_id, Kind.WEBHOOK)
    rotated = await hub.endpoints.rotate_secret(webhook.id, secret, hub.now() + int(grace_s * 1000))
    if rotated is None:
        raise NotFound(f"agent {agent_id!r} has no webhook")
    return rotated, secret


async def remove(hub: Hub, agent_id: str, kind: Kind) -> None:
    """Raises: NotFound: the agent has no endpoint of that kind."""
    if not await hub.endpoints.delete(agent_id, kind):
        raise NotFound(f"agent {agent_id!r} has no {kind.value}")


async def _endpoint(hub: Hub, agent_id: str, kind: Kind) -> Endpoint:
    for endpoint in await hub.endpoints.of_agent(agent_id):
        if endpoint.kind is kind:
            return endpoint
    raise NotFound(f"agent {agent_id!r} has no {kind.value}")
