"""The embedded store: one SQLite file in WAL mode, written by one thread with group commit.

Every operation runs on a single connection owned by a worker thread. The worker takes all the
operations waiting at that moment and runs them in one transaction, each inside its own savepoint,
then commits once: under load many publishes share one fsync, and each caller still gets its answer
only after the commit that made its write durable. Publishes queued one after another are stored
as one batch, by the statements of one (`append.APPENDS`).

The modules: ``store`` (the class), ``worker`` (the thread and group commit), ``append`` (storing
events), ``attempts`` (claiming, acknowledging, attempts), ``schema`` (migrations), ``rows``
(operations, columns and rows).
"""

from __future__ import annotations

from herald.store.sqlite.store import SQLiteStore
from herald.store.sqlite.worker import MAX_GROUP

__all__ = ["MAX_GROUP", "SQLiteStore"]
