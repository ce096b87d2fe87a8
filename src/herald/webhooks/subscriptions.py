"""``events/subscribe`` and ``events/unsubscribe``: an agent's matching events POSTed, signed, to
the client's https endpoint until the grant runs out.

A subscription is keyed by (agent, URL, entry name, arguments): subscribing again with the same
key refreshes it (a new grant and secret, active again), and its id, derived from the key, stays
the same across refreshes and restarts. Before anything is delivered to an (agent, URL) not yet
verified, it is verified during the subscribe call (``herald.webhooks.verification``: the
operator's allowlist, the receiver's published document, or a signed challenge it echoes); it
is then verified for good, kept with the subscription (a refresh or a restart does not verify
it again). Deliveries are the webhook worker's
(``herald.webhooks.worker``): one per matching event, at once, retried on a short schedule.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
from typing import Any
from urllib.parse import urlsplit

from herald import cursors
from herald.addresses import AddressRefused
from herald.capabilities import WEBHOOK_ID_EVENT
from herald.config import DEFAULTS, SubscriptionConfig
from herald.endpoint_checks import check_url
from herald.errors import (
    InvalidInput,
    SubscriptionLimitReached,
    SubscriptionNotFound,
    Unsupported,
)
from herald.hub import Hub
from herald.inputs.subscriptions import SubscribeInput, UnsubscribeInput
from herald.models import Agent, Endpoint, Kind, State, WebhookSubscription
from herald.pace import pace_ms, paced_wait
from herald.subscriptions import catalogue
from herald.subscriptions.poll import start
from herald.times import iso_ms
from herald.webhooks.sender import Sender, failure_kind
from herald.webhooks.verification import verify

log = logging.getLogger("herald.webhooks")

MODE = "webhook"
ROTATION_GRACE_MS = 5 * 60_000
"""How long a replaced secret keeps signing beside the new one, while the client switches."""


def subscription_id(agent: Agent, url: str, name: str, arguments: dict[str, Any]) -> str:
    """The id of the subscription with that key: the same for every refresh, in every process
    and after restarts (``arguments`` compared as canonical JSON)."""
    key = json.dumps(
        [agent.id, url, name, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return "sub_" + hashlib.sha256(key.encode()).hexdigest()[:16]


def expiry(params: SubscribeInput, config: SubscriptionConfig, now: int) -> int | None:
    """When the grant runs out: the suggestion, raised to the minimum and cut to the maximum
    (never refused); the default when none is suggested; none only if asked for and allowed."""
    if params.asks_no_expiry:
        if config.allow_no_expiry:
            return None
        return now + int(config.max_ttl_s * 1000)
    if params.ttl_ms is None:
        return now + int(config.default_ttl_s * 1000)
    # Clamped as whole numbers: a huge suggestion would overflow a float.
    lowest, highest = int(config.min_ttl_s * 1000), int(config.max_ttl_s * 1000)
    return now + min(max(params.ttl_ms, lowest), highest)


async def subscribe(
    hub: Hub,
    sender: Sender,
    agent: Agent,
    params: SubscribeInput,
    config: SubscriptionConfig = DEFAULTS.subscriptions,
    webhook_id: str = WEBHOOK_ID_EVENT,
) -> dict[str, Any]:
    """The ``events/subscribe`` result for ``agent``, wire-shaped: its id, ``refreshBefore``,
    the cursor every matching event up to which is done, ``truncated``, and on a refresh the
    ``deliveryStatus`` it had. Its event deliveries carry the ``webhook-id`` its client checks
    (``webhook_id``: see ``herald.capabilities.WEBHOOK_IDS``).

    Raises:
        Unsupported: a delivery mode other than webhook.
        InvalidInput: a URL that is not https (or http to loopback where the operator allows
            it), or points where herald may not send; bad arguments; a cursor herald did not
            give this agent, or one past its newest event.
        NotFound: no entry of that name.
        LimitReached: a new subscription, and the agent holds as many as the operator allows.
        CallbackEndpointError: the endpoint could not be verified.
        Nothing is stored when it raises.
    """
    delivery = params.delivery
    if delivery.mode not in (None, MODE):
        raise Unsupported(
            f"params.delivery.mode {delivery.mode!r} is not served: events/subscribe delivers"
            ' by "webhook" only (events/poll and events/stream are the other ways)',
            "deliveryMode",
            delivery.mode,
        )
    url = await _admit(sender, delivery.url)
    subscription = await catalogue.resolve(hub, params.name, params.arguments)
    history = await hub.history()
    given = cursors.decode(params.cursor, agent, history) if params.cursor is not None else None
    sub_id = subscription_id(agent, url, params.name, params.arguments)
    before = await hub.subscriptions.get(sub_id)
    now = hub.now()
    held = await _held(hub, agent, config, now) if before is None else [before]
    endpoint = Endpoint(
        sub_id, agent.id, Kind.SUBSCRIPTION, url, delivery.secret, now,
        expires_at=expiry(params, config, now),
    )  # fmt: skip
    verified_at = await _verified(hub, sender, endpoint, held, config)
    if given is not None:
        await hub.acknowledge_through(agent, subscription.key, subscription.match, given)
        after, truncated = given, await hub.missing_after(agent, given) > 0
    elif params.cursor is not None:
        # A cursor of another history (before a restore): no place in this one, every
        # pending event is sent again, and the answer says history was lost.
        after, truncated = 0, True
    elif before is None:
        position = await start(hub, agent, subscription, params.max_age_ms)
        after, truncated = position.cursor, position.skipped > 0
    else:
        after, truncated = before[1].after_seq, False  # live: a null cursor changes nothing
    record = WebhookSubscription(
        sub_id,
        agent.id,
        params.name,
        json.dumps(params.arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False),
        json.dumps(list(subscription.match.types)),
        subscription.match.sender,
        after,
        verified_at,
        webhook_id,
    )
    previous = await hub.subscriptions.put(
        endpoint, record, now + ROTATION_GRACE_MS, max_live=config.max_per_agent or None
    )
    watermark = await hub.subscriptions.cursor(sub_id)
    result: dict[str, Any] = {
        "id": sub_id,
        "refreshBefore": iso_ms(endpoint.expires_at) if endpoint.expires_at is not None else None,
        "cursor": cursors.encode(agent, history, watermark if watermark is not None else after),
        "truncated": truncated,
    }
    if previous is not None:
        result["deliveryStatus"] = delivery_status(*previous, now, pace_ms(config.rate))
        if previous[0].state is State.DISABLED:
            # Said by its id, never its URL (it may carry a token). Its failures suspended it
            # (the store's reason says "suspended: ..."), or it was disabled as any endpoint.
            reason = previous[0].disabled_reason or ""
            was = "suspended" if reason.startswith("suspended") else "disabled"
            log.info(
                "subscription %s reactivated by a refresh: it was %s",
                sub_id,
                was,
                extra={"subscription": sub_id, "state": "active", "why": f"refreshed ({was})"},
            )
    return result


async def unsubscribe(hub: Hub, agent: Agent, params: UnsubscribeInput) -> dict[str, Any]:
    """End the agent's subscription of that name, arguments and URL, with its waiting
    deliveries. Another agent's is never found: the key holds the agent.

    Raises:
        SubscriptionNotFound: the agent has no such subscription.
    """
    sub_id = subscription_id(agent, params.delivery.url, params.name, params.arguments)
    if not await hub.subscriptions.delete(sub_id):
        raise SubscriptionNotFound(
            f"you have no webhook subscription to {params.name!r} with these arguments at"
            " params.delivery.url (it may have expired): nothing to end"
        )
    return {}


def delivery_status(
    endpoint: Endpoint,
    subscription: WebhookSubscription,
    now: int,
    pace: float | None = None,
) -> dict[str, Any]:
    """How a subscription's deliveries were going up to ``now``, as SEP-3415's
    ``deliveryStatus`` shows it: ``active`` false while suspended (or disabled); the last
    error as its kind alone (never a body or a header); ``throttled`` while its deliveries wait
    because the receiver asked (``Retry-After``) or its rate (one per ``pace`` ms) is reached,
    ``retryAfterMs`` how much longer."""
    status: dict[str, Any] = {
        "active": endpoint.state is State.ACTIVE,
        "lastDeliveryAt": iso_ms(endpoint.last_ok_at) if endpoint.last_ok_at else None,
        "lastError": failure_kind(endpoint.last_error),
    }
    if endpoint.failing_since is not None:
        status["failedSince"] = iso_ms(endpoint.failing_since)
    held_for = max((subscription.held_until or now) - now, 0)
    if pace is not None:
        held_for = max(held_for, paced_wait(subscription.paced_until, now, pace))
    status["throttled"] = held_for > 0
    if held_for > 0:
        status["retryAfterMs"] = held_for
    return status


async def _admit(sender: Sender, url: str) -> str:
    """The URL, if herald may deliver to it: https, or plain http to loopback where the
    operator allows loopback webhooks; not pointing where the address policy refuses; without
    credentials or a fragment (the URL is part of the subscription's key).

    Raises:
        InvalidInput: naming ``params.delivery.url``.
    """
    name = "params.delivery.url"
    check_url(url, name)
    parts = urlsplit(url)
    if "@" in parts.netloc:
        raise InvalidInput(
            f"{name} must not hold credentials (user:password@): they would travel in the URL,"
            " and be kept with the subscription; a delivery is proved by its signature (the"
            " secret), so send the URL without them"
        )
    if "#" in url:
        raise InvalidInput(
            f"{name} must not have a fragment (#...): a fragment is never sent to the endpoint;"
            " send the URL without it"
        )
    if parts.scheme != "https" and not (
        sender.policy.allow_loopback and _is_loopback(parts.hostname or "")
    ):
        raise InvalidInput(
            f"{name} must be an https URL (plain http is taken only to a loopback address, where"
            " herald serve --webhook-allow loopback allows it)"
        )
    try:
        await sender.guard.admit(url)
    except AddressRefused as exc:
        raise InvalidInput(f"{name} is refused: {exc.message}") from exc
    return url


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _held(
    hub: Hub, agent: Agent, config: SubscriptionConfig, now: int
) -> list[tuple[Endpoint, WebhookSubscription]]:
    """The agent's subscriptions, before it subscribes anew: one more is refused if it holds as
    many live ones as the operator allows (each matching event is POSTed once per
    subscription, so they are what one event costs). Checked here so that a refused one is
    never sent a challenge; the store checks again as it inserts, for subscribes that race.

    Raises:
        LimitReached: it holds ``config.max_per_agent`` live ones.
    """
    held = await hub.subscriptions.of_agent(agent.id)
    limit = config.max_per_agent
    live = [e for e, _ in held if e.expires_at is None or e.expires_at > now]
    if limit and len(live) >= limit:
        raise SubscriptionLimitReached(len(live), limit)
    return held


async def _verified(
    hub: Hub,
    sender: Sender,
    endpoint: Endpoint,
    held: list[tuple[Endpoint, WebhookSubscription]],
    config: SubscriptionConfig,
) -> int:
    """When the endpoint's URL was verified: by one of the agent's subscriptions ``held``
    (the one refreshed, or all of them for a new one), or now.

    Raises:
        CallbackEndpointError: no way verified it.
    """
    for known, record in held:
        if known.url == endpoint.url and record.verified_at is not None:
            return record.verified_at
    way = await verify(sender, endpoint, config.allow, hub.now())
    # The subscription's id, not its URL: a callback URL may carry a token.
    log.info(
        "subscription %s: its endpoint is verified by the %s",
        endpoint.id,
        way,
        extra={"subscription": endpoint.id, "verified_by": way.value},
    )
    return hub.now()
