"""The connection pool: opened on a migrated database, connections kept as they are."""

from __future__ import annotations

import asyncpg

from herald.errors import InvalidInput, StoreUnavailable
from herald.store.postgres.errors import DRIVER_ERRORS, describe, without_password
from herald.store.postgres.schema import migrate

MIN_CONNECTIONS = 1
MAX_CONNECTIONS = 10


async def open_pool(url: str) -> asyncpg.Pool[asyncpg.Record]:
    """A pool of connections to the database ``url`` names, its migrations applied.

    Raises:
        InvalidInput: the URL is malformed.
        StoreUnavailable: the database cannot be reached or migrated.
    """
    where = without_password(url)
    try:
        pool = await asyncpg.create_pool(
            url,
            min_size=MIN_CONNECTIONS,
            max_size=MAX_CONNECTIONS,
            server_settings={"application_name": "herald"},
            reset=_keep_session,
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


async def _keep_session(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    """Nothing to reset on a connection going back to the pool (asyncpg's default resets the
    session, a round trip more per operation): the store changes no setting, takes only
    transaction locks, listens to nothing and keeps no cursor. An open transaction is rolled back
    all the same."""
