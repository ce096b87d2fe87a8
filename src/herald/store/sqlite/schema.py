"""Bringing a SQLite file's schema up to date (the migrations are in ``store/sql/sqlite``)."""

from __future__ import annotations

import sqlite3
import time

from herald.store import migrations


def migrate(conn: sqlite3.Connection) -> None:
    """Apply the pending migrations in one transaction."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS herald_migrations"
        " (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
    )
    conn.execute("BEGIN IMMEDIATE")
    try:
        applied = {row[0] for row in conn.execute("SELECT version FROM herald_migrations")}
        for migration in migrations.load("sqlite"):
            if migration.version in applied:
                continue
            code = "\n".join(
                line for line in migration.sql.splitlines() if not line.lstrip().startswith("--")
            )
            for statement in code.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO herald_migrations VALUES (?, ?, ?)",
                (migration.version, migration.name, int(time.time() * 1000)),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
