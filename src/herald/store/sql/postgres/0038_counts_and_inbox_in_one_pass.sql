-- An update of events (a drain step: its acknowledgement and its lease) ran two statement
-- triggers over the same transition tables: the counts' (0027) and the inbox's NOTIFY (0023),
-- each a PL/pgSQL call with its own reads of the changed rows. Now the counts' trigger names the
-- inbox's agents too, from the one pass that counts: an agent is named when a row of it, old or
-- new, is not open (closed, or opened again), as before, once per agent and statement. And the
-- changed rows are first grouped by agent and status (a count each: the statuses are few), so
-- that each row is hashed once instead of each row feeding the seven filtered sums; the sums,
-- the agents whose oldest open event must be found again (reopened) and the first seq opened
-- are then made of those groups, with the same results as 0027's.
CREATE OR REPLACE FUNCTION herald_count_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ids text[];
    pending bigint[];
    sent bigint[];
    delivered bigint[];
    expired bigint[];
    dead bigint[];
    reopened boolean[];
    first_opened bigint[];
    touched_closed text[];
BEGIN
    IF TG_OP = 'UPDATE' THEN
        SELECT array_agg(agent_id) FILTER (WHERE counted.changed),
            array_agg(counted.pending) FILTER (WHERE counted.changed),
            array_agg(counted.sent) FILTER (WHERE counted.changed),
            array_agg(counted.delivered) FILTER (WHERE counted.changed),
            array_agg(counted.expired) FILTER (WHERE counted.changed),
            array_agg(counted.dead) FILTER (WHERE counted.changed),
            array_agg(counted.reopened) FILTER (WHERE counted.changed),
            array_agg(counted.first_opened) FILTER (WHERE counted.changed),
            array_agg(agent_id) FILTER (WHERE counted.closed)
        INTO ids, pending, sent, delivered, expired, dead, reopened, first_opened, touched_closed
        FROM (
            SELECT sums.*,
                sums.pending <> 0 OR sums.sent <> 0 OR sums.delivered <> 0
                    OR sums.expired <> 0 OR sums.dead <> 0 OR sums.reopened AS changed
            FROM (
                SELECT agent_id,
                    coalesce(sum(way) FILTER (WHERE status = 'pending'), 0) AS pending,
                    coalesce(sum(way) FILTER (WHERE status = 'sent'), 0) AS sent,
                    coalesce(sum(way) FILTER (WHERE status = 'delivered'), 0) AS delivered,
                    coalesce(sum(way) FILTER (WHERE status = 'expired'), 0) AS expired,
                    coalesce(sum(way) FILTER (WHERE status = 'dead'), 0) AS dead,
                    coalesce(sum(way) FILTER (WHERE open), 0) <> 0
                        OR coalesce(
                            bool_or(open) FILTER (WHERE way < 0)
                            AND bool_or(NOT open) FILTER (WHERE way < 0),
                            false
                        ) AS reopened,
                    min(first_seq) FILTER (WHERE way > 0 AND open) AS first_opened,
                    bool_or(NOT open) AS closed
                FROM (
                    SELECT agent_id, status, status IN ('pending', 'sent') AS open,
                        count(*) AS way, min(seq) AS first_seq
                    FROM new_events GROUP BY agent_id, status
                    UNION ALL
                    SELECT agent_id, status, status IN ('pending', 'sent'), -count(*), NULL
                    FROM old_events GROUP BY agent_id, status
                ) AS groups
                GROUP BY agent_id
            ) AS sums
        ) AS counted;
        PERFORM pg_notify('herald_inbox', agent_id) FROM unnest(touched_closed) AS agent_id;
    ELSE
        SELECT array_agg(agent_id), array_agg(-counted.pending), array_agg(-counted.sent),
            array_agg(-counted.delivered), array_agg(-counted.expired),
            array_agg(-counted.dead),
            array_agg(counted.pending + counted.sent > 0), array_agg(NULL::bigint)
        INTO ids, pending, sent, delivered, expired, dead, reopened, first_opened
        FROM (
            SELECT agent_id,
                count(*) FILTER (WHERE status = 'pending') AS pending,
                count(*) FILTER (WHERE status = 'sent') AS sent,
                count(*) FILTER (WHERE status = 'delivered') AS delivered,
                count(*) FILTER (WHERE status = 'expired') AS expired,
                count(*) FILTER (WHERE status = 'dead') AS dead
            FROM old_events GROUP BY agent_id
        ) AS counted;
    END IF;
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM FROM agents WHERE id = ANY(ids) ORDER BY id FOR NO KEY UPDATE;
    UPDATE agents SET
        pending_events = agents.pending_events + c.pending,
        sent_events = agents.sent_events + c.sent,
        delivered_events = agents.delivered_events + c.delivered,
        expired_events = agents.expired_events + c.expired,
        dead_events = agents.dead_events + c.dead,
        (oldest_open_at, oldest_open_seq) = (
            SELECT agents.oldest_open_at, agents.oldest_open_seq WHERE NOT c.reopened
            UNION ALL (
                SELECT e.created_at, e.seq FROM events e
                WHERE c.reopened AND e.agent_id = agents.id
                    AND e.status IN ('pending', 'sent')
                    AND e.seq >= least(agents.oldest_open_seq, c.first_opened)
                ORDER BY e.seq LIMIT 1
            )
        )
    FROM unnest(ids, pending, sent, delivered, expired, dead, reopened, first_opened)
        AS c (agent_id, pending, sent, delivered, expired, dead, reopened, first_opened)
    WHERE agents.id = c.agent_id;
    RETURN NULL;
END
$$;

DROP TRIGGER events_notify_inbox ON events;
DROP FUNCTION herald_notify_inbox();
