"""The connection pool: opened on a migrated database, connections kept as they are."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import asyncpg

from herald.errors import InvalidInput, StoreUnavailable
from herald.store.postgres.errors import DRIVER_ERRORS, describe, without_password
from herald.store.postgres.rows import Connection
from herald.store.postgres.schema import migrate

MIN_CONNECTIONS = 1
MAX_CONNECTIONS = 10


def session_settings(schema: str | None, application: str) -> dict[str, str]:
    """The settings each connection starts with: its name, and herald's schema first."""
    settings = {"application_name": application}
    if schema is not None:
        settings["search_path"] = f'"{schema}"'
    return settings


async def open_pool(url: str, schema: str | None = None) -> asyncpg.Pool[asyncpg.Record]:
    """A pool of connections to the database ``url`` names, its migrations applied; with
    ``schema``, herald's tables are made and used there (the schema is created if need be).

    Raises:
        InvalidInput: the URL is malformed.
        StoreUnavailable: the database cannot be reached or migrated.
    """
    where = without_password(url)
    if schema is not None:
        await _create_schema(url, schema, where)
    try:
        pool = await asyncpg.create_pool(
            url,
            min_size=MIN_CONNECTIONS,
            max_size=MAX_CONNECTIONS,
            server_settings=session_settings(schema, "herald"),
            reset=_keep_session,
            # No timer to close a connection left idle: asyncpg arms one at every release and
            # cancels it at the next acquire, work done for each operation; the pool is small.
            max_inactive_connection_lifetime=0,
        )
    except ValueError as exc:  # a malformed URL: asyncpg parses it only now
        raise InvalidInput(f"cannot open PostgreSQL store {where}: {describe(exc)}") from exc
    except DRIVER_ERRORS as exc:
        raise StoreUnavailable(f"cannot open PostgreSQL store {where}: {describe(exc)}") from exc
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
    except DRIVER_ERRORS as exc:
        pool.terminate()
        raise StoreUnavailable(f"cannot migrate PostgreSQL store {where}: {describe(exc)}") from exc
    except BaseException:
        pool.terminate()
        raise
    return pool


class HeldConnection:
    """A connection taken from the pool once and kept by a user that runs one operation at a
    time (the writer's group commit), so that it does not take one from the pool and give it
    back for each operation, work that costs about a third of a lone append's. It goes back to
    the pool when an operation on it fails (it may be broken, or still cancelling a query),
    and a fresh one is taken for the next; one the server ended is forgotten as soon as asyncpg
    sees it end (the pool has taken it back by then)."""

    def __init__(self) -> None:
        self._conn: Connection | None = None
        self._on_end: Callable[[object], None] | None = None

    async def take(self, pool: asyncpg.Pool[asyncpg.Record]) -> Connection:
        if self._conn is None:
            conn = await pool.acquire()
            ended = self._forget_when(conn)
            conn.add_termination_listener(ended)
            self._conn, self._on_end = conn, ended
        return self._conn

    async def give_back(self, pool: asyncpg.Pool[asyncpg.Record]) -> None:
        conn, on_end, self._conn, self._on_end = self._conn, self._on_end, None, None
        if conn is not None and on_end is not None:
            # Either fails on a connection the pool has taken back already: nothing to do then.
            with contextlib.suppress(*DRIVER_ERRORS):
                conn.remove_termination_listener(on_end)
                await pool.release(conn)

    def _forget_when(self, conn: Connection) -> Callable[[object], None]:
        """What forgets ``conn`` when it ends, if it is still the one held by then."""

        def ended(_: object) -> None:
            if self._conn is conn:
                self._conn, self._on_end = None, None

        return ended


async def holds_a_store(url: str, schema: str | None = None) -> bool:
    """Whether herald's tables are in the database ``url`` names (in ``schema``, or else on the
    database's search path), found without making them.

    Raises:
        InvalidInput: the URL is malformed.
        StoreUnavailable: the database cannot be reached.
    """
    where = without_password(url)
    try:
        conn = await asyncpg.connect(url, server_settings=session_settings(schema, "herald"))
    except ValueError as exc:
        raise InvalidInput(f"cannot open PostgreSQL store {where}: {describe(exc)}") from exc
    except DRIVER_ERRORS as exc:
        raise StoreUnavailable(f"cannot open PostgreSQL store {where}: {describe(exc)}") from exc
    try:
        return bool(await conn.fetchval("SELECT to_regclass('herald_migrations') IS NOT NULL"))
    except DRIVER_ERRORS as exc:
        raise StoreUnavailable(f"cannot read PostgreSQL store {where}: {describe(exc)}") from exc
    finally:
        await conn.close()


async def _keep_session(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    """Nothing to reset on a connection going back to the pool (asyncpg's default resets the
    session, a round trip more per operation): the store changes no setting, takes only
    transaction locks, listens to nothing and keeps no cursor. An open transaction is rolled back
    all the same."""


async def _create_schema(url: str, schema: str, where: str) -> None:
    try:
        conn = await asyncpg.connect(url)
    except ValueError as exc:
        raise InvalidInput(f"cannot open PostgreSQL store {where}: {describe(exc)}") from exc
    except DRIVER_ERRORS as exc:
        raise StoreUnavailable(f"cannot open PostgreSQL store {where}: {describe(exc)}") from exc
    try:
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    except DRIVER_ERRORS as exc:
        raise StoreUnavailable(
            f"cannot create schema {schema!r} in PostgreSQL store {where}: {describe(exc)}"
        ) from exc
    finally:
        await conn.close()
