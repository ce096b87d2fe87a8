"""The tables' column lists (one per table, for every backend) against the models and the
migrated schemas: adding a column is a migration, a model field and one entry in the list."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from herald.models import Agent
from herald.store import Store
from herald.store.sqlite.rows import select_list
from herald.store.sqlite.schema import migrate
from herald.store.tables import (
    AGENTS,
    ATTEMPTS,
    DELIVERIES,
    ENDPOINTS,
    EVENT_TYPES,
    EVENTS,
    PUBLISHER_KEYS,
    REPLIES,
    SESSIONS,
    SUBSCRIPTIONS,
    Column,
    Table,
    Type,
)

pytestmark = pytest.mark.anyio

TABLES = [
    AGENTS,
    ATTEMPTS,
    DELIVERIES,
    ENDPOINTS,
    EVENT_TYPES,
    EVENTS,
    PUBLISHER_KEYS,
    REPLIES,
    SESSIONS,
    SUBSCRIPTIONS,
]
SQLITE_TYPES = {Type.TEXT: "TEXT", Type.INT: "INTEGER", Type.BOOL: "INTEGER", Type.JSON: "TEXT"}


async def stored_columns(store_url: str, table: str) -> dict[str, str]:
    """The columns of a table in the migrated database, with their declared types."""
    if store_url.startswith("sqlite"):
        conn = sqlite3.connect(store_url.removeprefix("sqlite:///"))
        try:
            rows = conn.execute(f"PRAGMA table_info({table})").fetchall()
        finally:
            conn.close()
        return {row[1]: row[2] for row in rows}
    pg = await asyncpg.connect(store_url)
    try:
        rows = await pg.fetch(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = 'public' AND table_name = $1",
            table,
        )
    finally:
        await pg.close()
    return {row["column_name"]: row["data_type"] for row in rows}


@pytest.mark.parametrize("table", TABLES, ids=lambda table: table.name)
async def test_every_column_is_in_the_migrated_schema_with_its_type(
    store_url: str, store: Store, table: Table[object]
) -> None:
    stored = await stored_columns(store_url, table.name)
    for column in table.columns:
        if store_url.startswith("sqlite"):
            assert stored[column.name] == SQLITE_TYPES[column.type], column.name
        else:
            assert stored[column.name] == column.type.value, column.name


def test_a_table_that_misses_a_field_of_its_model_is_refused() -> None:
    with pytest.raises(TypeError, match="last_seq"):
        Table("agents", Agent, tuple(c for c in AGENTS.columns if c.name != "last_seq"))


def test_rows_are_read_by_name_whatever_their_order() -> None:
    @dataclass(frozen=True)
    class Pair:
        left: str
        right: bool

    table = Table("pairs", Pair, (Column("flag", Type.BOOL, "right", read=bool), Column("left")))
    assert table.record({"left": "a", "flag": 1}) == Pair("a", True)
    assert table.record({"p_flag": None, "p_left": "b"}, "p_") == Pair("b", None)  # type: ignore[arg-type]
    assert table.values(Pair("c", False)) == (False, "c")


def test_an_agent_reads_back_from_its_row() -> None:
    agent = Agent("agt_1", "alice", "hash", 5, "https://example.com/h", '{"a":1}', 3)
    row = dict(zip(AGENTS.names, AGENTS.values(agent), strict=True))
    assert AGENTS.record({**row, "webhook_url": agent.webhook_url}) == agent


def test_an_agent_s_webhook_is_read_from_the_endpoints_index_on_sqlite(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "herald.db")
    try:
        migrate(conn)
        plan = [
            row[3]
            for row in conn.execute(
                f"EXPLAIN QUERY PLAN SELECT {select_list(AGENTS)} FROM agents WHERE id = ?", ("a",)
            )
        ]
    finally:
        conn.close()
    assert "SEARCH hook USING INDEX endpoints_agent_kind (agent_id=? AND kind=?)" in plan, plan
