"""Events offered to consumers: those claimable, acknowledging, and recording attempts (with
the transaction's journal row)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from herald.errors import NotFound
from herald.feed import AttemptGroup, JournalEntry
from herald.models import EVERY_EVENT, Attempt, Event, EventMatch, StartPosition
from herald.store.journal import JournalRecord, attempt_groups, record
from herald.store.rules import (
    DEAD,
    DEAD_LETTER,
    DEAD_REASON,
    NO_SEQ_LIMIT,
    check_cursor,
    first_created_since,
    looked_through,
)
from herald.store.sqlite.counts import (
    ADD_ATTEMPTS,
    OPEN_STATUSES,
    StatusChanges,
    attempt_counts,
    changes_of,
)
from herald.store.sqlite.journal import write
from herald.store.sqlite.rows import (
    EVENT_COLUMNS,
    MUTED,
    OPEN,
    UNEXPIRED,
    as_json,
    chunks,
    insert_json_sql,
    match_sql,
)
from herald.store.tables import ATTEMPTS, EVENTS

MUTED_EVENTS = MUTED.format(events="events")

INSERT_ATTEMPTS = insert_json_sql(ATTEMPTS)

# An event names the runs it is in (migration 0031), in the UPDATE that leases or acknowledges it.
NAME_RUN = "attempt_runs = coalesce(attempt_runs || ',', '') || :run"
NAME_RUN_AT = "attempt_runs = coalesce(attempt_runs || ',', '') || ?"


def acknowledge(
    conn: sqlite3.Connection,
    agent_id: str,
    ids: list[str],
    up_to_seq: int | None,
    consumer: str | None,
    now: int,
    unheld: bool = False,
    match: EventMatch = EVERY_EVENT,
    run: RunId | None = None,
) -> list[tuple[str, int]]:
    """Mark the agent's events delivered as ``Store.ack`` says; returns the id and
    ``created_at`` of each (their attempts are the caller's to record, with whatever else its
    transaction records: with ``run``, each event marked names that run, ``RunIds``)."""
    done: list[tuple[str, int]] = []
    if up_to_seq is not None:
        (newest,) = conn.execute(
            "SELECT max(last_seq) FROM agents WHERE id = ?", (agent_id,)
        ).fetchone()
        check_cursor(up_to_seq, newest)
        # What this consumer was handed before this cursor: never an event another consumer
        # was handed (even on an expired lease: it is offered again instead), nor one handed in
        # the answer to this same cursor, which comes again when that answer was lost (see
        # ``claimable``), unless it is the event at the cursor. With ``unheld``, also what
        # nobody holds: events pushed (by a stream, over MCP), which lease nothing; never a low
        # one, a muted one or one a window held, which nothing pushes.
        matching, match_params = match_sql(match)
        handed = (
            "lease_owner = :consumer"
            " AND (lease_cursor IS NULL OR lease_cursor <> :up_to OR seq = :up_to)"
        )
        # Without ``unheld``, only what the consumer holds: read from the index of held
        # events, however many open events come before the cursor.
        unheld_sql = (
            f"lease_owner IS NULL AND priority <> 'low' AND held_by IS NULL AND NOT {MUTED_EVENTS}"
        )
        held = f"(({unheld_sql}) OR ({handed}))" if unheld else handed
        done += _mark_delivered(
            conn,
            f"seq <= :up_to AND {held}{matching}",
            {
                "now": now,
                "agent": agent_id,
                "up_to": up_to_seq,
                "consumer": consumer,
                "run": None if run is None else run.id,
                **match_params,
            },
        )
    for chunk in chunks(ids, 500):
        named = {f"id{index}": value for index, value in enumerate(chunk)}
        marks = ", ".join(f":{name}" for name in named)
        params = {"now": now, "agent": agent_id, "run": None if run is None else run.id, **named}
        done += _mark_delivered(conn, f"id IN ({marks})", params)
    return done


def _mark_delivered(
    conn: sqlite3.Connection, where: str, params: dict[str, Any]
) -> list[tuple[str, int]]:
    """The id and ``created_at`` of each event marked, in seq order. Pending events, then sent
    ones: so each statement knows what it counts out of (``counts``)."""
    marked: list[tuple[int, str, int]] = []
    changes = StatusChanges()
    for old in OPEN_STATUSES:
        rows = conn.execute(
            "UPDATE events SET status = 'delivered', is_open = 0, status_at = :now,"
            " lease_owner = NULL, lease_until = NULL"
            f"{'' if params['run'] is None else ', ' + NAME_RUN}"
            f" WHERE agent_id = :agent AND {OPEN} AND status = :old AND {where}"
            " RETURNING seq, id, created_at",
            {**params, "old": old},
        ).fetchall()
        changes.changed(params["agent"], old, "delivered", len(rows))
        marked += [(seq, event_id, created_at) for seq, event_id, created_at in rows]
    changes.apply(conn)
    return [(event_id, created_at) for _, event_id, created_at in sorted(marked)]


NEXT_RUN = (
    "SELECT (SELECT coalesce(max(id), 0) + 1 FROM attempt_runs),"
    " (SELECT coalesce(max(id), 0) FROM attempts)"
)


@dataclass(frozen=True)
class RunId:
    id: int
    after: int


class RunIds:
    """Ids for the runs of one transaction, given out before the UPDATEs that make each event
    name its run, and the run's row is written after them (``write_runs``). One writer runs the
    transaction: the next id is the table's next. An id given to a run of no event is skipped.
    Each id comes with the newest row of ``attempts`` then, which places the run among an
    event's own attempts of the same time (``HISTORY``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._next: int | None = None
        self._after = 0

    def take(self) -> RunId:
        if self._next is None:
            self._next, self._after = self._conn.execute(NEXT_RUN).fetchone()
        taken = RunId(self._next, self._after)
        self._next = taken.id + 1
        return taken


@dataclass
class Burials:
    """What a claim does with the events it finds handed out ``max_deliveries`` times already
    (0: no limit): they die (``bury``) rather than be handed out again, each kept with how many
    times it was, for the attempt that records its death (a run of ``run_ids`` per number)."""

    max_deliveries: int
    run_ids: RunIds
    dead: list[tuple[RunId, int, list[str]]] = field(default_factory=list)

    def bury(self, conn: sqlite3.Connection, dying: list[tuple[Event, int]], now: int) -> None:
        by_count: dict[int, list[str]] = {}
        for event, handed_out in dying:
            by_count.setdefault(handed_out, []).append(event.id)
        for count, ids in sorted(by_count.items()):
            run = self.run_ids.take()
            conn.execute(
                "UPDATE events SET status = 'dead', is_open = 0, status_at = :now,"
                f" lease_owner = NULL, lease_until = NULL, lease_cursor = NULL, {NAME_RUN}"
                " WHERE id IN (SELECT value FROM json_each(:ids))",
                {"now": now, "run": run.id, "ids": as_json(ids)},
            )
            self.dead.append((run, count, ids))
        changes_of([(e.agent_id, e.status.value, 1) for e, _ in dying], DEAD).apply(conn)

    def spare(
        self, conn: sqlite3.Connection, found: list[Any], read: Callable[[Any], Event], now: int
    ) -> list[Any]:
        """Of the rows ``found`` (``handed_out`` their last column), those of events that may be
        handed out again; the others die (``bury``)."""
        limit = self.max_deliveries
        if limit and any(row[-1] >= limit for row in found):
            self.bury(conn, [(read(row), row[-1]) for row in found if row[-1] >= limit], now)
            return [row for row in found if row[-1] < limit]
        return found

    def runs(self, consumer: str | None) -> list[AttemptRun]:
        """The attempts that record the deaths: one run per number of times handed out."""
        return [
            AttemptRun(DEAD_LETTER, DEAD, consumer, ids, DEAD_REASON.format(count), run)
            for run, count, ids in self.dead
        ]


def claimable(
    conn: sqlite3.Connection,
    agent_id: str,
    consumer: str | None,
    limit: int,
    now: int,
    cursor: int | None = None,
    match: EventMatch = EVERY_EVENT,
    after: int | None = None,
    through: int | None = None,
    burials: Burials | None = None,
) -> list[Event]:
    """The oldest open events not under another consumer's live lease (after seq ``after``, up
    to seq ``through``). In the answer to a ``cursor``, the event at that seq only alone: the
    answer's cursor (its last seq) must differ from the one sent, so that the next request tells
    a retry from a follow-up; or be that very event, which the consumer had seen already (its
    cursor says so). With ``burials``, those of them handed out as often as allowed die instead,
    and the look is made again while that left none."""
    matching, match_params = match_sql(match)
    params = {
        "agent": agent_id,
        "consumer": consumer,
        "now": now,
        "limit": limit + 1,
        "after": after or 0,
        "through": NO_SEQ_LIMIT if through is None else through,
        **match_params,
    }
    sql = (
        f"SELECT {EVENT_COLUMNS}, handed_out FROM events WHERE agent_id = :agent AND {OPEN}"
        f" AND {UNEXPIRED}"
        f" AND (lease_owner IS NULL OR lease_owner = :consumer OR lease_until <= :now){matching}"
        " AND seq > :after AND seq <= :through ORDER BY seq LIMIT :limit"
    )
    while True:
        rows = conn.execute(sql, params)
        read = EVENTS.reader([column[0] for column in rows.description])
        found = rows.fetchall()
        if burials is not None:
            spared = burials.spare(conn, found, read, now)
            if found and not spared:
                continue  # each look buries one at least: it ends
            found = spared
        events = [read(row) for row in found]
        others = [e for e in events if e.seq != cursor]
        return others[:limit] if others else events


def lease(
    conn: sqlite3.Connection,
    agent_id: str,
    events: list[Event],
    consumer: str,
    until: int,
    cursor: int | None,
    run: RunId | None = None,
) -> None:
    """Lease ``events`` (of the agent, oldest first) to ``consumer`` until ``until``, in the
    answer to ``cursor``; with ``run``, each names that run (``RunIds``)."""
    if events:
        named = [] if run is None else [run.id]
        conn.execute(
            "UPDATE events SET lease_owner = ?, lease_until = ?, lease_cursor = ?,"
            f" handed_out = handed_out + 1{'' if run is None else ', ' + NAME_RUN_AT}"
            " WHERE agent_id = ? AND seq BETWEEN ? AND ?"
            f" AND id IN ({', '.join('?' * len(events))})",
            [consumer, until, cursor, *named, agent_id, events[0].seq, events[-1].seq]
            + [e.id for e in events],
        )


def newest_seq(conn: sqlite3.Connection, agent_id: str) -> int:
    row = conn.execute("SELECT last_seq FROM agents WHERE id = ?", (agent_id,)).fetchone()
    return 0 if row is None else int(row[0])


def matching_seqs(
    conn: sqlite3.Connection,
    agent_id: str,
    after: int,
    through: int,
    match: EventMatch,
    now: int,
    limit: int,
) -> list[int]:
    """The seqs of the first ``limit`` open, unexpired events that ``match`` after ``after``, up
    to ``through``, whoever holds them."""
    matching, match_params = match_sql(match)
    rows = conn.execute(
        f"SELECT seq FROM events WHERE agent_id = :agent AND {OPEN} AND {UNEXPIRED}{matching}"
        " AND seq > :after AND seq <= :through ORDER BY seq LIMIT :limit",
        {"agent": agent_id, "now": now, "after": after, "through": through, "limit": limit}
        | match_params,
    )
    return [row[0] for row in rows]


PUSHED = (
    "SELECT value ->> 0 AS event_id, value ->> 1 AS agent_id, value ->> 2 AS holder"
    " FROM json_each(:pushed)"
)
COUNT_SENT = f"""
UPDATE agents SET pending_events = pending_events - sent.n, sent_events = sent_events + sent.n
FROM (
    SELECT e.agent_id, count(*) AS n FROM ({PUSHED}) AS p
    JOIN events e ON e.id = p.event_id AND e.agent_id = p.agent_id
    WHERE e.status = 'pending' GROUP BY e.agent_id
) AS sent
WHERE agents.id = sent.agent_id
"""
MARK_SENT = f"""
UPDATE events SET
    status = CASE status WHEN 'pending' THEN 'sent' ELSE status END,
    status_at = CASE status WHEN 'pending' THEN :now ELSE status_at END,
    lease_owner = CASE WHEN lease_owner IS NULL OR lease_until <= :now
        THEN p.holder ELSE lease_owner END,
    lease_until = CASE WHEN lease_owner IS NULL OR lease_until <= :now
        THEN :now ELSE lease_until END,
    lease_cursor = CASE WHEN lease_owner IS NULL OR lease_until <= :now
        THEN NULL ELSE lease_cursor END
FROM ({PUSHED}) AS p
WHERE events.id = p.event_id AND events.agent_id = p.agent_id AND events.{OPEN}
"""


def mark_pushed(conn: sqlite3.Connection, pushed: str, now: int) -> None:
    """Pushed events become ``sent`` (those still open), held by the session pushed to unless
    another holds a live lease; ``pushed`` is a JSON array of [event id, agent id, session],
    each event once. Two statements whatever the number of pushes (``rows.as_json``)."""
    params = {"pushed": pushed, "now": now}
    # Counted first, while the events still say which were pending. Pending and sent are both
    # open: the agent's oldest open event stays what it was.
    conn.execute(COUNT_SENT, params)
    conn.execute(MARK_SENT, params)


@dataclass(frozen=True)
class AttemptRun:
    """Attempts alike but for their events, as a claim, a take or an ack records them: one way,
    one outcome, one session, no error. With ``run``, stored as one row of ``attempt_runs``
    that its events name (``RunIds``); otherwise one row of ``attempts`` per event."""

    way: str
    outcome: str
    session: str | None
    event_ids: list[str]
    error: str | None = None
    run: RunId | None = None


# The rows of a run are made in SQL from its events' ids, so that a step of a drain makes no
# object and no JSON row per event for its attempts.
INSERT_RUN = """
INSERT INTO attempts (event_id, at, mechanism, outcome, session, error)
SELECT value, :now, :way, :outcome, :session, :error FROM json_each(:ids)
"""
INSERT_NAMED_RUN = """
INSERT INTO attempt_runs (id, agent_id, at, after, mechanism, outcome, session, error, event_ids)
VALUES (:run, :agent, :now, :after, :way, :outcome, :session, :error, :ids)
"""


def write_runs(
    conn: sqlite3.Connection,
    runs: Sequence[AttemptRun],
    now: int,
    kind: str,
    agent_id: str | None,
) -> None:
    """Insert the attempts of an operation, run by run, count them, and write its journal row,
    which names them (as ``write_attempts`` would the same attempts one by one)."""
    runs = [run for run in runs if run.event_ids]
    counted = Counter[tuple[str, str]]()
    for run in runs:
        params = {
            "now": now,
            "way": run.way,
            "outcome": run.outcome,
            "session": run.session,
            "error": run.error,
        }
        ids = as_json(run.event_ids)
        if run.run is None:
            conn.execute(INSERT_RUN, params | {"ids": ids})
        else:
            named = {"run": run.run.id, "agent": agent_id, "ids": ids, "after": run.run.after}
            conn.execute(INSERT_NAMED_RUN, params | named)
        counted[run.way, run.outcome] += len(run.event_ids)
    if counted:
        conn.executemany(ADD_ATTEMPTS, [(w, o, n) for (w, o), n in sorted(counted.items())])
    groups = tuple(
        AttemptGroup(r.way, r.outcome, tuple(r.event_ids), session=r.session, error=r.error)
        for r in runs
    )
    write(conn, record(now, kind, agent_id, JournalEntry(attempts=groups)))


def insert_attempts(conn: sqlite3.Connection, attempts: Sequence[Attempt]) -> None:
    """Insert attempts and count them; the operation writes its own journal row."""
    insert_attempt_rows(conn, _attempt_rows(attempts, None))


def write_attempts(
    conn: sqlite3.Connection,
    attempts: Sequence[Attempt],
    now: int,
    kind: str,
    agent_id: str | None,
) -> None:
    """Insert the attempts of an operation, and its journal row, which names them."""
    insert_attempt_rows(conn, attempt_rows(attempts, now, kind, agent_id))


@dataclass(frozen=True)
class AttemptRows:
    """Attempts as ``write_attempts`` inserts them, made before the operation runs: an
    operation that only inserts what it was given keeps the writer's thread (the one that runs
    every write, in turn) for its statements alone."""

    attempts_json: str | None
    counts: list[tuple[str, str, int]]
    journal: JournalRecord | None


def attempt_rows(
    attempts: Sequence[Attempt], now: int, kind: str, agent_id: str | None
) -> AttemptRows:
    journal = record(now, kind, agent_id, JournalEntry(attempts=attempt_groups(attempts)))
    return _attempt_rows(attempts, journal)


def _attempt_rows(attempts: Sequence[Attempt], journal: JournalRecord | None) -> AttemptRows:
    rows = as_json([ATTEMPTS.values(a) for a in attempts]) if attempts else None
    return AttemptRows(rows, attempt_counts(attempts), journal)


def insert_attempt_rows(conn: sqlite3.Connection, rows: AttemptRows) -> None:
    if rows.attempts_json is not None:
        conn.execute(INSERT_ATTEMPTS, (rows.attempts_json,))
        conn.executemany(ADD_ATTEMPTS, rows.counts)
    write(conn, rows.journal)


# A step of ``rules.first_created_since``: the seq and time of the agent's first event at a seq or
# after, from the index on the agent and seq.
FIRST_STORED = (
    "SELECT seq, created_at FROM events WHERE agent_id = ? AND seq >= ? ORDER BY seq LIMIT 1"
)


def start_position(
    conn: sqlite3.Connection,
    agent_id: str,
    match: EventMatch,
    not_before: int | None,
    now: int,
    scan: int,
) -> StartPosition:
    row = conn.execute("SELECT last_seq FROM agents WHERE id = ?", (agent_id,)).fetchone()
    if row is None:
        raise NotFound(f"no agent {agent_id}")
    newest = int(row[0])
    (oldest,) = conn.execute(
        f"SELECT min(seq) FROM events WHERE agent_id = ? AND {OPEN}", (agent_id,)
    ).fetchone()
    if oldest is None:
        return StartPosition(newest, 0, 0)
    after, too_old = oldest - 1, 0
    if not_before:
        # Events created before ``not_before`` are passed: the start is before the first seq
        # created at it or later, found by halving on the index on the agent and seq, and how
        # many of the open ones match is counted in a look.
        search = first_created_since(after, newest, not_before)
        try:
            seq = next(search)
            while True:
                seq = search.send(conn.execute(FIRST_STORED, (agent_id, seq)).fetchone())
        except StopIteration as done:
            first_new = done.value
        start = newest if first_new is None else first_new - 1
        through = looked_through(after, scan, start)
        too_old = _count_open(conn, agent_id, match, after, through, now, None)[1]
        too_old = too_old or int(through < start)  # past the look: said, not counted
        after = start
    through = looked_through(after, scan, newest)
    first, waiting, skipped = _count_open(conn, agent_id, match, after, through, now, not_before)
    if first is not None:
        return StartPosition(first - 1, waiting, too_old + skipped)
    return StartPosition(through, 0, too_old + skipped, more=through < newest)


def _count_open(
    conn: sqlite3.Connection,
    agent_id: str,
    match: EventMatch,
    after: int,
    through: int,
    now: int,
    not_before: int | None,
) -> tuple[int | None, int, int]:
    """Of the open, unexpired events that ``match`` after seq ``after`` up to ``through``:
    the first seq created at ``not_before`` or later, how many were, and how many were
    created before it."""
    matching, match_params = match_sql(match)
    params = {"agent": agent_id, "now": now, "floor": not_before or 0, "after": after}
    first, waiting, skipped = conn.execute(
        "SELECT min(seq) FILTER (WHERE created_at >= :floor),"
        " count(*) FILTER (WHERE created_at >= :floor), count(*) FILTER (WHERE created_at < :floor)"
        f" FROM events WHERE agent_id = :agent AND {OPEN} AND {UNEXPIRED}{matching}"
        " AND seq > :after AND seq <= :through",
        params | {"through": through} | match_params,
    ).fetchone()
    return first, waiting, skipped
