"""The PostgreSQL store's SQL, every statement it runs (the schema is in ``store/sql/postgres``)."""

from __future__ import annotations

from herald.pace import PACE_WINDOW_MS
from herald.store import rules
from herald.store.postgres.rows import (
    column_list,
    copies_insert,
    names,
    placeholders,
    unnest_insert,
)
from herald.store.rules import NO_SEQ_LIMIT
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
    Type,
)

AGENT_COLUMNS = column_list(AGENTS)
EVENT_COLUMNS = column_list(EVENTS)
REPLY_COLUMNS = column_list(REPLIES)
OPEN = "status IN ('pending', 'sent')"
# Whether an event's type is one its agent muted (``Preferences``): never pushed, so never
# scheduled for a webhook nor acknowledged by a pushed position. ``{events}``: the events' alias.
MUTED = """EXISTS (
    SELECT FROM agents m, jsonb_array_elements_text(m.preferences -> 'muted') g (glob)
    WHERE m.id = {events}.agent_id
      AND {events}.type LIKE replace(replace(replace(g.glob, '_', '\\_'), '*', '%'), '?', '_'))"""
MUTED_EVENTS = MUTED.format(events="events")
PUBLISH_LOCK_CLASS = 0x68657261
"""The first half of the key of every publish lock (``PUBLISH_LOCKS``), whose second half is
the handle's: an advisory lock of two halves shares no key with the single-key ones herald
takes to migrate and to tell its processes are alive."""

# Migrations

CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS herald_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at BIGINT NOT NULL
)
"""
LOCK_MIGRATIONS = "SELECT pg_advisory_xact_lock($1)"
APPLIED_MIGRATIONS = "SELECT version FROM herald_migrations"
RECORD_MIGRATION = "INSERT INTO herald_migrations (version, name, applied_at) VALUES ($1, $2, $3)"

# Agents and settings

INSERT_AGENT = f"INSERT INTO agents ({names(AGENTS)}) VALUES ({placeholders(AGENTS)})"
AGENT_BY_ID = f"SELECT {AGENT_COLUMNS} FROM agents WHERE id = $1"
AGENT_BY_HANDLE = f"SELECT {AGENT_COLUMNS} FROM agents WHERE handle = $1"
# $1 the key's hash, $2 now: the current key, or the previous one while its grace lasts.
AGENT_BY_KEY_HASH = f"""
SELECT {AGENT_COLUMNS} FROM agents
WHERE key_hash = $1 OR (previous_key_hash = $1 AND previous_until > $2)
"""
# $1 keys' hashes, $2 now: those that are an agent's key, or its previous one in its grace.
WORKING_KEY_HASHES = """
SELECT key_hash FROM agents WHERE key_hash = ANY($1::text[])
UNION
SELECT previous_key_hash FROM agents
WHERE previous_key_hash = ANY($1::text[]) AND previous_until > $2
"""
# $1 agent, $2 the new key's hash, $3 until when the current key keeps working (NULL: it stops).
ROTATE_AGENT_KEY = """
UPDATE agents SET key_hash = $2, previous_until = $3::bigint,
    previous_key_hash = CASE WHEN $3::bigint IS NULL THEN NULL ELSE key_hash END
WHERE id = $1
"""
# Byte order, as SQLite sorts, whatever the database's collation.
LIST_AGENTS = f'SELECT {AGENT_COLUMNS} FROM agents ORDER BY handle COLLATE "C"'
DELETE_AGENT_EVENTS = "DELETE FROM events WHERE agent_id = $1"
DELETE_AGENT = "DELETE FROM agents WHERE id = $1"
SET_AGENT_DELIVERY = "UPDATE agents SET delivery = $2::jsonb WHERE id = $1"
SET_AGENT_PREFERENCES = "UPDATE agents SET preferences = $2::jsonb WHERE id = $1"
GET_SETTING = "SELECT value FROM settings WHERE name = $1"
INSERT_SETTING_IF_ABSENT = (
    "INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING"
)
SET_SETTING = (
    "INSERT INTO settings (name, value) VALUES ($1, $2)"
    " ON CONFLICT (name) DO UPDATE SET value = excluded.value"
)

APPEND_ONE_COLUMNS = tuple(name for name in EVENTS.names if name not in {"agent_id", "seq"})
APPEND_ONE_CREATED_AT = 3 + APPEND_ONE_COLUMNS.index("created_at")
"""The parameter of APPEND_ONE that holds the event's ``created_at``."""
APPEND_ONE_LOCK = 3 + len(APPEND_ONE_COLUMNS)
"""The parameter of APPEND_ONE that holds the key of the agent's publish lock."""
JSON_EVENT_COLUMNS = tuple(c.name for c in EVENTS.columns if c.type is Type.JSON)


def _append_one_values() -> str:
    """The values APPEND_ONE inserts: the agent's id and next seq from the agent's row, the
    other columns from parameters $3 on."""
    parameter = iter(range(3, 3 + len(APPEND_ONE_COLUMNS)))
    given = {"agent_id": "id", "seq": "last_seq"}
    return ", ".join(
        given[c.name]
        if c.name in given
        else f"${next(parameter)}{'::jsonb' if c.type is Type.JSON else ''}"
        for c in EVENTS.columns
    )


# Append one event in one statement: $1 handle, $2 dedupe_key, then the event's columns but its
# agent_id and seq (``APPEND_ONE_COLUMNS``), which the agent's row gives, then the key of the
# agent's publish lock. The UPDATE takes the publish lock (``PUBLISH_LOCKS``) before it writes,
# and so before the transaction has an id, then locks the agent's row and takes its next seq
# (counting the event pending, and the oldest open if none was), unless an event already has the
# dedupe key. The answer is that
# event or the new one; no row if there is no such agent. The statement's snapshot may miss an
# event with the same key committed while it waited for the locks: the unique index then fails
# the statement, and run again it finds that event. The new event's journal row is written by
# the same statement (its detail as ``herald.store.journal`` writes it).
APPEND_ONE = f"""
WITH earlier AS (
    SELECT events.* FROM events JOIN agents ON agents.id = events.agent_id
    WHERE agents.handle = $1 AND events.dedupe_key = $2
), advanced AS (
    UPDATE agents SET last_seq = last_seq + 1, pending_events = pending_events + 1,
        oldest_open_at = coalesce(oldest_open_at, ${APPEND_ONE_CREATED_AT}::bigint),
        oldest_open_seq = coalesce(oldest_open_seq, last_seq + 1)
    WHERE handle = $1 AND NOT EXISTS (SELECT FROM earlier)
      AND (SELECT true FROM pg_advisory_xact_lock({PUBLISH_LOCK_CLASS}, ${APPEND_ONE_LOCK}::int))
    RETURNING id, last_seq
), inserted AS (
    INSERT INTO events ({names(EVENTS)})
    SELECT {_append_one_values()}
    FROM advanced
    RETURNING *
), journaled AS (
    INSERT INTO journal (at, kind, agent_id, detail)
    SELECT created_at, 'append', agent_id,
        json_build_object('published', json_build_array(json_build_array(agent_id, seq, seq)))::text
    FROM inserted
)
SELECT true AS created, {EVENT_COLUMNS} FROM inserted
UNION ALL
SELECT false AS created, {EVENT_COLUMNS} FROM earlier
"""

# Publishers to one agent take its publish lock (``append.publish_lock``: an advisory lock of
# its handle) before anything else, while their transaction has no id yet: the journal is read
# in transaction id order (``journal.py``), so an id taken before waiting for another publisher
# would put this one's events, numbered after the other's, before them in the feed. Keys are
# taken in the order given (ascending), so that publishers to several agents cannot deadlock.
# $2 the keys (a part of LOCK_AGENTS).
PUBLISH_LOCKS = f"""
SELECT pg_advisory_xact_lock({PUBLISH_LOCK_CLASS}, key) FROM unnest($2::int[]) AS key
"""
# Append a batch: lock the addressees (in id order, so that batches to several agents cannot
# deadlock; the triggers that count events lock them in that order too), find the dedupe keys
# already used, take the next seqs (counting the events pending, and when the first of each
# agent's was published and its seq: its oldest open event, if it had none), insert the new
# events at once.
# $1 the handles, $2 the keys of their publish locks: taken first, by the statement's one
# evaluation of its condition on no column (an InitPlan, run before any row is locked), so that
# the two are one round trip.
LOCK_AGENTS = f"""
SELECT id, handle FROM agents
WHERE handle = ANY($1::text[]) AND (SELECT count(*) FROM ({PUBLISH_LOCKS}) AS locked) >= 0
ORDER BY id
FOR UPDATE
"""
FIND_DUPLICATES = f"""
SELECT {EVENT_COLUMNS} FROM events
WHERE dedupe_key IS NOT NULL
  AND (agent_id, dedupe_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))
"""
ADVANCE_SEQS = """
UPDATE agents SET last_seq = last_seq + batch.added,
    pending_events = pending_events + batch.added,
    oldest_open_at = coalesce(oldest_open_at, batch.first_at),
    oldest_open_seq = coalesce(oldest_open_seq, last_seq + 1)
FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS batch (id, added, first_at)
WHERE agents.id = batch.id
RETURNING agents.id, agents.last_seq
"""

# ADVANCE_SEQS of one event for each agent of $1, published at $2 (a topic's copies): two arrays
# of 10,000 values fewer to encode.
ADVANCE_ONE_EACH = """
UPDATE agents SET last_seq = last_seq + 1, pending_events = pending_events + 1,
    oldest_open_at = coalesce(oldest_open_at, $2::bigint),
    oldest_open_seq = coalesce(oldest_open_seq, last_seq + 1)
WHERE id = ANY($1::text[])
RETURNING id, last_seq
"""


def journaled(statement: str, first: int) -> str:
    """``statement`` (an INSERT, UPDATE or DELETE without a WITH of its own) and, in it, the
    insert of its transaction's journal row: at, kind, agent_id and detail are parameters
    ``first`` to ``first + 3``."""
    values = ", ".join(f"${n}" for n in range(first, first + 4))
    return (
        "WITH journaled AS (INSERT INTO journal (at, kind, agent_id, detail)"
        f" VALUES ({values})) {statement}"
    )


INSERT_JOURNAL = "INSERT INTO journal (at, kind, agent_id, detail) VALUES ($1, $2, $3, $4)"

# The columns of ``EVENTS``, each an array, then the batch's journal row; the answer is each
# event's JSON as JSONB made it.
INSERT_EVENTS = journaled(
    f"""
{unnest_insert(EVENTS)}
RETURNING id, {", ".join(f"{name}::text AS {name}" for name in JSON_EVENT_COLUMNS)}
""",
    len(EVENTS.columns) + 1,
)

# Copies of one event, one for each agent (a topic's publish): their ids, agents and seqs each an
# array, every other column one value (an array of each of them cost the encoding of 10,000
# values more per column, and JSON cast once per copy), then the batch's journal row.
COPY_COLUMNS = ("id", "agent_id", "seq")
INSERT_COPIES = journaled(copies_insert(EVENTS, COPY_COLUMNS), len(EVENTS.columns) + 1)

GET_EVENT = f"SELECT {EVENT_COLUMNS} FROM events WHERE id = $1"
# Read open events: $1 agent, $2 after seq, $3 now, $4 limit.
READ_OPEN = (
    f"SELECT {EVENT_COLUMNS}, handed_out FROM events WHERE agent_id = $1 AND {OPEN}"
    " AND seq > $2 AND (expires_at IS NULL OR expires_at > $3) ORDER BY seq LIMIT $4"
)

# Which events a subscription takes (``rules.like_patterns``): $7 type patterns (none: every
# type), $8 the sender (NULL: anyone).
MATCHING = """
  AND (cardinality($7::text[]) = 0 OR type LIKE ANY($7::text[]))
  AND ($8::text IS NULL OR sender = $8::text)"""

MATCHING_45 = MATCHING.replace("$7", "$4").replace("$8", "$5")
MATCHING_56 = MATCHING.replace("$7", "$5").replace("$8", "$6")

AFTER_THROUGH = " AND seq > $9::bigint AND seq <= $10::bigint"

# Claim and take: $1 agent, $2 consumer, $3 now, $4 limit.
CLAIMABLE = f"""
SELECT id, seq, handed_out FROM events
WHERE agent_id = $1 AND {OPEN} AND (expires_at IS NULL OR expires_at > $3)
  AND (lease_owner IS NULL OR lease_owner = $2 OR lease_until <= $3){{matching}}{{after}}
ORDER BY seq
LIMIT {{limit}}
FOR UPDATE SKIP LOCKED
"""
# Why an event of ``buried`` died (``rules.DEAD_REASON``).
DEAD_REASON = f"format('{rules.DEAD_REASON.replace('{}', '%s')}', handed_out)"
# Of the events ``found``, those handed out $11 times already ($11 > 0) die: closed as dead, no
# one's lease left (``buried``); the others (``live``) are leased, their count taken up by one.
BURY = f"""
dying AS (SELECT id FROM found WHERE $11::integer > 0 AND handed_out >= $11::integer),
live AS (SELECT id, seq FROM found WHERE NOT ($11::integer > 0 AND handed_out >= $11::integer)),
claimed AS (
    SELECT id FROM live
    WHERE $6::bigint IS NULL OR seq <> $6 OR (SELECT count(*) FROM live) = 1
    ORDER BY seq
    LIMIT $4
),
leased AS (
    UPDATE events SET lease_owner = $2, lease_until = $5, lease_cursor = $6,
        handed_out = handed_out + 1
    WHERE id IN (SELECT id FROM claimed)
    RETURNING {EVENT_COLUMNS}
),
buried AS (
    UPDATE events SET status = '{rules.DEAD}', status_at = $3, lease_owner = NULL,
        lease_until = NULL, lease_cursor = NULL
    WHERE id IN (SELECT id FROM dying)
    RETURNING id, seq, handed_out
)"""
# Lease: also $5 the lease's end, $6 the cursor the request sent (NULL: none), $7 and $8 as in
# MATCHING, $9 the seq after which events are leased (0: any) and $10 the last seq they may
# have (a bounded look: the index is read from $9 to $10 at most). In the answer to a
# cursor, the event at that seq only alone: the answer's cursor (its last seq) must differ from
# the one sent, so that the next request tells a retry from a follow-up; or be that very event,
# which the consumer had seen already (its cursor says so). $11 the most times an event is
# handed out (0: no limit): an event found handed out that many times already dies instead
# (BURY), and the first row says which did, as a JSON array of [id, times handed out].
LEASE = f"""
WITH found AS MATERIALIZED (
    {CLAIMABLE.format(limit="$4 + 1", matching=MATCHING, after=AFTER_THROUGH)}
),
{BURY}
SELECT leased.*,
    CASE WHEN row_number() OVER () = 1 THEN (
        SELECT json_agg(json_build_array(id, handed_out) ORDER BY seq) FROM buried
    )::text END AS buried
FROM (SELECT) AS one LEFT JOIN leased ON true
"""
# A claim in one statement, its own transaction (a drain step: one round trip). $1 to $10 as in
# LEASE, $11 the most times an event is handed out (as in LEASE: those handed out that many
# times already die, each recorded with an attempt whose error says why), $12 the way the events
# leased are recorded under. Both its reads of open events start at
# the agent's oldest open one (none before it is open), not at its first event: the index entries of
# those delivered stay until a vacuum, and each step would read past them all. First the cursor $6
# (NULL: none) acknowledges what it acknowledges as ``ACK_HELD`` does, unless it is past the agent's
# newest seq (then nothing changes, and the answer's ``newest`` says why); the lease then takes the
# next events, those acknowledged left out (their new versions are not in the statement's snapshot);
# an attempt is recorded for each event acknowledged and each leased, and the journal row names them
# (its detail as ``herald.store.journal`` writes it). The answer: one row per event leased (a row of
# NULL events if none), each with the agent's newest seq, the first also with when the events
# acknowledged were created (in one row only: the array in each of a step's hundred rows was most of
# what the server sent); no row if there is no such agent.
CLAIM = f"""
WITH head AS (SELECT last_seq, oldest_open_seq FROM agents WHERE id = $1),
acked AS (
    UPDATE events SET status = 'delivered', status_at = $3, lease_owner = NULL, lease_until = NULL
    WHERE agent_id = $1 AND {OPEN} AND lease_owner = $2::text AND seq <= $6::bigint
      AND seq >= (SELECT oldest_open_seq FROM head)
      AND (lease_cursor IS NULL OR lease_cursor <> $6::bigint OR seq = $6::bigint){MATCHING}
      AND $6::bigint <= (SELECT last_seq FROM head)
    RETURNING id, seq, created_at
),
found AS MATERIALIZED (
    {
    CLAIMABLE.format(
        limit="$4 + 1",
        matching=MATCHING,
        after=AFTER_THROUGH
        + " AND seq >= (SELECT oldest_open_seq FROM head)"
        + " AND ($6::bigint IS NULL OR $6::bigint <= (SELECT last_seq FROM head))"
        + " AND id NOT IN (SELECT id FROM acked)",
    )
}
),
{BURY},
attempted AS (
    INSERT INTO attempts (event_id, at, mechanism, outcome, session, error)
    SELECT id, $3, '{rules.ACK}', '{rules.DELIVERED}', $2::text, NULL FROM acked
    UNION ALL
    SELECT id, $3, '{rules.DEAD_LETTER}', '{rules.DEAD}', $2::text, {DEAD_REASON}
    FROM buried
    UNION ALL
    SELECT id, $3, $12::text, '{rules.LEASED}', $2::text, NULL FROM leased
),
attempt_groups AS (
    SELECT 1 AS position, 0 AS handed_out, json_build_object(
        'way', '{rules.ACK}', 'outcome', '{rules.DELIVERED}', 'events', json_agg(id ORDER BY seq),
        'session', $2::text
    ) AS attempt_group
    FROM acked HAVING count(*) > 0
    UNION ALL
    SELECT 2, handed_out, json_build_object(
        'way', '{rules.DEAD_LETTER}', 'outcome', '{rules.DEAD}',
        'events', json_agg(id ORDER BY seq), 'session', $2::text, 'error', {DEAD_REASON}
    )
    FROM buried GROUP BY handed_out
    UNION ALL
    SELECT 3, 0, json_build_object(
        'way', $12::text, 'outcome', '{rules.LEASED}', 'events', json_agg(id ORDER BY seq),
        'session', $2::text
    )
    FROM leased HAVING count(*) > 0
),
journaled AS (
    INSERT INTO journal (at, kind, agent_id, detail)
    SELECT $3, 'claim', $1,
        json_build_object('attempts', json_agg(attempt_group ORDER BY position, handed_out))::text
    FROM attempt_groups HAVING count(*) > 0
)
SELECT head.last_seq AS newest,
    CASE WHEN row_number() OVER () = 1 THEN (SELECT array_agg(created_at) FROM acked) END
        AS acknowledged,
    CASE WHEN row_number() OVER () = 1 THEN (SELECT count(*) FROM buried) END AS buried,
    leased.*
FROM head LEFT JOIN leased ON true
"""
DELIVER = f"""
WITH taken AS MATERIALIZED ({CLAIMABLE.format(limit="$4", matching="", after="")})
UPDATE events SET status = 'delivered', status_at = $3, lease_owner = NULL, lease_until = NULL
WHERE id IN (SELECT id FROM taken)
RETURNING {EVENT_COLUMNS}
"""

# Ack: $1 agent, $2 ids, $3 up_to_seq, $4 consumer, $5 now, $6 also what nobody holds, $7 and $8
# as in MATCHING (for the cursor only). A cursor
# acknowledges what its consumer was handed before this cursor: never an event another consumer
# was handed (even on an expired lease: it is offered again instead), nor one handed in the
# answer to this same cursor, which comes again when that answer was lost, unless it is the event
# at the cursor. With $6, also what nobody holds: events pushed (by a stream, over MCP), which
# lease nothing; never a low one or one a window held, which nothing pushes.
ACK = f"""
UPDATE events SET status = 'delivered', status_at = $5, lease_owner = NULL, lease_until = NULL
WHERE agent_id = $1 AND {OPEN}
  AND (
    id = ANY($2::text[])
    OR (
      seq <= $3::bigint
      AND (
        ($6::boolean AND lease_owner IS NULL AND priority <> 'low' AND held_by IS NULL
          AND NOT {MUTED_EVENTS})
        OR (
          lease_owner = $4::text
          AND (lease_cursor IS NULL OR lease_cursor <> $3::bigint OR seq = $3::bigint)
        )
      ){MATCHING}
    )
  )
RETURNING id, created_at
"""

# A cursor's acknowledgement of what one consumer holds (``ACK`` with no ids, without what
# nobody holds): $1 agent, $2 up_to_seq, $3 consumer, $4 now, $5 and $6 as $7 and $8 in
# MATCHING. Read from the index of held events, however many open events come before the cursor.
ACK_HELD = f"""
UPDATE events SET status = 'delivered', status_at = $4, lease_owner = NULL, lease_until = NULL
WHERE agent_id = $1 AND {OPEN} AND lease_owner = $3::text AND seq <= $2::bigint
  AND (lease_cursor IS NULL OR lease_cursor <> $2::bigint OR seq = $2::bigint)
  {MATCHING_56}
RETURNING id, created_at
"""

# Where a subscription starts, in bounded looks: the agent's oldest open seq ($1 agent), the seq
# and time of its first event at seq $2 or after (from the index on the agent and seq, a step of
# ``rules.first_created_since``), and of the open, unexpired events that match after seq $6 up
# to $7 ($1 agent, $2 now, $3 created no earlier than, $4 and $5 as $7 and $8 in MATCHING): the
# first created at $3 or later, how many were, and how many before.
OLDEST_OPEN = f"SELECT min(seq) FROM events WHERE agent_id = $1 AND {OPEN}"
FIRST_STORED = (
    "SELECT seq, created_at FROM events WHERE agent_id = $1 AND seq >= $2::bigint"
    " ORDER BY seq LIMIT 1"
)
OPEN_IN_LOOK = f"""
SELECT min(seq) FILTER (WHERE created_at >= $3) AS oldest,
    count(*) FILTER (WHERE created_at >= $3) AS waiting,
    count(*) FILTER (WHERE created_at < $3) AS skipped
FROM events WHERE agent_id = $1 AND {OPEN}
    AND (expires_at IS NULL OR expires_at > $2){MATCHING_45}
    AND seq > $6::bigint AND seq <= $7::bigint
"""
# The seqs of the first open, unexpired events that match, whoever holds them: $1 agent, $2
# now, $3 after, $4 and $5 as $7 and $8 in MATCHING, $6 through, $7 how many.
MATCHING_SEQS = f"""
SELECT seq FROM events WHERE agent_id = $1 AND {OPEN}
    AND (expires_at IS NULL OR expires_at > $2){MATCHING_45}
    AND seq > $3::bigint AND seq <= $6::bigint
ORDER BY seq LIMIT $7
"""

# The agent's newest seq, against which a cursor is checked: $1 agent.
LAST_SEQ = "SELECT last_seq FROM agents WHERE id = $1"

# Each agent's inbox mark (how many open, unexpired events, the sum of their seqs): $1 agent ids,
# $2 now.
INBOX_MARKS = f"""
SELECT agent_id, count(*) AS open, sum(seq)::bigint AS seqs FROM events
WHERE agent_id = ANY($1::text[]) AND {OPEN} AND (expires_at IS NULL OR expires_at > $2)
GROUP BY agent_id
"""

# Mark sent: $1 agent, $2 ids, $3 now. Every open one is handed out once more; the pending
# ones become sent, and are counted.
MARK_SENT = f"""
WITH pushed AS (
    SELECT id, status = 'pending' AS was_pending FROM events
    WHERE agent_id = $1 AND {OPEN} AND id = ANY($2::text[])
    FOR UPDATE
),
marked AS (
    UPDATE events SET status = 'sent',
        status_at = CASE WHEN pushed.was_pending THEN $3 ELSE events.status_at END,
        handed_out = events.handed_out + 1
    FROM pushed WHERE events.id = pushed.id
    RETURNING pushed.was_pending
)
SELECT count(*) FILTER (WHERE was_pending) FROM marked
"""
# Open events of an agent handed out as often as allowed die: $1 agent, $2 ids, $3 now, $4 the
# most times an event is handed out (> 0).
BURY_DYING = f"""
UPDATE events SET status = '{rules.DEAD}', status_at = $3, lease_owner = NULL,
    lease_until = NULL, lease_cursor = NULL
WHERE agent_id = $1 AND {OPEN} AND id = ANY($2::text[]) AND handed_out >= $4
RETURNING id, handed_out
"""
# Count events handed out once more: $1 agent, $2 ids.
COUNT_HANDED_OUT = (
    f"UPDATE events SET handed_out = handed_out + 1"
    f" WHERE agent_id = $1 AND {OPEN} AND id = ANY($2::text[])"
)
# Pushes of several agents' events: $1 event ids, $2 their agents, $3 now, $4 who each was
# handed to (an ended lease, unless another consumer holds a live one).
RECORD_PUSHES = f"""
UPDATE events SET
    status = CASE events.status WHEN 'pending' THEN 'sent' ELSE events.status END,
    status_at = CASE events.status WHEN 'pending' THEN $3 ELSE events.status_at END,
    lease_owner = CASE WHEN events.lease_owner IS NULL OR events.lease_until <= $3
        THEN pushed.holder ELSE events.lease_owner END,
    lease_until = CASE WHEN events.lease_owner IS NULL OR events.lease_until <= $3
        THEN $3 ELSE events.lease_until END,
    lease_cursor = CASE WHEN events.lease_owner IS NULL OR events.lease_until <= $3
        THEN NULL ELSE events.lease_cursor END
FROM unnest($1::text[], $2::text[], $4::text[]) AS pushed (event_id, agent_id, holder)
WHERE events.id = pushed.event_id AND events.agent_id = pushed.agent_id AND events.{OPEN}
"""
# The store's history: the id its migration made, and its table's oid, which a pg_restore (that
# makes the tables anew) changes even though it restores the id.
HISTORY = """
SELECT id || 'o' || to_hex(('herald_history'::regclass)::oid::bigint) FROM herald_history
"""
# $1 agent, $2 after, $3 now, $4 through (or NULL), $5 and $6 as $7 and $8 in MATCHING: the last
# seq counted, events stored in between, how many of those that match expired.
MISSING_AFTER = f"""
SELECT least(a.last_seq, coalesce($4::bigint, a.last_seq)) AS last_seq, count(e.id) AS stored,
    count(e.id) FILTER (
        WHERE (e.status = 'expired' OR (e.{OPEN} AND e.expires_at <= $3))
        AND (cardinality($5::text[]) = 0 OR e.type LIKE ANY($5::text[]))
        AND ($6::text IS NULL OR e.sender = $6::text)
    ) AS expired
FROM agents a LEFT JOIN events e ON e.agent_id = a.id AND e.seq > $2
    AND e.seq <= coalesce($4::bigint, {NO_SEQ_LIMIT})
WHERE a.id = $1
GROUP BY a.id
"""
# Count unread: $1 agent, $2 before, $3 now.
COUNT_OVERDUE = (
    f"SELECT count(*) FROM events WHERE agent_id = $1 AND {OPEN}"
    " AND status_at <= $2 AND (expires_at IS NULL OR expires_at > $3)"
)

# Replies and attempts

INSERT_REPLY = f"""
INSERT INTO replies ({names(REPLIES)}) VALUES ({placeholders(REPLIES)})
RETURNING data::text
"""
LIST_REPLIES = f"SELECT {REPLY_COLUMNS} FROM replies WHERE event_id = $1 ORDER BY created_at, id"

INSERT_ATTEMPTS = unnest_insert(ATTEMPTS)
INSERT_ATTEMPTS_JOURNALED = journaled(INSERT_ATTEMPTS, len(ATTEMPTS.columns) + 1)
LIST_ATTEMPTS = f"SELECT {column_list(ATTEMPTS)} FROM attempts WHERE event_id = $1 ORDER BY id"

# Expire: $1 now; sessions whose expiry passed go in the same statement; the answer is the
# events expired, for the journal. Prune: $1 the time before which finished events go.
EXPIRE = f"""
WITH gone AS (DELETE FROM sessions WHERE expires_at <= $1),
lapsed AS (DELETE FROM endpoints WHERE kind = 'subscription' AND expires_at <= $1)
UPDATE events SET status = 'expired', status_at = $1, lease_owner = NULL, lease_until = NULL
WHERE {OPEN} AND expires_at IS NOT NULL AND expires_at <= $1
RETURNING id, agent_id
"""
PRUNE = (
    "DELETE FROM events WHERE status IN ('delivered', 'expired', 'dead', 'cancelled')"
    " AND status_at < $1"
)

# Endpoints (webhooks, OpenClaw) and their delivery schedule

ENDPOINT_COLUMNS = column_list(ENDPOINTS)
DELIVERY_COLUMNS = column_list(DELIVERIES)


# An agent has at most one endpoint of each kind: putting one replaces the other (its deliveries
# go with it, by cascade).
DELETE_ENDPOINT = "DELETE FROM endpoints WHERE agent_id = $1 AND kind = $2 RETURNING id"
INSERT_ENDPOINT = f"INSERT INTO endpoints ({names(ENDPOINTS)}) VALUES ({placeholders(ENDPOINTS)})"
LIST_ENDPOINTS = (
    f"SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE agent_id = $1 AND kind <> 'subscription'"
    ' ORDER BY kind COLLATE "C"'
)
# Every agent's webhook and OpenClaw endpoints by id: $1 the id to start after, $2 at most this
# many, $3 only the disabled or failing ones.
ENDPOINT_PAGE = f"""
SELECT {column_list(ENDPOINTS, "w")}, a.handle AS agent_handle
FROM endpoints w JOIN agents a ON a.id = w.agent_id
WHERE w.kind <> 'subscription' AND w.id COLLATE "C" > $1
  AND (NOT $3 OR w.state = 'disabled' OR w.failing_since IS NOT NULL)
ORDER BY w.id COLLATE "C" LIMIT $2
"""
# Disabled for their address: $1 the prefix of such a disabled_reason.
REFUSED_ENDPOINTS = f"""
SELECT {ENDPOINT_COLUMNS} FROM endpoints
WHERE state = 'disabled' AND starts_with(disabled_reason, $1) ORDER BY id COLLATE "C"
"""
# Enable: $1 endpoint, $2 the reason it must still be disabled for.
ENABLE_ENDPOINT = """
UPDATE endpoints SET state = 'active', disabled_reason = NULL, failing_since = NULL
WHERE id = $1 AND state = 'disabled' AND disabled_reason = $2
RETURNING id, agent_id, kind
"""
# Rotate: $1 endpoint, $2 new secret, $3 until when the current one keeps signing.
ROTATE_SECRET = f"""
UPDATE endpoints SET previous_secret = secret, previous_until = $3, secret = $2
WHERE id = $1
RETURNING {ENDPOINT_COLUMNS}
"""

# Live sessions: presence. Put: the columns of ``SESSIONS`` in order. Refresh: $1 ids, $2 the
# new expiry. Live: $1 agent, $2 now.
PUT_SESSION = f"""
INSERT INTO sessions ({names(SESSIONS)}) VALUES ({placeholders(SESSIONS)})
ON CONFLICT (id) DO UPDATE SET
{", ".join(f"{name} = excluded.{name}" for name in SESSIONS.names if name != "id")}
"""
REFRESH_SESSIONS = "UPDATE sessions SET expires_at = $2 WHERE id = ANY($1::text[])"
REMOVE_SESSION = "DELETE FROM sessions WHERE id = $1"
LIVE_SESSIONS = f"""
SELECT {column_list(SESSIONS)} FROM sessions
WHERE agent_id = $1 AND expires_at > $2
ORDER BY connected_at, id COLLATE "C"
"""

# Event types. Put: $1 name, $2 description, $3 payload schema (JSON text or NULL), $4 now;
# answers the row and whether it is new (xmax = 0: no earlier version of the row was locked).
EVENT_TYPE_COLUMNS = column_list(EVENT_TYPES)
PUT_EVENT_TYPE = f"""
INSERT INTO event_types ({names(EVENT_TYPES)}) VALUES ($1, $2, $3::jsonb, $4, $4)
ON CONFLICT (name) DO UPDATE SET description = excluded.description,
    payload_schema = excluded.payload_schema, updated_at = excluded.updated_at
RETURNING {EVENT_TYPE_COLUMNS}, (xmax = 0) AS created
"""
GET_EVENT_TYPE = f"SELECT {EVENT_TYPE_COLUMNS} FROM event_types WHERE name = $1"
LIST_EVENT_TYPES = f'SELECT {EVENT_TYPE_COLUMNS} FROM event_types ORDER BY name COLLATE "C"'
DELETE_EVENT_TYPE = "DELETE FROM event_types WHERE name = $1"

# Topics: a topic's subscribers are the agents with a pattern that matches its name, each glob
# made a LIKE pattern (event-type globs are matched so too: ``matching`` below).
TOPIC_GLOB_MATCHES = (
    "{name} LIKE replace(replace(replace(s.pattern, '_', '\\_'), '*', '%'), '?', '_')"
)
TOPIC_COLUMNS = f"""
t.name, t.description, t.created_at, t.updated_at,
(SELECT count(DISTINCT s.agent_id)::int FROM topic_subscriptions s
 WHERE {TOPIC_GLOB_MATCHES.format(name="t.name")}) AS subscribers
"""
# A topic just put is not yet seen by a join in its own statement: its row is read from the
# upsert's RETURNING, its subscribers counted there.
PUT_TOPIC = f"""
INSERT INTO topics AS t (name, description, created_at, updated_at) VALUES ($1, $2, $3, $3)
ON CONFLICT (name) DO UPDATE SET description = excluded.description,
    updated_at = excluded.updated_at
RETURNING {TOPIC_COLUMNS}, (xmax = 0) AS created
"""
GET_TOPIC = f"SELECT {TOPIC_COLUMNS} FROM topics t WHERE t.name = $1"
LIST_TOPICS = f'SELECT {TOPIC_COLUMNS} FROM topics t ORDER BY t.name COLLATE "C"'
NORMALISE_JSON = "SELECT $1::jsonb::text, $2::jsonb::text"
"""An event's data and reply form as JSONB stores them (read back so)."""
TOPIC_EXISTS = "SELECT true FROM topics WHERE name = $1"
DELETE_TOPIC = "DELETE FROM topics WHERE name = $1"
DELETE_EXACT_SUBSCRIPTIONS = "DELETE FROM topic_subscriptions WHERE pattern = $1"
SUBSCRIBE_TOPIC = """
INSERT INTO topic_subscriptions (agent_id, pattern, created_at) VALUES ($1, $2, $3)
ON CONFLICT (agent_id, pattern) DO NOTHING
"""
UNSUBSCRIBE_TOPIC = "DELETE FROM topic_subscriptions WHERE agent_id = $1 AND pattern = $2"
# $1 the agent's id or null, $2 a topic's name or null.
TOPIC_SUBSCRIPTIONS = f"""
SELECT s.agent_id, a.handle, s.pattern, s.created_at
FROM topic_subscriptions s JOIN agents a ON a.id = s.agent_id
WHERE ($1::text IS NULL OR s.agent_id = $1)
  AND ($2::text IS NULL OR {TOPIC_GLOB_MATCHES.format(name="$2")})
ORDER BY a.handle COLLATE "C", s.pattern COLLATE "C"
"""
TOPIC_SUBSCRIBERS = f"""
SELECT DISTINCT a.handle COLLATE "C" AS handle
FROM topic_subscriptions s JOIN agents a ON a.id = s.agent_id
WHERE {TOPIC_GLOB_MATCHES.format(name="$1")}
ORDER BY 1
"""

# A schedule's snapshot may show an endpoint (or an event) that a transaction deletes, and
# commits, before the new deliveries' foreign keys are checked: the whole schedule would fail.
# So each row is locked as it is read, as the check would lock it (KEY SHARE: a change of other
# columns does not conflict): one deleted meanwhile is passed over, and none locked can be
# deleted until the schedule commits. One locked more strongly (being deleted, or an event being
# drained) is passed over too, for the next round if it is still there: waiting for it while
# holding the rows locked so far could deadlock.
STILL_THERE = "FOR KEY SHARE OF e, w SKIP LOCKED"

# Schedule: $1 now, $2 last offered before, $3 only these agents (NULL: all), $4 not these agents,
# $5 limit; with the grace, $6 how much earlier the events of an agent with a live session that
# can push must have been offered. Another process scheduling the same deliveries meanwhile makes
# none twice. A delivery is scheduled only to an endpoint and of an event that still exist
# (``STILL_THERE``).
_SCHEDULE = """
INSERT INTO deliveries (endpoint_id, event_id, next_at)
SELECT w.id, e.id, $1
FROM events e
JOIN endpoints w ON w.agent_id = e.agent_id AND w.state = 'active' AND w.kind <> 'subscription'
WHERE e.{OPEN} AND e.status_at <= {offered} AND (e.expires_at IS NULL OR e.expires_at > $1)
  AND e.priority <> 'low' AND e.held_by IS NULL AND NOT {MUTED}
  AND ($3::text[] IS NULL OR e.agent_id = ANY($3::text[]))
  AND e.agent_id <> ALL($4::text[])
  AND e.seq > w.scheduled_through
  AND NOT EXISTS (SELECT FROM deliveries d WHERE d.endpoint_id = w.id AND d.event_id = e.id)
ORDER BY e.seq
{STILL_THERE}
LIMIT $5
ON CONFLICT (endpoint_id, event_id) DO NOTHING
"""
SCHEDULE_DELIVERIES = _SCHEDULE.format(
    OPEN=OPEN, STILL_THERE=STILL_THERE, MUTED=MUTED.format(events="e"), offered="$2"
)
SCHEDULE_DELIVERIES_PUSH_GRACE = _SCHEDULE.format(
    OPEN=OPEN,
    STILL_THERE=STILL_THERE,
    MUTED=MUTED.format(events="e"),
    offered="""CASE WHEN EXISTS (
    SELECT FROM sessions s WHERE s.agent_id = e.agent_id AND s.can_push AND s.expires_at > $1
) THEN $2 - $6::bigint ELSE $2 END""",
)

# After a schedule pass ($1 now, $2 only these agents (NULL: all), $3 not these agents): each
# active endpoint of those agents is scheduled through the seq before the first schedulable,
# unexpired open event after its mark that has no delivery to it (left for a later pass: in its
# grace, locked, past the pass's limit, or stored since), or else through its agent's last seq,
# read in the same snapshot (a seq is reserved on the agent's row, locked until the events
# commit: none up to it is still to come). The endpoints that move are locked in id order (as a
# batch of attempts locks them), and moved only while ``schedule_resets`` is what this statement
# read: a change that made earlier events schedulable again, committed meanwhile, stands
# (migration 0039).
SCHEDULED_THROUGH = f"""
WITH marks AS MATERIALIZED (
    SELECT w.id, w.schedule_resets, coalesce((
        SELECT min(e.seq) - 1 FROM events e
        WHERE e.agent_id = w.agent_id AND e.{OPEN} AND e.seq > w.scheduled_through
          AND (e.expires_at IS NULL OR e.expires_at > $1)
          AND e.priority <> 'low' AND e.held_by IS NULL AND NOT {MUTED.format(events="e")}
          AND NOT EXISTS (SELECT FROM deliveries d WHERE d.endpoint_id = w.id AND d.event_id = e.id)
    ), a.last_seq) AS through
    FROM endpoints w JOIN agents a ON a.id = w.agent_id
    WHERE w.state = 'active' AND w.kind <> 'subscription'
      AND ($2::text[] IS NULL OR w.agent_id = ANY($2::text[])) AND w.agent_id <> ALL($3::text[])
), moving AS MATERIALIZED (
    SELECT w.id FROM endpoints w JOIN marks m ON m.id = w.id
    WHERE w.scheduled_through <> m.through
    ORDER BY w.id COLLATE "C" FOR NO KEY UPDATE OF w
)
UPDATE endpoints SET scheduled_through = m.through FROM marks m
WHERE endpoints.id = m.id AND endpoints.id IN (SELECT id FROM moving)
  AND endpoints.schedule_resets = m.schedule_resets
"""
# An agent's events from a seq on may have become schedulable again (an event opened again, the
# types it mutes changed): $1 the agent, $2 the seq. Its endpoints are scheduled through no later
# than the seq before, and a pass that read them before does not move them on.
SCHEDULE_AGAIN_FROM = """
UPDATE endpoints SET scheduled_through = least(scheduled_through, $2::bigint - 1),
    schedule_resets = schedule_resets + 1
WHERE agent_id = $1
"""

# Claimed deliveries are waiting ones: the partial index of those is all a release reads.
# $1 the claimant, or NULL for every one; $2 and $3 one delivery's endpoint and event, or NULL;
# $4 the latest the claim may run out, or NULL (a claim made later is not the one meant).
RELEASE_CLAIMS = (
    "UPDATE deliveries SET claimed_by = NULL, claimed_until = NULL"
    " WHERE state = 'waiting' AND claimed_by IS NOT NULL"
    " AND ($1::text IS NULL OR claimed_by = $1)"
    " AND ($2::text IS NULL OR (endpoint_id = $2 AND event_id = $3::text))"
    " AND ($4::bigint IS NULL OR claimed_until <= $4)"
)

# Every statement that updates several subscriptions locks them first, in id order (a claim's
# paces in CLAIM_DELIVERIES, a batch's holds, the gaps maintenance marks), so that two of them in
# two processes wait for each other, never deadlock: ``subscriptions_locked``, of those ``which``.
SUBSCRIPTIONS_LOCKED = """subscriptions_locked AS MATERIALIZED (
    SELECT id FROM subscriptions WHERE {which} ORDER BY id COLLATE "C" FOR NO KEY UPDATE
)"""
# Claim: $1 worker, $2 now, $3 limit, $4 claimed until, $5 the most per endpoint, $6 and $7 the
# endpoints with requests in flight and how many. Each active endpoint's first due deliveries,
# as many as it has room for, are read from its index range (the backlog of an endpoint with no
# room is never read) and locked, skipping those another worker is claiming; one whose claim
# committed meanwhile is checked again on its new version and left out. The answer is each
# delivery with its endpoint, event and agent, their columns named with the prefixes ``d_``,
# ``w_``, ``e_`` and ``a_``.
# A subscription a receiver asked to wait (``held_until``) has none claimed until then; with $8
# a pace (one delivery per $8 ms: ``pace.paced_allowance``), a subscription's room is also
# what its pace allows, and its pace moves on by what was claimed (a claim racing this one in
# another process may read the same pace, and both take it; the pace moves on by both, so the
# rate holds over time). Its subscriptions are locked in id order before their paces move on
# (``SUBSCRIPTIONS_LOCKED``): two claims of the same subscriptions in two processes then wait for
# each other, never deadlock.
PACED_LOCKED = SUBSCRIPTIONS_LOCKED.format(
    which="$8::float8 IS NOT NULL AND id IN (SELECT endpoint_id FROM due)"
)
CLAIM_DELIVERIES = f"""
WITH busy AS (
    SELECT * FROM unnest($6::text[], $7::int[]) AS busy(endpoint_id, requests)
), locked AS MATERIALIZED (
    SELECT d.endpoint_id, d.event_id, d.next_at
    FROM endpoints w
    LEFT JOIN subscriptions s ON w.kind = 'subscription' AND s.id = w.id
    CROSS JOIN LATERAL (
        SELECT x.endpoint_id, x.event_id, x.next_at
        FROM deliveries x
        WHERE x.endpoint_id = w.id AND x.state = 'waiting' AND x.next_at <= $2
          AND (x.claimed_until IS NULL OR x.claimed_until <= $2)
        ORDER BY x.next_at, x.event_id
        LIMIT greatest(least(
            $5::int - coalesce((SELECT requests FROM busy WHERE busy.endpoint_id = w.id), 0),
            CASE WHEN s.id IS NULL OR $8::float8 IS NULL THEN $5::int
                ELSE floor((greatest({PACE_WINDOW_MS}, $8::float8)
                    - (greatest(coalesce(s.paced_until, 0), $2) - $2)) / $8::float8)::int END
        ), 0)
        FOR UPDATE OF x SKIP LOCKED
    ) d
    WHERE w.state = 'active' AND (w.expires_at IS NULL OR w.expires_at > $2)
      AND (s.held_until IS NULL OR s.held_until <= $2)
), due AS (
    SELECT endpoint_id, event_id FROM locked ORDER BY next_at, event_id LIMIT $3
), {PACED_LOCKED}, paced AS (
    UPDATE subscriptions s
    SET paced_until
        = greatest(coalesce(s.paced_until, 0), $2) + ceil(c.taken * $8::float8)::bigint
    FROM (SELECT endpoint_id, count(*) AS taken FROM due GROUP BY endpoint_id) c
    WHERE s.id = c.endpoint_id AND s.id IN (SELECT id FROM subscriptions_locked)
), claimed AS (
    UPDATE deliveries d SET claimed_by = $1, claimed_until = $4
    FROM due
    WHERE d.endpoint_id = due.endpoint_id AND d.event_id = due.event_id
    RETURNING d.*
)
SELECT
    {column_list(DELIVERIES, "d", "d_")},
    {column_list(ENDPOINTS, "w", "w_")},
    {column_list(EVENTS, "e", "e_")},
    {column_list(AGENTS, "a", "a_")}
FROM claimed d
JOIN endpoints w ON w.id = d.endpoint_id
JOIN events e ON e.id = d.event_id
JOIN agents a ON a.id = e.agent_id
ORDER BY e.created_at, e.seq
"""

# The endpoints a batch of attempts is about, before and after it, for the journal: $1 their
# ids. Locked first, in the order NOTE_ENDPOINT updates them, so that what is read before is
# what the batch changes; NO KEY UPDATE, as the update is: a schedule locking the endpoint for
# its new deliveries (``STILL_THERE``) is not made to pass it over.
ENDPOINT_LOOKS = """
SELECT id, agent_id, kind, state, failing_since, disabled_reason, last_error FROM endpoints
WHERE id = ANY($1::text[]) ORDER BY id COLLATE "C"
"""
LOCK_ENDPOINT_LOOKS = ENDPOINT_LOOKS + "FOR NO KEY UPDATE"

# Finish a batch of attempts, endpoints first (the order in which replacing an endpoint locks
# rows), each table's rows in key order; one statement per table whatever the batch's size. The
# endpoints (locked already, by LOCK_ENDPOINT_LOOKS): $1 their ids, $2 now, $3 whether each one's
# last attempt succeeded, $4 whether an attempt in the batch did, $5 each one's last error.
NOTE_ENDPOINTS = """
UPDATE endpoints SET
    failing_since = CASE WHEN n.ok THEN NULL WHEN n.recovered THEN $2
        ELSE coalesce(failing_since, $2) END,
    last_error = n.error, last_attempt_at = $2,
    last_ok_at = CASE WHEN n.ok OR n.recovered THEN $2 ELSE last_ok_at END
FROM unnest($1::text[], $3::boolean[], $4::boolean[], $5::text[]) AS n (id, ok, recovered, error)
WHERE endpoints.id = n.id
"""
# Disable: $1 the endpoints, $2 each one's reason (for good), or $3 the time it must have been
# failing since (its failing span as NOTE_ENDPOINTS left it).
DISABLE_ENDPOINTS = """
UPDATE endpoints SET state = 'disabled',
    disabled_reason = coalesce(d.reason, 'kept failing for too long; last error: ' || last_error)
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS d (id, reason, since)
WHERE endpoints.id = d.id
  AND (d.reason IS NOT NULL OR (failing_since IS NOT NULL AND failing_since <= d.since))
"""
# The events: $1 their ids (in key order), $2 each one's new status (sent never undoes
# delivered), $3 now. One statement, its rows locked in key order: the trigger that counts
# events then locks their agents' rows in id order, once, as a publish does.
FINISH_DELIVERY_EVENTS = f"""
WITH locked AS MATERIALIZED (
    SELECT id FROM events WHERE id = ANY($1::text[]) ORDER BY id COLLATE "C" FOR NO KEY UPDATE
)
UPDATE events SET status = finished.status, status_at = $3
FROM unnest($1::text[], $2::text[]) AS finished (id, status)
WHERE events.id = finished.id AND events.id IN (SELECT id FROM locked) AND events.{OPEN}
  AND (finished.status = 'delivered' OR events.status = 'pending')
"""
# The deliveries, locked in key order (event, then endpoint) as every batch locks them: $1 their
# endpoints, $2 their events, $3 each one's next time (NULL: finished), $4 state, $5 error.
FINISH_DELIVERIES = """
WITH finished AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[])
        AS f (endpoint_id, event_id, next_at, state, error)
), locked AS MATERIALIZED (
    SELECT d.endpoint_id, d.event_id FROM deliveries d
    JOIN finished f ON f.endpoint_id = d.endpoint_id AND f.event_id = d.event_id
    ORDER BY d.event_id COLLATE "C", d.endpoint_id COLLATE "C" FOR NO KEY UPDATE OF d
)
UPDATE deliveries SET attempts = attempts + 1, next_at = coalesce(f.next_at, deliveries.next_at),
    state = f.state, claimed_by = NULL, claimed_until = NULL, last_error = f.error
FROM finished f, locked l
WHERE deliveries.endpoint_id = f.endpoint_id AND deliveries.event_id = f.event_id
  AND l.endpoint_id = f.endpoint_id AND l.event_id = f.event_id
"""
LIST_DELIVERIES = (
    f"SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE event_id = $1"
    ' ORDER BY endpoint_id COLLATE "C"'
)

# MCP Events webhook subscriptions: an endpoint of kind 'subscription' each and its row in
# subscriptions (same id). The events a subscription ``s`` takes of its agent's ``e``: its type
# globs as LIKE patterns (see ``rules.like_patterns``) and its sender.
SUBSCRIPTION_MATCHES = """
  AND (s.match_sender IS NULL OR e.sender = s.match_sender)
  AND (jsonb_array_length(s.match_types) = 0 OR EXISTS (
    SELECT FROM jsonb_array_elements_text(s.match_types) g (glob)
    WHERE e.type LIKE replace(replace(replace(g.glob, '_', '\\_'), '*', '%'), '?', '_')))"""
SUBSCRIPTION_COLUMNS = column_list(SUBSCRIPTIONS, "s")
# $1 agent (NULL: any), $2 ids (NULL: any).
LIST_SUBSCRIPTIONS = f"""
SELECT {SUBSCRIPTION_COLUMNS}, {column_list(ENDPOINTS, "w", "w_")}
FROM subscriptions s JOIN endpoints w ON w.id = s.id
WHERE ($1::text IS NULL OR s.agent_id = $1) AND ($2::text[] IS NULL OR s.id = ANY($2::text[]))
ORDER BY s.id COLLATE "C"
"""
LOCK_SUBSCRIPTION = f"""
SELECT {SUBSCRIPTION_COLUMNS}, {column_list(ENDPOINTS, "w", "w_")}
FROM subscriptions s JOIN endpoints w ON w.id = s.id
WHERE s.id = $1
FOR UPDATE OF w, s
"""
# Puts of one agent's subscriptions wait for each other here (any process), so that the count of
# its live ones a new one is checked against is still true when it is inserted. NO KEY UPDATE:
# it does not hold back inserts that only reference the agent.
LOCK_SUBSCRIBER = "SELECT FROM agents WHERE id = $1 FOR NO KEY UPDATE"
# $1 agent, $2 now.
LIVE_SUBSCRIPTIONS = """
SELECT count(*) FROM subscriptions s JOIN endpoints w ON w.id = s.id
WHERE s.agent_id = $1 AND (w.expires_at IS NULL OR w.expires_at > $2)
"""
INSERT_SUBSCRIPTION = (
    f"INSERT INTO subscriptions ({names(SUBSCRIPTIONS)}) VALUES ({placeholders(SUBSCRIPTIONS)})"
)
UPDATE_ENDPOINT = f"""
UPDATE endpoints SET ({names(ENDPOINTS)}) = ROW({placeholders(ENDPOINTS)})
WHERE id = ${len(ENDPOINTS.names) + 1}
"""
UPDATE_SUBSCRIPTION = f"""
UPDATE subscriptions SET ({names(SUBSCRIPTIONS)}) = ROW({placeholders(SUBSCRIPTIONS)})
WHERE id = ${len(SUBSCRIPTIONS.names) + 1}
"""
DELETE_SUBSCRIPTION = "DELETE FROM endpoints WHERE id = $1 AND kind = 'subscription'"
# The watermark: $1 subscription, $2 an event being sent (counted as delivered; '' none), $3 now.
SUBSCRIPTION_HEAD = """
SELECT s.after_seq, a.last_seq FROM subscriptions s JOIN agents a ON a.id = s.agent_id
WHERE s.id = $1
"""
# The oldest matching events after a subscription's start still owed: $1 subscription, $2 now,
# $3 how many.
SUBSCRIPTION_OWED = f"""
SELECT e.seq, e.id FROM subscriptions s JOIN events e ON e.agent_id = s.agent_id
WHERE s.id = $1 AND e.seq > s.after_seq{SUBSCRIPTION_MATCHES}
  AND (
    EXISTS (SELECT FROM deliveries d
            WHERE d.endpoint_id = s.id AND d.event_id = e.id AND d.state = 'waiting')
    OR (e.{OPEN} AND (e.expires_at IS NULL OR e.expires_at > $2)
        AND NOT EXISTS (SELECT FROM deliveries d
                        WHERE d.endpoint_id = s.id AND d.event_id = e.id))
  )
ORDER BY e.seq LIMIT $3
"""
# Move a subscription's start up: $1 subscription, $2 the new start.
ADVANCE_SUBSCRIPTION = "UPDATE subscriptions SET after_seq = $2 WHERE id = $1 AND after_seq < $2"
# Schedule: $1 now, $2 limit. Another process scheduling the same deliveries meanwhile makes none
# twice.
SCHEDULE_SUBSCRIPTION_DELIVERIES = f"""
INSERT INTO deliveries (endpoint_id, event_id, next_at)
SELECT w.id, e.id, $1
FROM endpoints w
JOIN subscriptions s ON s.id = w.id
JOIN events e ON e.agent_id = w.agent_id AND e.seq > s.after_seq
WHERE w.kind = 'subscription' AND w.state = 'active'
  AND (w.expires_at IS NULL OR w.expires_at > $1)
  AND e.{OPEN} AND (e.expires_at IS NULL OR e.expires_at > $1){SUBSCRIPTION_MATCHES}
  AND NOT EXISTS (SELECT FROM deliveries d WHERE d.endpoint_id = w.id AND d.event_id = e.id)
ORDER BY e.seq
{STILL_THERE}
LIMIT $2
ON CONFLICT (endpoint_id, event_id) DO NOTHING
"""

# What an operator lists and counts. A page of events is made by ``overview.events_page``; the
# counts below read the agents' rows, a small table or an index, never every event. $1 now; in
# AGENT_SUMMARIES, $2 the one agent (NULL: every agent), $3 the handle to start after, $4 what the
# handle contains, $5 at most this many (NULL: all); in TOP_PENDING, $2 how many.
GET_ENDPOINT = f"SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE id = $1"
NEXT_ATTEMPTS = """
SELECT endpoint_id, min(next_at) AS next_at FROM deliveries
WHERE state = 'waiting' AND endpoint_id = ANY($1::text[]) GROUP BY endpoint_id
"""
# Open events past their expiry that the upkeep has not marked expired yet, per agent: few (it
# marks them every few seconds), read from the expiry index. The counts in the agents' rows hold
# them until then; the pending events an operator is shown do not.
OVERDUE = f"""
SELECT agent_id, count(*) AS n FROM events
WHERE {OPEN} AND expires_at IS NOT NULL AND expires_at <= $1
GROUP BY agent_id
"""
AGENT_SUMMARIES = f"""
WITH overdue AS ({OVERDUE})
SELECT {AGENT_COLUMNS},
    agents.pending_events + agents.sent_events - coalesce(overdue.n, 0) AS pending,
    (SELECT count(*) FROM sessions s WHERE s.agent_id = agents.id AND s.expires_at > $1)
        AS live_sessions,
    greatest(
        (SELECT e.created_at FROM events e WHERE e.agent_id = agents.id
            ORDER BY e.seq DESC LIMIT 1),
        (SELECT max(s.seen_at) FROM sessions s WHERE s.agent_id = agents.id)
    ) AS last_activity_at
FROM agents LEFT JOIN overdue ON overdue.agent_id = agents.id
WHERE ($2::text IS NULL OR id = $2) AND ($3::text IS NULL OR handle COLLATE "C" > $3)
    AND ($4::text IS NULL OR strpos(handle, $4) > 0)
ORDER BY handle COLLATE "C" LIMIT $5
"""
EVENTS_BY_STATUS = """
SELECT coalesce(sum(pending_events), 0)::bigint AS pending,
    coalesce(sum(sent_events), 0)::bigint AS sent,
    coalesce(sum(delivered_events), 0)::bigint AS delivered,
    coalesce(sum(expired_events), 0)::bigint AS expired,
    coalesce(sum(dead_events), 0)::bigint AS dead,
    coalesce(sum(last_seq), 0)::bigint AS published
FROM agents
"""
ATTEMPTS_RECORDED = """
SELECT mechanism, outcome, sum(recorded)::bigint AS n FROM attempt_counts
GROUP BY mechanism, outcome ORDER BY mechanism COLLATE "C", outcome COLLATE "C"
"""
# Attempt counts are added a row per statement that records attempts: summed up again by the
# upkeep, so that the table stays as small as its mechanisms and outcomes. A row added meanwhile
# is not in the statement's snapshot, and stays.
FOLD_ATTEMPT_COUNTS = """
WITH folded AS (DELETE FROM attempt_counts RETURNING mechanism, outcome, recorded)
INSERT INTO attempt_counts (mechanism, outcome, recorded)
SELECT mechanism, outcome, sum(recorded) FROM folded GROUP BY mechanism, outcome
"""
TOP_PENDING = f"""
WITH overdue AS ({OVERDUE})
SELECT id, handle, n FROM (
    SELECT a.id, a.handle, a.pending_events + a.sent_events - coalesce(overdue.n, 0) AS n
    FROM agents a LEFT JOIN overdue ON overdue.agent_id = a.id
    WHERE a.pending_events + a.sent_events > 0
) AS backlog
WHERE n > 0 ORDER BY n DESC, handle COLLATE "C" LIMIT $2
"""
# The oldest open, unexpired event. Each agent's row keeps when its oldest open event was
# published (oldest_open_at); only an agent with open events past their expiry (OVERDUE) may have
# its oldest unexpired one published later: so that event is one of the first agents' by that
# time, one more of them than there are such agents. Each is found by one seek in the open
# events' index.
OLDEST_PENDING = f"""
WITH candidates AS (
    SELECT id, handle FROM agents WHERE oldest_open_at IS NOT NULL
    ORDER BY oldest_open_at LIMIT (SELECT count(*) FROM ({OVERDUE}) AS overdue) + 1
)
SELECT e.id, c.id AS agent_id, c.handle, e.created_at FROM candidates c
CROSS JOIN LATERAL (
    SELECT o.id, o.created_at FROM events o
    WHERE o.agent_id = c.id AND o.{OPEN} AND (o.expires_at IS NULL OR o.expires_at > $1)
    ORDER BY o.seq LIMIT 1
) AS e
ORDER BY e.created_at, e.id COLLATE "C" LIMIT 1
"""
# The open, unexpired events the metrics count: the counts in the agents' rows, less those past
# their expiry that the upkeep has yet to mark ($1 now).
PENDING = f"""
SELECT coalesce(sum(pending_events + sent_events), 0)::bigint
    - (SELECT coalesce(sum(n), 0) FROM ({OVERDUE}) AS overdue)::bigint AS pending
FROM agents
"""
DEAD_EVENTS = "SELECT coalesce(sum(dead_events), 0)::bigint FROM agents"
SCHEDULED_EVENTS = "SELECT count(*) FROM events WHERE status = 'scheduled'"
CANCELLED_EVENTS = "SELECT count(*) FROM events WHERE status = 'cancelled'"
SESSIONS_BY_WAY = """
SELECT transport, era, count(*) AS n FROM sessions WHERE expires_at > $1
GROUP BY transport, era ORDER BY transport COLLATE "C", era COLLATE "C"
"""
CLIENTS = """
SELECT client_name, era, count(*) AS n FROM sessions WHERE expires_at > $1
GROUP BY client_name, era ORDER BY client_name COLLATE "C" NULLS FIRST, era COLLATE "C"
"""
ENDPOINTS_BY_STATE = """
SELECT kind, shown, count(*) AS n FROM (
    SELECT kind, CASE WHEN state = 'active' AND failing_since IS NOT NULL THEN 'failing'
        ELSE state END AS shown
    FROM endpoints) AS e
GROUP BY kind, shown ORDER BY kind COLLATE "C", shown COLLATE "C"
"""
# Redeliver: $1 event, $2 now. A pending event is being offered: it is offered again only once
# a delivery of it was given up on. The row is locked, so that two redelivers take turns.
REDELIVERABLE = """
SELECT e.status <> 'pending' OR EXISTS (
    SELECT FROM deliveries d WHERE d.event_id = e.id AND d.state = 'dead')
FROM events e WHERE e.id = $1 FOR UPDATE
"""
REOFFER_EVENT = f"""
UPDATE events SET status = 'pending', status_at = $2, lease_owner = NULL,
    lease_until = NULL, lease_cursor = NULL, handed_out = 0,
    expires_at = CASE WHEN expires_at IS NULL THEN NULL ELSE $2 + expires_at - created_at END
WHERE id = $1 RETURNING {EVENT_COLUMNS}
"""
RESTART_DELIVERIES = """
UPDATE deliveries SET state = 'waiting', attempts = 0, next_at = $2, claimed_by = NULL,
    claimed_until = NULL, last_error = NULL
WHERE event_id = $1 AND state IN ('done', 'dead')
  AND endpoint_id IN (SELECT id FROM endpoints WHERE kind <> 'subscription')
"""

# Publisher keys

PUBLISHER_KEY_COLUMNS = column_list(PUBLISHER_KEYS)
INSERT_PUBLISHER_KEY = (
    f"INSERT INTO publisher_keys ({names(PUBLISHER_KEYS)}) VALUES ({placeholders(PUBLISHER_KEYS)})"
)
PUBLISHER_KEY_BY_HASH = f"SELECT {PUBLISHER_KEY_COLUMNS} FROM publisher_keys WHERE key_hash = $1"
LIST_PUBLISHER_KEYS = f'SELECT {PUBLISHER_KEY_COLUMNS} FROM publisher_keys ORDER BY id COLLATE "C"'
DELETE_PUBLISHER_KEY = "DELETE FROM publisher_keys WHERE id = $1"

# The journal, read in commit order: by (tx, position), only the rows of transactions older
# than every transaction of this database still running (herald's writers all connect to it),
# so that a reader never passes a row that commits later (``journal.read_horizon``). First the
# snapshot: its xmax and the ids running (cluster-wide), and the horizon kept in settings.
JOURNAL_SNAPSHOT = """
SELECT pg_snapshot_xmax(s)::text AS xmax,
    array(SELECT x::text FROM pg_snapshot_xip(s) AS x) AS running,
    (SELECT value FROM settings WHERE name = 'journal_horizon') AS horizon
FROM pg_current_snapshot() AS s
"""
# Then, read after it, which of them run in this database (the low 32 bits of their ids).
RUNNING_HERE = """
SELECT backend_xid::text FROM pg_stat_activity
WHERE datname = current_database() AND backend_xid IS NOT NULL
"""
# Read: $1 after tx, $2 after position, $3 the horizon, $4 agent (NULL: any), $5 limit.
READ_JOURNAL = """
SELECT tx::text AS tx, position, at, kind, agent_id, detail FROM journal
WHERE (tx, position) > ($1::text::xid8, $2::bigint) AND tx < $3::text::xid8
  AND ($4::text IS NULL OR agent_id = $4::text OR agent_id IS NULL)
ORDER BY tx, position
LIMIT $5
"""
# The same rows, the last $5 of them (still oldest first): a reader skipping ahead.
READ_NEWEST_JOURNAL = """
SELECT * FROM (
  SELECT tx::text AS tx, tx AS tx_order, position, at, kind, agent_id, detail FROM journal
  WHERE (tx, position) > ($1::text::xid8, $2::bigint) AND tx < $3::text::xid8
    AND ($4::text IS NULL OR agent_id = $4::text OR agent_id IS NULL)
  ORDER BY tx DESC, position DESC
  LIMIT $5
) AS newest
ORDER BY tx_order, position
"""
# What the feed shows of events: $1 ids; $2, $3, $4 the agent, first and last seq of ranges.
FEED_EVENTS = """
SELECT e.id, e.agent_id, a.handle, e.seq, e.type
FROM events e JOIN agents a ON a.id = e.agent_id
WHERE e.id = ANY($1::text[])
UNION ALL
SELECT e.id, e.agent_id, a.handle, e.seq, e.type
FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS r (agent_id, first_seq, last_seq)
JOIN events e ON e.agent_id = r.agent_id AND e.seq BETWEEN r.first_seq AND r.last_seq
JOIN agents a ON a.id = e.agent_id
"""
AGENT_HANDLES = "SELECT id, handle FROM agents WHERE id = ANY($1::text[])"
# Prune: $1 the time before which rows go, $2 the read horizon (``journal.read_horizon``). In
# commit order from the oldest, up to the first row written at or after $1, the newest row kept in
# any case, and only rows final for every reader; the newest row deleted becomes the horizon
# (never moved back by a process that pruned less at the same time). The answer is how many went.
PRUNE_JOURNAL = """
WITH kept AS (SELECT tx, position FROM journal WHERE at >= $1 ORDER BY tx, position LIMIT 1),
newest AS (SELECT tx, position FROM journal ORDER BY tx DESC, position DESC LIMIT 1),
bound AS (
    SELECT tx, position FROM kept
    UNION ALL
    SELECT tx, position FROM newest WHERE NOT EXISTS (SELECT FROM kept)
),
gone AS (
    DELETE FROM journal j USING bound b
    WHERE (j.tx, j.position) < (b.tx, b.position) AND j.tx < $2::text::xid8
    RETURNING j.tx, j.position
),
horizon AS (SELECT tx, position FROM gone ORDER BY tx DESC, position DESC LIMIT 1),
noted AS (
    INSERT INTO settings (name, value)
    SELECT 'journal_horizon', tx::text || '.' || position FROM horizon
    ON CONFLICT (name) DO UPDATE SET value = excluded.value
    WHERE (split_part(excluded.value, '.', 1)::xid8, split_part(excluded.value, '.', 2)::bigint)
        > (split_part(settings.value, '.', 1)::xid8, split_part(settings.value, '.', 2)::bigint)
)
SELECT count(*) FROM gone
"""

# Claimants (0016): a worker's claims live as long as the advisory lock its process holds. The
# keys of this database's advisory locks held now: a bigint key shows as its two halves.
_LOCKED_KEYS = """
SELECT (l.classid::bigint << 32) | l.objid::bigint AS lock_key FROM pg_locks l
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""
# $1 the claimant, $2 its lock's key.
PUT_CLAIMANT = """
INSERT INTO claimants (id, lock_key) VALUES ($1, $2)
ON CONFLICT (id) DO UPDATE SET lock_key = EXCLUDED.lock_key, missing_since = NULL
WHERE claimants.lock_key <> EXCLUDED.lock_key OR claimants.missing_since IS NOT NULL
"""
DELETE_CLAIMANT = "DELETE FROM claimants WHERE id = $1"
# $1 keys: how many of them are held now.
HELD_OF = f"SELECT count(*) FROM ({_LOCKED_KEYS}) AS held WHERE lock_key = ANY($1::bigint[])"
# Only the rows whose lock came or went since the last look are written. Times are the
# database's: one clock for every process, however far apart their own are.
_DATABASE_NOW = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
MARK_MISSING_CLAIMANTS = f"""
UPDATE claimants
SET missing_since = CASE WHEN lock_key IN ({_LOCKED_KEYS}) THEN NULL ELSE {_DATABASE_NOW} END
WHERE (lock_key IN ({_LOCKED_KEYS})) = (missing_since IS NOT NULL)
"""
# $1 the grace (ms): missing for that long, gone. Their claims are freed (claimed ones are
# waiting ones).
FREE_CLAIMS_OF_THE_GONE = f"""
WITH gone AS (
    DELETE FROM claimants
    WHERE missing_since <= {_DATABASE_NOW} - $1::bigint AND lock_key NOT IN ({_LOCKED_KEYS})
    RETURNING id
)
UPDATE deliveries SET claimed_by = NULL, claimed_until = NULL
WHERE state = 'waiting' AND claimed_by IN (SELECT id FROM gone)
"""

# What a batch of attempts does to its MCP Events subscriptions (``rules.minute_counts``). Add
# to their rolling windows: $1 subscriptions, $2 minutes, $3 attempts, $4 failures (endpoints of
# other kinds have no subscriptions row and are left out).
ADD_SUBSCRIPTION_MINUTES = """
INSERT INTO subscription_minutes (subscription_id, minute, attempts, failures)
SELECT m.id, m.minute, m.attempts, m.failures
FROM unnest($1::text[], $2::bigint[], $3::int[], $4::int[]) AS m (id, minute, attempts, failures)
WHERE m.id IN (SELECT id FROM subscriptions)
ON CONFLICT (subscription_id, minute) DO UPDATE SET
    attempts = subscription_minutes.attempts + excluded.attempts,
    failures = subscription_minutes.failures + excluded.failures
"""
# The windows of active subscriptions: $1 the subscriptions, $2 the window's first minute.
SUBSCRIPTION_WINDOWS = """
SELECT m.subscription_id, sum(m.attempts)::int AS attempts, sum(m.failures)::int AS failures
FROM subscription_minutes m JOIN endpoints w ON w.id = m.subscription_id AND w.state = 'active'
WHERE m.subscription_id = ANY($1::text[]) AND m.minute >= $2
GROUP BY m.subscription_id
"""
# $1 the subscription, $2 why.
SUSPEND_SUBSCRIPTION = """
UPDATE endpoints SET state = 'disabled', disabled_reason = $2 WHERE id = $1 AND state = 'active'
"""
# A receiver's Retry-After: $1 subscriptions, $2 until when each.
HOLD_SUBSCRIPTIONS = f"""
WITH {SUBSCRIPTIONS_LOCKED.format(which="id = ANY($1::text[])")}
UPDATE subscriptions SET held_until = greatest(coalesce(held_until, 0), h.until)
FROM unnest($1::text[], $2::bigint[]) AS h (id, until)
WHERE subscriptions.id = h.id AND subscriptions.id IN (SELECT id FROM subscriptions_locked)
"""
FORGET_SUBSCRIPTION_MINUTES = "DELETE FROM subscription_minutes WHERE subscription_id = $1"
# $1 the first minute of every window now.
FORGET_OLD_MINUTES = "DELETE FROM subscription_minutes WHERE minute < $1"
# Gaps. Before events expire ($1 now): the subscriptions still owed one no delivery was made of
# (one made is sent all the same).
EXPIRY_GAPS = f"""gap_at IS NULL AND id IN (
    -- Read from the overdue events (their index), not from each subscription's backlog.
    SELECT s.id FROM events e JOIN subscriptions s ON s.agent_id = e.agent_id
    WHERE e.{OPEN} AND e.expires_at IS NOT NULL AND e.expires_at <= $1
      AND e.seq > s.after_seq{SUBSCRIPTION_MATCHES}
      AND NOT EXISTS (SELECT FROM deliveries d WHERE d.endpoint_id = s.id AND d.event_id = e.id))"""
GAPS_OF_EXPIRY = f"""
WITH {SUBSCRIPTIONS_LOCKED.format(which=EXPIRY_GAPS)}
UPDATE subscriptions SET gap_at = $1
WHERE gap_at IS NULL AND id IN (SELECT id FROM subscriptions_locked)
"""
# Before pruning ($1 now, $2 the time before which finished events go): the subscriptions whose
# waiting deliveries go with the events.
PRUNING_GAPS = """gap_at IS NULL AND id IN (
    SELECT d.endpoint_id FROM deliveries d JOIN events e ON e.id = d.event_id
    WHERE d.state = 'waiting' AND e.status IN ('delivered', 'expired', 'dead', 'cancelled')
        AND e.status_at < $2)"""
GAPS_OF_PRUNING = f"""
WITH {SUBSCRIPTIONS_LOCKED.format(which=PRUNING_GAPS)}
UPDATE subscriptions SET gap_at = $1
WHERE gap_at IS NULL AND id IN (SELECT id FROM subscriptions_locked)
"""
OWE_GAP = "UPDATE subscriptions SET gap_at = coalesce(gap_at, $2) WHERE id = $1"
# $1 now.
SUBSCRIPTION_GAPS = f"""
SELECT {SUBSCRIPTION_COLUMNS}, {column_list(ENDPOINTS, "w", "w_")}
FROM subscriptions s JOIN endpoints w ON w.id = s.id
WHERE s.gap_at IS NOT NULL AND w.state = 'active' AND (w.expires_at IS NULL OR w.expires_at > $1)
ORDER BY s.id COLLATE "C"
"""
GAP_TOLD = "UPDATE subscriptions SET gap_at = NULL WHERE id = $1 AND gap_at = $2"

# The operator's loop guard trips: both read the partial index of the journal's trips
# (journal_loop_guard_trips), never the rest of the journal.
TRIPS_SINCE = "SELECT count(*) FROM journal WHERE kind = 'loop_guard' AND at >= $1"
NEWEST_TRIPS = """
SELECT at, detail FROM journal WHERE kind = 'loop_guard' ORDER BY at DESC, position DESC LIMIT $1
"""
