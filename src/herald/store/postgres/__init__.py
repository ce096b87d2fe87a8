"""The shared store: PostgreSQL through an asyncpg connection pool.

Many herald processes may share one database. Each operation runs on a pooled connection, those
that write several rows inside one transaction. Publishers to one agent serialise on the agent's
row lock, which makes its ``seq`` gapless; a unique index keeps the dedupe keys unique. Consumers
claim events with ``FOR UPDATE SKIP LOCKED`` so that two never get the same event; a claim (a
heartbeat drain's step: the cursor's acknowledgement, the lease, their attempts and journal row)
is one statement, one round trip.

Appends go through a writer task with group commit, as in the SQLite store: those that arrive
while one is in flight are stored next as one batch in one transaction (one lock per agent, one
commit), and each caller gets its answer only after that commit. An append alone with one event
is one statement: one round trip. The writer keeps one pooled connection for its appends.

Times are integer milliseconds read from the store's clock, never from the database's ``now()``.

The modules: ``store`` (the class), ``queries`` (all its SQL), ``writer`` (group commit),
``append`` (storing events), ``attempts``, ``endpoints`` (webhooks and OpenClaw gateways, and
their delivery schedule), ``pool``, ``schema`` (migrations), ``errors`` (driver errors), ``rows``
(connections and rows).
"""

from __future__ import annotations

from herald.store.postgres.pool import MAX_CONNECTIONS, MIN_CONNECTIONS
from herald.store.postgres.store import TRANSACTION_TRIES, PostgresStore
from herald.store.postgres.writer import MAX_GROUP

__all__ = ["MAX_CONNECTIONS", "MAX_GROUP", "MIN_CONNECTIONS", "TRANSACTION_TRIES", "PostgresStore"]
