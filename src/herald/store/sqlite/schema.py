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
            for statement in statements(migration.sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO herald_migrations VALUES (?, ?, ?)",
                (migration.version, migration.name, int(time.time() * 1000)),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def statements(sql: str) -> list[str]:
    """The statements of a migration, each to be run alone (``execute`` runs one), its comment
    lines left out. A statement ends at the semicolon that completes it: not at those inside a
    trigger's body or a string."""
    code = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    found: list[str] = []
    pending = ""
    for piece in code.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(WHITESPACE_AND_SEMICOLONS):
                found.append(pending)
            pending = ""
    return found + ([pending] if pending.strip(WHITESPACE_AND_SEMICOLONS) else [])


WHITESPACE_AND_SEMICOLONS = " \t\r\n;"
