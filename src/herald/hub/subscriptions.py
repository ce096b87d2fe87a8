"""MCP Events webhook subscriptions as the hub keeps them: what ``events/subscribe`` and
``events/unsubscribe`` write, and what the webhook worker schedules and sends from."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence

from herald.hub.endpoints import AnyEndpoints
from herald.models import Endpoint, OwedEvents, WebhookSubscription
from herald.store import Store

SUBSCRIPTION_ID = re.compile(r"sub_[0-9a-f]{16}")
"""What a subscription's id looks like (derived from its key, never chosen by a client)."""

Subscribed = tuple[Endpoint, WebhookSubscription]
Ended = Callable[[list[Subscribed], str], None]
"""Told of subscriptions herald ended itself (deleted already), and why: ``AGENT_DELETED``, or
``TYPE_DELETED`` (their event type)."""
AGENT_DELETED = "agent_deleted"
TYPE_DELETED = "type_deleted"

log = logging.getLogger("herald")


class SubscriptionBook:
    """The subscriptions part of the hub (``hub.subscriptions``). Ids that cannot name one are
    answered without asking the store."""

    def __init__(self, store: Store, known: AnyEndpoints) -> None:
        self._store = store
        self._known = known
        """Whether any endpoint exists: a subscription is one (shared with ``hub.endpoints``)."""
        self._ended: list[Ended] = []
        self._deleted: list[Callable[[str], None]] = []

    def on_deleted(self, handler: Callable[[str], None]) -> None:
        """Call ``handler`` (it must not block) with the id of each subscription deleted, in
        this process or (PostgreSQL) another: the webhook worker drops what it holds of it."""
        self._deleted.append(handler)

    def on_ended(self, handler: Ended) -> None:
        """Call ``handler`` (it must not block) with the subscriptions herald ends itself, once
        they are deleted: the webhook worker tells each endpoint (``terminated``)."""
        self._ended.append(handler)

    async def end(self, found: Sequence[Subscribed], why: str) -> list[Subscribed]:
        """Delete these subscriptions (``why``: see ``Ended``), and tell the ``on_ended``
        handlers of those this call deleted (another process may have been first). Returns
        them."""
        ended = [pair for pair in found if await self.delete(pair[0].id)]
        self.ended(ended, why)
        return ended

    def ended(self, ended: list[Subscribed], why: str) -> None:
        """Tell the ``on_ended`` handlers of subscriptions already deleted (with their agent)."""
        if not ended:
            return
        for handler in self._ended:
            try:
                handler(ended, why)
            except Exception:  # one handler's fault must not keep the others from hearing
                log.exception("a handler of ended subscriptions failed")

    async def put(
        self,
        endpoint: Endpoint,
        subscription: WebhookSubscription,
        rotation_until: int,
        *,
        max_live: int | None = None,
    ) -> tuple[Endpoint, WebhookSubscription] | None:
        """Create the subscription or refresh it (``Store.put_subscription``); returns what was
        stored before, None if it is new.

        Raises:
            NotFound: its agent does not exist.
            LimitReached: it is new, and its agent holds ``max_live`` live ones.
        """
        try:
            return await self._store.put_subscription(
                endpoint, subscription, rotation_until, max_live=max_live
            )
        finally:  # made, unless it surely was not: believing so costs only a look at the store
            self._known.made()

    async def get(self, subscription_id: str) -> tuple[Endpoint, WebhookSubscription] | None:
        if not SUBSCRIPTION_ID.fullmatch(subscription_id):
            return None
        found = await self._store.subscriptions(ids=[subscription_id])
        return found[0] if found else None

    async def of_agent(self, agent_id: str) -> list[tuple[Endpoint, WebhookSubscription]]:
        return await self._store.subscriptions(agent_id=agent_id)

    async def with_ids(self, ids: Sequence[str]) -> list[tuple[Endpoint, WebhookSubscription]]:
        wanted = [i for i in ids if SUBSCRIPTION_ID.fullmatch(i)]
        return await self._store.subscriptions(ids=wanted) if wanted else []

    async def every(self) -> list[tuple[Endpoint, WebhookSubscription]]:
        return await self._store.subscriptions()

    async def delete(self, subscription_id: str) -> bool:
        """Delete it with its waiting deliveries, and tell the ``on_deleted`` handlers; False
        if there was none."""
        deleted = bool(
            SUBSCRIPTION_ID.fullmatch(subscription_id)
            and await self._store.delete_subscription(subscription_id)
        )
        if deleted:
            self._known.maybe_none_left()
            self.deleted(subscription_id)
        return deleted

    def deleted(self, subscription_id: str) -> None:
        """Tell the ``on_deleted`` handlers that a subscription is gone (deleted here, or heard
        from another process)."""
        for handler in self._deleted:
            try:
                handler(subscription_id)
            except Exception:  # one handler's fault must not keep the others from hearing
                log.exception("a handler of deleted subscriptions failed")

    async def owed(self, subscription_id: str, limit: int) -> OwedEvents | None:
        """Its oldest matching events still owed (``Store.subscription_owed``); None: no such
        subscription."""
        if not SUBSCRIPTION_ID.fullmatch(subscription_id):
            return None
        return await self._store.subscription_owed(subscription_id, limit)

    async def cursor(self, subscription_id: str, sending: str | None = None) -> int | None:
        """Its safe watermark (``Store.subscription_cursor``); None: no such subscription."""
        if not SUBSCRIPTION_ID.fullmatch(subscription_id):
            return None
        return await self._store.subscription_cursor(subscription_id, sending)

    async def owe_gap(self, subscription_id: str) -> None:
        """Its endpoint is owed a ``gap`` until one is told (``Store.owe_gap``)."""
        if SUBSCRIPTION_ID.fullmatch(subscription_id):
            await self._store.owe_gap(subscription_id)

    async def gaps(self) -> list[Subscribed]:
        """The live, active subscriptions owed a ``gap``."""
        return await self._store.subscription_gaps()

    async def gap_told(self, subscription_id: str, gap_at: int) -> bool:
        """The gap owed since ``gap_at`` was told (``Store.gap_told``)."""
        return await self._store.gap_told(subscription_id, gap_at)

    async def schedule(self, limit: int) -> int:
        """Give live subscriptions their deliveries of the events they match, at once."""
        return await self._store.schedule_subscription_deliveries(limit)
