"""Endpoints and their delivery schedule, on SQLite (one writer: claims cannot collide)."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from herald.feed import EndpointChange, JournalEntry
from herald.models import REFUSED_PREFIX, Agent, Delivery, Endpoint, Event, Finished, OneClaim
from herald.pace import paced_allowance, paced_on
from herald.store.journal import EndpointLook, endpoint_changes, finished_groups, record
from herald.store.rules import delivery_updates, endpoint_notes, event_statuses
from herald.store.sqlite.attempts import insert_attempts
from herald.store.sqlite.journal import write
from herald.store.sqlite.rows import (
    MUTED,
    OPEN,
    Operation,
    as_json,
    insert_sql,
    json_object,
    records,
    select_list,
)
from herald.store.sqlite.subscriptions import note_attempts
from herald.store.tables import AGENTS, DELIVERIES, ENDPOINTS, EVENTS

ENDPOINT_COLUMNS = select_list(ENDPOINTS)
DELIVERY_COLUMNS = select_list(DELIVERIES)
INSERT_ENDPOINT = insert_sql(ENDPOINTS)
ENDPOINT_PAGE = (
    f"SELECT {select_list(ENDPOINTS, 'w')}, a.handle AS agent_handle"
    " FROM endpoints w JOIN agents a ON a.id = w.agent_id"
    " WHERE w.kind <> 'subscription' AND w.id > :after"
    " AND (NOT :failing OR w.state = 'disabled' OR w.failing_since IS NOT NULL)"
    " ORDER BY w.id LIMIT :limit"
)
# Whether an open event is one a schedule pass gives deliveries to, now or once its time comes
# (its push grace, say): not a low one, one a window holds, nor one of a type its agent muted.
# ``{events}``: the events' table or alias.
SCHEDULABLE = (
    "{events}.priority <> 'low' AND {events}.held_by IS NULL"  # never pushed
    f" AND NOT {MUTED}"
)
# After a schedule pass, each active endpoint of the agents it looked at is scheduled through
# the seq before the first schedulable, unexpired open event after its mark that has no
# delivery to it (left for a later pass: in its grace, or past the pass's limit), or else
# through its agent's last seq (migration 0033). Parameters: now, then the agents' filter's.
SCHEDULED_THROUGH = (
    "UPDATE endpoints SET scheduled_through = m.through FROM (SELECT w.id, coalesce(("
    "   SELECT min(e.seq) - 1 FROM events e INDEXED BY events_open"
    f"  WHERE e.agent_id = w.agent_id AND e.{OPEN} AND e.seq > w.scheduled_through"
    f"  AND {SCHEDULABLE.format(events='e')} AND (e.expires_at IS NULL OR e.expires_at > ?)"
    "   AND NOT EXISTS (SELECT 1 FROM deliveries d"
    "     WHERE d.endpoint_id = w.id AND d.event_id = e.id)"
    " ), (SELECT a.last_seq FROM agents a WHERE a.id = w.agent_id)) AS through"
    " FROM endpoints w WHERE w.state = 'active' AND w.kind <> 'subscription'{where}) AS m"
    " WHERE endpoints.id = m.id AND endpoints.scheduled_through <> m.through"
)
# An agent's events from a seq on may have become schedulable again (an event opened again, the
# types it mutes changed): its endpoints are scheduled through no later than the seq before.
# Parameters: the seq, the agent.
SCHEDULE_AGAIN_FROM = (
    "UPDATE endpoints SET scheduled_through = :seq - 1"
    " WHERE agent_id = :agent AND scheduled_through >= :seq"
)
# Claimed deliveries are waiting ones: the partial index of those is all a release reads.
RELEASE_CLAIMS = (
    "UPDATE deliveries SET claimed_by = NULL, claimed_until = NULL"
    " WHERE state = 'waiting' AND claimed_by IS NOT NULL"
    " AND (:claimant IS NULL OR claimed_by = :claimant)"
    " AND (:endpoint IS NULL OR (endpoint_id = :endpoint AND event_id = :event))"
    " AND (:until IS NULL OR claimed_until <= :until)"
)
# Claimed deliveries (row ids in a JSON array), as one row of three JSON values: each delivery
# with its event, and each of their endpoints and agents once, by id (a claim holds many
# deliveries of each endpoint: their records are read and made once each).
CLAIMED_IDS = "SELECT value FROM json_each(:rowids)"
CLAIMED_ROWS = (
    f"SELECT (SELECT json_group_array(json_object('d', {json_object(DELIVERIES, 'd')},"
    f" 'e', {json_object(EVENTS, 'e')})) FROM deliveries d JOIN events e ON e.id = d.event_id"
    f" WHERE d.rowid IN ({CLAIMED_IDS})),"
    f" (SELECT json_group_object(w.id, {json_object(ENDPOINTS, 'w')}) FROM endpoints w"
    f" WHERE w.id IN (SELECT endpoint_id FROM deliveries WHERE rowid IN ({CLAIMED_IDS}))),"
    f" (SELECT json_group_object(a.id, {json_object(AGENTS, 'a')}) FROM agents a"
    " WHERE a.id IN (SELECT e.agent_id FROM deliveries d JOIN events e ON e.id = d.event_id"
    f" WHERE d.rowid IN ({CLAIMED_IDS})))"
)
# A claim's subscriptions' paces moved on, from a JSON array of [id, paced until].
PACE = (
    "UPDATE subscriptions SET paced_until = j.value ->> 1"
    " FROM json_each(?) j WHERE subscriptions.id = j.value ->> 0"
)
ENDPOINT_LOOKS = (
    "SELECT json_group_array(json_array("
    "id, agent_id, kind, state, failing_since, disabled_reason, last_error))"
    " FROM endpoints WHERE id IN (SELECT value FROM json_each(?))"
)
# Endpoints disabled by a batch of attempts, from a JSON array of [id, reason, time]: for good
# (a reason), or when failing since before the time (their failing span as the batch left it).
DISABLE_ENDPOINTS = (
    "UPDATE endpoints SET state = 'disabled', disabled_reason = coalesce(d.reason,"
    " 'kept failing for too long; last error: ' || last_error)"
    " FROM (SELECT value ->> 0 AS id, value ->> 1 AS reason, value ->> 2 AS since"
    " FROM json_each(?)) AS d WHERE endpoints.id = d.id AND (d.reason IS NOT NULL"
    " OR (failing_since IS NOT NULL AND failing_since <= d.since))"
)
# What the deliveries of a batch made their events, from a JSON array of [event id, status]:
# an open event becomes delivered, or a pending one sent.
FINISHED = "SELECT value ->> 0 AS id, value ->> 1 AS new_status FROM json_each(:rows)"
FINISH_EVENTS = f"""
UPDATE events SET status = s.new_status, is_open = s.new_status <> 'delivered', status_at = :now
FROM ({FINISHED}) AS s
WHERE events.id = s.id AND events.{OPEN}
    AND (s.new_status = 'delivered' OR events.status = 'pending')
"""
# The agents' counts of what FINISH_EVENTS changes, read from the events before it runs.
COUNT_FINISHED = f"""
UPDATE agents SET
    pending_events = pending_events - c.from_pending,
    sent_events = sent_events - c.from_sent + c.to_sent,
    delivered_events = delivered_events + c.to_delivered
FROM (
    SELECT e.agent_id,
        count(*) FILTER (WHERE e.status = 'pending') AS from_pending,
        count(*) FILTER (WHERE e.status = 'sent') AS from_sent,
        count(*) FILTER (WHERE s.new_status = 'sent') AS to_sent,
        count(*) FILTER (WHERE s.new_status = 'delivered') AS to_delivered
    FROM ({FINISHED}) AS s JOIN events e ON e.id = s.id
    WHERE e.{OPEN} AND (s.new_status = 'delivered' OR e.status = 'pending')
    GROUP BY e.agent_id
) AS c
WHERE agents.id = c.agent_id
"""
# After FINISH_EVENTS, the oldest open event of each agent some event was delivered for (one
# seek in the open events' index each; looked for again if its event had closed before).
OLDEST_OPEN_AFTER_FINISH = f"""
UPDATE agents SET oldest_open_at = (
    SELECT e.created_at FROM events e INDEXED BY events_open
    WHERE e.agent_id = agents.id AND e.{OPEN}
    ORDER BY e.seq LIMIT 1
)
WHERE id IN (
    SELECT e.agent_id FROM ({FINISHED}) AS s JOIN events e ON e.id = s.id
    WHERE s.new_status = 'delivered'
)
"""


class EndpointStore:
    """The endpoint half of ``SQLiteStore``."""

    _run: Callable[[Operation[Any]], Awaitable[Any]]
    now: Callable[[], int]

    async def put_endpoint(self, new: Endpoint) -> None:
        now = self.now()

        def put(conn: sqlite3.Connection) -> None:
            conn.execute(
                "DELETE FROM endpoints WHERE agent_id = ? AND kind = ?",
                (new.agent_id, new.kind.value),
            )
            conn.execute(INSERT_ENDPOINT, ENDPOINTS.values(new))
            _journal(conn, now, [(new.id, new.agent_id, new.kind.value)], "created")

        await self._run(put)

    async def endpoints(self, agent_id: str) -> list[Endpoint]:
        def select(conn: sqlite3.Connection) -> list[Endpoint]:
            rows = conn.execute(
                f"SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE agent_id = ?"
                " AND kind <> 'subscription' ORDER BY kind",
                (agent_id,),
            )
            return records(ENDPOINTS, rows)

        result: list[Endpoint] = await self._run(select)
        return result

    async def any_endpoints(self) -> bool:
        def select(conn: sqlite3.Connection) -> bool:
            return bool(conn.execute("SELECT EXISTS (SELECT 1 FROM endpoints)").fetchone()[0])

        return bool(await self._run(select))

    async def endpoint_page(
        self, after: str | None, limit: int, *, failing: bool
    ) -> list[tuple[Endpoint, str]]:
        params = {"after": after or "", "limit": limit, "failing": failing}

        def select(conn: sqlite3.Connection) -> list[tuple[Endpoint, str]]:
            cursor = conn.execute(ENDPOINT_PAGE, params)
            read = ENDPOINTS.reader([column[0] for column in cursor.description])
            return [(read(row), row[-1]) for row in cursor]

        result: list[tuple[Endpoint, str]] = await self._run(select)
        return result

    async def delete_endpoint(self, agent_id: str, kind: str) -> bool:
        now = self.now()

        def delete(conn: sqlite3.Connection) -> bool:
            sql = "DELETE FROM endpoints WHERE agent_id = ? AND kind = ? RETURNING id"
            gone = [(row[0], agent_id, kind) for row in conn.execute(sql, (agent_id, kind))]
            _journal(conn, now, gone, "deleted")
            return bool(gone)

        return bool(await self._run(delete))

    async def rotate_secret(
        self, endpoint_id: str, secret: str, previous_until: int
    ) -> Endpoint | None:
        def rotate(conn: sqlite3.Connection) -> Endpoint | None:
            row = conn.execute(
                "UPDATE endpoints SET previous_secret = secret, previous_until = ?, secret = ?"
                f" WHERE id = ? RETURNING {ENDPOINT_COLUMNS}",
                (previous_until, secret, endpoint_id),
            ).fetchone()
            return ENDPOINTS.record(row) if row else None

        result: Endpoint | None = await self._run(rotate)
        return result

    async def refused_endpoints(self) -> list[Endpoint]:
        def select(conn: sqlite3.Connection) -> list[Endpoint]:
            rows = conn.execute(
                f"SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE state = 'disabled'"
                " AND substr(disabled_reason, 1, ?) = ? ORDER BY id",
                (len(REFUSED_PREFIX), REFUSED_PREFIX),
            )
            return records(ENDPOINTS, rows)

        result: list[Endpoint] = await self._run(select)
        return result

    async def enable_endpoint(self, endpoint_id: str, disabled_reason: str) -> bool:
        now = self.now()

        def enable(conn: sqlite3.Connection) -> bool:
            enabled = [
                (row[0], row[1], row[2])
                for row in conn.execute(
                    "UPDATE endpoints SET state = 'active', disabled_reason = NULL,"
                    " failing_since = NULL WHERE id = ? AND state = 'disabled'"
                    " AND disabled_reason = ? RETURNING id, agent_id, kind",
                    (endpoint_id, disabled_reason),
                )
            ]
            _journal(conn, now, enabled, "enabled")
            return bool(enabled)

        return bool(await self._run(enable))

    async def schedule_deliveries(
        self,
        before_ms: int,
        limit: int,
        *,
        agents: Sequence[str] | None = None,
        not_agents: Sequence[str] = (),
        push_grace_ms: int | None = None,
    ) -> int:
        now = self.now()

        def schedule(conn: sqlite3.Connection) -> int:
            offered = "?"
            params: list[Any] = [now, before_ms, now]
            if push_grace_ms is not None:
                offered = (
                    "CASE WHEN EXISTS (SELECT 1 FROM sessions s WHERE s.agent_id = e.agent_id"
                    " AND s.can_push AND s.expires_at > ?) THEN ? ELSE ? END"
                )
                params[1:2] = [now, before_ms - push_grace_ms, before_ms]
            where, whose = _agents_filter("e.agent_id", agents, not_agents)
            scheduled = conn.execute(
                "INSERT INTO deliveries (endpoint_id, event_id, next_at)"
                # From the endpoints (CROSS JOIN keeps that order): agents without one
                # cost nothing, however many events wait for them; of each, only the events
                # after those it was scheduled through (a seek in the open events' index).
                " SELECT w.id, e.id, ? FROM endpoints w CROSS JOIN events e"
                f" WHERE e.agent_id = w.agent_id AND w.state = 'active' AND e.{OPEN}"
                " AND e.seq > w.scheduled_through AND w.kind <> 'subscription'"
                f" AND {SCHEDULABLE.format(events='e')}"
                f" AND e.status_at <= {offered}"
                " AND (e.expires_at IS NULL OR e.expires_at > ?)"
                f"{where}"
                " AND NOT EXISTS (SELECT 1 FROM deliveries d"
                "   WHERE d.endpoint_id = w.id AND d.event_id = e.id)"
                f" ORDER BY e.seq LIMIT {int(limit)}",
                params + whose,
            ).rowcount
            where, whose = _agents_filter("w.agent_id", agents, not_agents)
            conn.execute(SCHEDULED_THROUGH.format(where=where), [now, *whose])
            return int(scheduled)

        return int(await self._run(schedule))

    async def claim_deliveries(
        self,
        worker: str,
        limit: int,
        lease_ms: int,
        *,
        per_endpoint: int = 4,
        in_flight: Mapping[str, int] | None = None,
        pace_ms: float | None = None,
    ) -> list[tuple[Delivery, Endpoint, Event, Agent]]:
        now = self.now()
        busy = Counter(in_flight or {})
        full = [endpoint_id for endpoint_id, count in busy.items() if count >= per_endpoint]

        def claim(conn: sqlite3.Connection) -> list[tuple[Delivery, Endpoint, Event, Agent]]:
            due = _due(conn, now, full, per_endpoint)
            # Paced: what each subscription's pace allows it now (other endpoints have none).
            paces: dict[str, int | None] = {}
            allowed: dict[str, int] = {}
            if pace_ms is not None and due:
                paces = _paces(conn, {endpoint_id for _, endpoint_id in due})
                allowed = {sub: paced_allowance(at, now, pace_ms) for sub, at in paces.items()}
            taken, taken_of = [], Counter[str]()
            for rowid, endpoint_id in due:
                if busy[endpoint_id] < per_endpoint and allowed.get(endpoint_id, 1) > 0:
                    busy[endpoint_id] += 1
                    taken.append(rowid)
                    if endpoint_id in allowed:
                        allowed[endpoint_id] -= 1
                        taken_of[endpoint_id] += 1
                    if len(taken) >= limit:
                        break
            if pace_ms is not None and taken_of:
                moved = [
                    (sub, paced_on(paces[sub], now, count, pace_ms))
                    for sub, count in taken_of.items()
                ]
                conn.execute(PACE, (as_json(moved),))
            conn.execute(
                "UPDATE deliveries SET claimed_by = ?, claimed_until = ?"
                " WHERE rowid IN (SELECT value FROM json_each(?))",
                (worker, now + lease_ms, as_json(taken)),
            )
            return _claimed(conn, taken)

        result: list[tuple[Delivery, Endpoint, Event, Agent]] = await self._run(claim)
        return result

    async def release_claims(self, claimant: str | None = None, one: OneClaim | None = None) -> int:
        params: dict[str, str | int | None] = dict.fromkeys(("endpoint", "event", "until"))
        params["claimant"] = claimant
        if one is not None:
            params |= {"endpoint": one.endpoint_id, "event": one.event_id, "until": one.runs_out_by}

        def release(conn: sqlite3.Connection) -> int:
            return conn.execute(RELEASE_CLAIMS, params).rowcount

        return int(await self._run(release))

    async def finish_deliveries(self, finished: Sequence[Finished]) -> list[tuple[str, str]]:
        now = self.now()
        items = list(finished)
        notes = endpoint_notes(items)
        statuses = event_statuses(items)
        deliveries = delivery_updates(items)
        # Disabled for good (reason) or when failing since before a time: (id, reason, time).
        disables = [
            (n.endpoint_id, n.disable_reason, n.disable_failing_since)
            for n in notes
            if n.disable_reason is not None or n.disable_failing_since is not None
        ]

        def finish(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            looked_at = [note.endpoint_id for note in notes]
            before = _looks(conn, looked_at)
            conn.execute(
                "UPDATE endpoints SET failing_since = CASE WHEN n.ok THEN NULL"
                " WHEN n.recovered THEN :now ELSE coalesce(failing_since, :now) END,"
                " last_error = n.error, last_attempt_at = :now,"
                " last_ok_at = CASE WHEN n.ok OR n.recovered THEN :now ELSE last_ok_at END"
                " FROM (SELECT value ->> 0 AS id,"
                " value ->> 1 AS ok, value ->> 2 AS recovered, value ->> 3 AS error"
                " FROM json_each(:notes)) AS n WHERE endpoints.id = n.id",
                {
                    "now": now,
                    "notes": as_json([(n.endpoint_id, n.ok, n.recovered, n.error) for n in notes]),
                },
            )
            if disables:
                conn.execute(DISABLE_ENDPOINTS, (as_json(disables),))
            suspended = note_attempts(conn, items, now)
            if statuses:
                _finish_events(conn, as_json(statuses), now)
            conn.execute(
                "UPDATE deliveries SET attempts = attempts + 1,"
                " next_at = coalesce(r.next_at, deliveries.next_at), state = r.state,"
                " claimed_by = NULL, claimed_until = NULL, last_error = r.error"
                " FROM (SELECT value ->> 0 AS endpoint_id, value ->> 1 AS event_id,"
                " value ->> 2 AS next_at, value ->> 3 AS state, value ->> 4 AS error"
                " FROM json_each(?)) AS r WHERE deliveries.endpoint_id = r.endpoint_id"
                " AND deliveries.event_id = r.event_id",
                (
                    as_json(
                        [
                            (d.endpoint_id, d.event_id, d.next_at, d.state, d.error)
                            for d in deliveries
                        ]
                    ),
                ),
            )
            insert_attempts(conn, [item.attempt for item in items])
            # Endpoints that were not failing and only succeeded, none disabled, changed no
            # state the journal tells (``endpoint_changes``): not looked at again.
            unchanged = not disables and all(note.ok for note in notes)
            unchanged = unchanged and all(look.failing_since is None for look in before)
            after = [] if unchanged else _looks(conn, looked_at)
            entry = JournalEntry(
                attempts=finished_groups(items), endpoints=endpoint_changes(before, after)
            )
            write(conn, record(now, "deliveries", None, entry))
            return suspended

        result: list[tuple[str, str]] = await self._run(finish)
        return result

    async def deliveries(self, event_id: str) -> list[Delivery]:
        def select(conn: sqlite3.Connection) -> list[Delivery]:
            rows = conn.execute(
                f"SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE event_id = ?"
                " ORDER BY endpoint_id",
                (event_id,),
            )
            return records(DELIVERIES, rows)

        result: list[Delivery] = await self._run(select)
        return result


def _agents_filter(
    column: str, agents: Sequence[str] | None, not_agents: Sequence[str]
) -> tuple[str, list[str]]:
    """The condition (and its parameters) that keeps a schedule pass to ``agents`` (all when
    None) but ``not_agents``, on the agent ids in ``column``."""
    where, params = "", []
    if agents is not None:
        where += f" AND {column} IN ({', '.join('?' * len(agents)) or 'NULL'})"
        params += list(agents)
    if not_agents:
        where += f" AND {column} NOT IN ({', '.join('?' * len(not_agents))})"
        params += list(not_agents)
    return where, params


def _paces(conn: sqlite3.Connection, endpoint_ids: set[str]) -> dict[str, int | None]:
    """The pace of each of the endpoints that is a subscription (the others have none)."""
    rows = conn.execute(
        "SELECT id, paced_until FROM subscriptions WHERE id IN (SELECT value FROM json_each(?))",
        (as_json(sorted(endpoint_ids)),),
    ).fetchall()
    return {row[0]: row[1] for row in rows}


def _due(
    conn: sqlite3.Connection, now: int, skip: Sequence[str], per_endpoint: int
) -> list[tuple[int, str]]:
    """The first unclaimed due deliveries of each active endpoint but those in ``skip``, at most
    ``per_endpoint`` each, in due order: the row id and endpoint of each. A subscription a
    receiver asked to wait has none until then.

    Read endpoint by endpoint from the index, so that the backlog of an endpoint with no room
    (a dead one, say) is never read; as one JSON array (see ``as_json``)."""
    (rows,) = conn.execute(
        "SELECT json_group_array(json_array(d.rowid, d.endpoint_id, d.next_at, d.event_id))"
        " FROM endpoints w JOIN deliveries d ON d.rowid IN (SELECT x.rowid FROM deliveries x"
        "   WHERE x.endpoint_id = w.id AND x.state = 'waiting' AND x.next_at <= :now"
        "   AND (x.claimed_until IS NULL OR x.claimed_until <= :now)"
        # Event ids sort by creation within a moment.
        "   ORDER BY x.next_at, x.event_id LIMIT :per_endpoint)"
        " WHERE w.state = 'active' AND (w.expires_at IS NULL OR w.expires_at > :now)"
        " AND w.id NOT IN (SELECT value FROM json_each(:skip))"
        " AND (w.kind <> 'subscription' OR NOT EXISTS (SELECT 1 FROM subscriptions s"
        "   WHERE s.id = w.id AND s.held_until > :now))",
        {"now": now, "per_endpoint": per_endpoint, "skip": as_json(skip)},
    ).fetchone()
    found = sorted(json.loads(rows), key=lambda row: (row[2], row[3]))
    return [(rowid, endpoint_id) for rowid, endpoint_id, _, _ in found]


def _claimed(
    conn: sqlite3.Connection, rowids: list[int]
) -> list[tuple[Delivery, Endpoint, Event, Agent]]:
    """The deliveries with those row ids, each with its endpoint, event and agent, in due order
    (read as one row of JSON: see ``as_json``)."""
    if not rowids:
        return []
    rows, endpoint_rows, agent_rows = conn.execute(
        CLAIMED_ROWS, {"rowids": as_json(rowids)}
    ).fetchone()
    endpoints = {id_: ENDPOINTS.record(row) for id_, row in json.loads(endpoint_rows).items()}
    agents = {id_: AGENTS.record(row) for id_, row in json.loads(agent_rows).items()}
    found: list[Any] = json.loads(rows)
    found.sort(key=lambda row: (row["d"]["next_at"], row["d"]["event_id"]))
    claimed = []
    for row in found:
        delivery, event = DELIVERIES.record(row["d"]), EVENTS.record(row["e"])
        claimed.append((delivery, endpoints[delivery.endpoint_id], event, agents[event.agent_id]))
    return claimed


def _looks(conn: sqlite3.Connection, endpoint_ids: list[str]) -> list[EndpointLook]:
    """The endpoints' states, for the journal to tell what a batch of attempts changed (read as
    one JSON array: see ``as_json``)."""
    (rows,) = conn.execute(ENDPOINT_LOOKS, (as_json(endpoint_ids),)).fetchone()
    return sorted((EndpointLook(*row) for row in json.loads(rows)), key=lambda look: look.id)


def _journal(
    conn: sqlite3.Connection, now: int, endpoints: list[tuple[str, str, str]], state: str
) -> None:
    """The journal row of endpoints (id, agent, kind) that were created, deleted or enabled."""
    entry = JournalEntry(
        endpoints=tuple(EndpointChange(*endpoint, state) for endpoint in endpoints)
    )
    write(conn, record(now, "endpoint", endpoints[0][1] if endpoints else None, entry))


def _finish_events(conn: sqlite3.Connection, statuses: str, now: int) -> None:
    """Open events become what their deliveries made them (``statuses``: a JSON array of
    [event id, new status]), counted in their agents' rows: three statements whatever the
    number of events and agents (see ``counts``)."""
    params = {"rows": statuses, "now": now}
    # Counted first, while the events still say what they were.
    conn.execute(COUNT_FINISHED, params)
    conn.execute(FINISH_EVENTS, params)
    conn.execute(OLDEST_OPEN_AFTER_FINISH, params)
