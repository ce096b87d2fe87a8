"""Claims that live as long as their process, on PostgreSQL.

Several processes deliver webhooks from one database, each delivery claimed by one worker for a
while (three request timeouts and half a minute). A worker that stops frees its claims; one whose
process is killed cannot, and its claims used to wait out their time. Here each worker is known
by an advisory lock that its process holds on its listening connection (``listener.py``), which
lasts as long as the process: PostgreSQL lets the lock go the moment the connection ends. The
others look now and then: a worker whose lock has been gone for a grace period (a connection
lost and made again within it is not a death) is forgotten and its claims freed, to be sent
again at once.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from herald.store.postgres import queries
from herald.store.postgres.listener import Listener
from herald.store.postgres.rows import Connection, Runner, count


class ClaimantStore:
    """The claimant part of ``PostgresStore``."""

    _run: Runner
    _listener: Listener | None
    _claimant_keys: dict[str, int]
    """The key of each claimant of this process (``hold_claims_for``)."""
    now: Callable[[], int]

    async def hold_claims_for(self, claimant: str) -> None:
        if self._listener is None or claimant in self._claimant_keys:
            return
        key = self._claimant_keys[claimant] = secrets.randbits(62) + 1
        if await self._listener.hold(key):
            await self._put_claimant(claimant, key)

    async def let_go_of_claimant(self, claimant: str) -> None:
        key = self._claimant_keys.pop(claimant, None)
        if key is None or self._listener is None:
            return

        async def delete(conn: Connection) -> None:
            await conn.execute(queries.DELETE_CLAIMANT, claimant)

        await self._run(delete)
        await self._listener.let_go(key)

    async def free_claims_of_the_gone(self, grace_ms: int) -> int:
        now = self.now()
        listener = self._listener
        held = [
            (claimant, key)
            for claimant, key in self._claimant_keys.items()
            if listener is not None and listener.holds(key)
        ]

        async def free(conn: Connection) -> int:
            # Ours are known again first, should another process have forgotten one while our
            # connection was lost (its claims were freed then; those made since are kept).
            for claimant, key in held:
                await conn.execute(queries.PUT_CLAIMANT, claimant, key)
            await conn.execute(queries.MARK_MISSING_CLAIMANTS, now)
            return count(await conn.execute(queries.FREE_CLAIMS_OF_THE_GONE, now - grace_ms))

        return await self._run(free, transaction=True)

    async def _put_claimant(self, claimant: str, key: int) -> None:
        async def put(conn: Connection) -> None:
            await conn.execute(queries.PUT_CLAIMANT, claimant, key)

        await self._run(put)
