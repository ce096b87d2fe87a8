"""Bringing a database's schema up to date, one process at a time."""

from __future__ import annotations

import time

from herald.store import migrations
from herald.store.postgres import queries
from herald.store.postgres.rows import Connection

MIGRATION_LOCK = int.from_bytes(b"herald", "big")
"""The ``pg_advisory_xact_lock`` key that lets one process at a time migrate a database."""


async def migrate(conn: Connection) -> None:
    """Apply the pending migrations, one process at a time."""
    async with conn.transaction():
        await conn.execute(queries.LOCK_MIGRATIONS, MIGRATION_LOCK)
        await conn.execute(queries.CREATE_MIGRATIONS_TABLE)
        applied = {row[0] for row in await conn.fetch(queries.APPLIED_MIGRATIONS)}
        for migration in migrations.load("postgres"):
            if migration.version in applied:
                continue
            await conn.execute(migration.sql)  # no arguments: several statements may run at once
            await conn.execute(
                queries.RECORD_MIGRATION,
                migration.version,
                migration.name,
                int(time.time() * 1000),
            )
