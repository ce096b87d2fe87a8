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
from dataclasses import dataclass

from herald.store.postgres import queries
from herald.store.postgres.listener import Listener
from herald.store.postgres.rows import Connection, Operation, Runner, count


@dataclass
class Claimant:
    """A claimant of this process: its lock's key, and the listener's connection its row was
    last written in (None: not yet)."""

    key: int
    written_in: int | None = None


class ClaimantStore:
    """The claimant part of ``PostgresStore``."""

    _run: Runner
    _listener: Listener | None
    _claimants: dict[str, Claimant]
    """This process's claimants (``hold_claims_for``)."""

    async def hold_claims_for(self, claimant: str) -> None:
        if self._listener is None:
            return
        if claimant not in self._claimants:
            self._claimants[claimant] = Claimant(_new_key())
        await self._keep_known(claimant)

    def holding(self, claimant: str) -> int | None:
        listener, known = self._listener, self._claimants.get(claimant)
        if listener is None or known is None:
            return 0  # not tied to this process: its claims only run out
        connection = listener.connections
        # Held, and known in this connection (else another process may have forgotten it).
        held = listener.holds(known.key) and known.written_in == connection
        return connection if held else None

    async def let_go_of_claimant(self, claimant: str) -> None:
        known = self._claimants.pop(claimant, None)
        if known is None or self._listener is None:
            return
        await self._run(_delete(claimant))
        await self._listener.let_go(known.key)

    async def free_claims_of_the_gone(self, grace_ms: int) -> int:
        listener = self._listener
        if listener is None:
            return 0
        for claimant in list(self._claimants):
            await self._keep_known(claimant)
        keys = [known.key for known in self._claimants.values()]
        if not listener.holds_all(keys):
            # Our own connection is in trouble, not necessarily theirs: no judging others.
            return 0

        async def free(conn: Connection) -> int:
            if await conn.fetchval(queries.HELD_OF, keys) != len(keys):
                return 0  # our connection's session is gone, though the client has not seen it
            await conn.execute(queries.MARK_MISSING_CLAIMANTS)
            return count(await conn.execute(queries.FREE_CLAIMS_OF_THE_GONE, grace_ms))

        return await self._run(free, transaction=True)

    async def _keep_known(self, claimant: str) -> None:
        """Hold the claimant's lock (again, after a connection lost), and write its row in each
        new connection: another process may have forgotten it meanwhile (its claims were freed
        then; those made since are kept)."""
        listener, known = self._listener, self._claimants.get(claimant)
        if listener is None or known is None:
            return
        if not listener.holds(known.key) and not await listener.hold(known.key):
            if not listener.refused(known.key):
                return  # taken when the connection is made again, or asked for again
            # Refused: an earlier connection of this process holds it still, and may for long
            # (until the server sees it gone). Its claims go on under a key of its own.
            await listener.let_go(known.key)
            known.key, known.written_in = _new_key(), None
            if not await listener.hold(known.key):
                return
        connection = listener.connections
        if known.written_in != connection:
            await self._run(_put(claimant, known.key))
            known.written_in = connection


def _new_key() -> int:
    return secrets.randbits(62) + 1


def _put(claimant: str, key: int) -> Operation[None]:
    async def put(conn: Connection) -> None:
        await conn.execute(queries.PUT_CLAIMANT, claimant, key)

    return put


def _delete(claimant: str) -> Operation[None]:
    async def delete(conn: Connection) -> None:
        await conn.execute(queries.DELETE_CLAIMANT, claimant)

    return delete
