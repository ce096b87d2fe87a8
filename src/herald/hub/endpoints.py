"""An agent's endpoints (webhook, OpenClaw) and their delivery schedule, as the hub keeps them:
what the admin's endpoint operations and the webhook worker read and write."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from herald.errors import NotFound
from herald.ids import is_id
from herald.models import Agent, Delivery, Endpoint, Event, Finished, Kind, OneClaim, State
from herald.store import Store

ENABLE_TRIES = 3
"""An endpoint disabled anew (for another reason) while it is enabled is read again, this often."""
READ_AGAIN_MS = 1000
"""On a store other processes share, how long a reading that found no endpoint is believed: an
endpoint another process made is found at most this long after it was made (that process's
own worker delivers to it meanwhile)."""


class AnyEndpoints:
    """Whether any endpoint (webhook, OpenClaw or subscription) exists, as this process knows it.
    When none does, no webhook delivery can be owed, and the webhook worker leaves the store
    alone: its rounds are transactions on the store's writer, which publishes queue behind.

    Read from the store the first time it is asked. This process's puts make it true at once
    (``made``), and it stays true until this process deletes one (``maybe_none_left``: read
    again); true is never wrong, only slower. On a store other processes share, a reading
    that found none is believed for ``READ_AGAIN_MS`` of the store's clock."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._known: bool | None = None
        self._read_at = 0
        self._made = 0
        """How many puts this process made: a reading begun before one is not believed."""

    def made(self) -> None:
        self._known = True
        self._made += 1

    def maybe_none_left(self) -> None:
        self._known = None

    async def exist(self) -> bool:
        if self._known is None or (self._known is False and self._stale()):
            made, read_at = self._made, self._store.now()
            found = await self._store.any_endpoints()
            if self._made == made:
                self._known, self._read_at = found, read_at
        return bool(self._known)

    def _stale(self) -> bool:
        if not self._store.shared:
            return False  # every endpoint is made through this process
        since_ms = self._store.now() - self._read_at
        return not 0 <= since_ms < READ_AGAIN_MS  # a clock set back counts as stale


class EndpointBook:
    """The endpoints part of the hub (``hub.endpoints``). Ids that cannot name anything are
    answered without asking the store."""

    def __init__(
        self,
        store: Store,
        known: AnyEndpoints,
        *,
        on_enabled: Callable[[str], None] = lambda agent_id: None,
    ) -> None:
        self._store = store
        self._on_enabled = on_enabled
        self.known = known
        """Whether any endpoint exists (``AnyEndpoints``), shared with ``hub.subscriptions``."""

    async def put(self, endpoint: Endpoint) -> None:
        """Create the agent's endpoint of that kind, or replace it (its deliveries go with it)."""
        try:
            await self._store.put_endpoint(endpoint)
        finally:  # made, unless it surely was not: believing so costs only a look at the store
            self.known.made()

    async def any(self) -> bool:
        """Whether any endpoint of any kind may exist: if not, no delivery can be owed
        (``AnyEndpoints``: without asking the store, mostly)."""
        return await self.known.exist()

    async def of_agent(self, agent_id: str) -> list[Endpoint]:
        return await self._store.endpoints(agent_id) if is_id(agent_id, "agt_") else []

    async def page(
        self, after: str | None, limit: int, *, failing: bool = False
    ) -> list[tuple[Endpoint, str]]:
        """Every agent's webhook and OpenClaw endpoints by id, a page at a time, each with its
        agent's handle; ``failing``: only those disabled or failing."""
        return await self._store.endpoint_page(after, limit, failing=failing)

    async def delete(self, agent_id: str, kind: Kind) -> bool:
        """False if the agent had no endpoint of that kind."""
        if not is_id(agent_id, "agt_"):
            return False
        deleted = await self._store.delete_endpoint(agent_id, kind.value)
        if deleted:
            self.known.maybe_none_left()
        return deleted

    async def rotate_secret(
        self, endpoint_id: str, secret: str, previous_until: int
    ) -> Endpoint | None:
        """Sign with ``secret`` from now; the current one keeps signing until ``previous_until``."""
        return await self._store.rotate_secret(endpoint_id, secret, previous_until)

    async def refused(self) -> list[Endpoint]:
        """The endpoints disabled because their address was refused."""
        return await self._store.refused_endpoints()

    async def enable(self, endpoint_id: str, disabled_reason: str) -> bool:
        """Make a disabled endpoint active again, if it is still disabled for that reason."""
        return await self._store.enable_endpoint(endpoint_id, disabled_reason)

    async def enable_by_admin(self, endpoint_id: str) -> Endpoint:
        """Bring a disabled webhook or OpenClaw endpoint back, whatever disabled it: its secret
        and waiting deliveries are kept, and its failing span starts afresh. An active one is
        answered as it is. ``on_enabled`` is told its agent (the worker looks again).

        Raises:
            NotFound: no webhook or OpenClaw endpoint has that id.
        """
        for _ in range(ENABLE_TRIES):
            endpoint = await self.get(endpoint_id)
            if endpoint.state is State.ACTIVE:
                return endpoint
            if await self._store.enable_endpoint(endpoint.id, endpoint.disabled_reason or ""):
                self._on_enabled(endpoint.agent_id)
                return await self.get(endpoint_id)
        return await self.get(endpoint_id)

    async def get(self, endpoint_id: str) -> Endpoint:
        """A webhook or OpenClaw endpoint (a subscription's is its own, ``hub.subscriptions``).

        Raises:
            NotFound: no such endpoint.
        """
        found = await self._store.get_endpoint(endpoint_id) if is_id(endpoint_id, "end_") else None
        if found is None or found.kind is Kind.SUBSCRIPTION:
            raise NotFound(f"no webhook or OpenClaw endpoint has the id {endpoint_id!r}")
        return found

    async def next_attempts(self, endpoint_ids: Sequence[str]) -> dict[str, int]:
        """When each endpoint's earliest waiting delivery is due (none waiting: left out)."""
        return await self._store.next_attempts(endpoint_ids) if endpoint_ids else {}

    async def schedule(
        self,
        before_ms: int,
        limit: int,
        *,
        agents: Sequence[str] | None = None,
        not_agents: Sequence[str] = (),
        push_grace_ms: int | None = None,
    ) -> int:
        """Give each open event last offered before ``before_ms`` a delivery to each active
        endpoint of its agent, once; with ``push_grace_ms``, an agent with a live session that
        can be pushed to (in any process) gets that long more. Returns how many were scheduled."""
        return await self._store.schedule_deliveries(
            before_ms, limit, agents=agents, not_agents=not_agents, push_grace_ms=push_grace_ms
        )

    async def claim(
        self,
        worker: str,
        limit: int,
        lease_ms: int,
        *,
        per_endpoint: int,
        in_flight: Mapping[str, int] | None = None,
        pace_ms: float | None = None,
    ) -> list[tuple[Delivery, Endpoint, Event, Agent]]:
        """Claim due deliveries for ``worker``: no two workers get the same one; a subscription
        gets none while its receiver asked to wait, and at most one per ``pace_ms`` (see
        ``Store.claim_deliveries``)."""
        return await self._store.claim_deliveries(
            worker,
            limit,
            lease_ms,
            per_endpoint=per_endpoint,
            in_flight=in_flight,
            pace_ms=pace_ms,
        )

    async def release_claims(self, claimant: str | None = None, one: OneClaim | None = None) -> int:
        """Free the deliveries ``claimant`` claimed (or ``one`` claim of them), or every claimed
        delivery (see ``Store.release_claims``: only for a store no other process serves);
        returns how many."""
        return await self._store.release_claims(claimant, one)

    async def hold_claims_for(self, claimant: str) -> None:
        """Tie ``claimant``'s claims to this process's life (``Store.hold_claims_for``)."""
        await self._store.hold_claims_for(claimant)

    def holding(self, claimant: str) -> int | None:
        """Whether ``claimant``'s claims are held tied to this process now, and since when
        (``Store.holding``)."""
        return self._store.holding(claimant)

    async def let_go_of_claimant(self, claimant: str) -> None:
        await self._store.let_go_of_claimant(claimant)

    async def free_claims_of_the_gone(self, grace_ms: int) -> int:
        """Free the claims of workers whose process has been gone for ``grace_ms``; returns
        how many (``Store.free_claims_of_the_gone``)."""
        return await self._store.free_claims_of_the_gone(grace_ms)

    async def finish(self, finished: Sequence[Finished]) -> list[tuple[str, str]]:
        """Record what came of attempts, in one transaction (see ``Store.finish_deliveries``);
        returns the subscriptions suspended by them, with why."""
        return await self._store.finish_deliveries(finished)

    async def deliveries(self, event_id: str) -> list[Delivery]:
        return await self._store.deliveries(event_id) if is_id(event_id, "evt_") else []
