-- The counts of an agent's events by status (0015) are kept by a trigger per statement that
-- changes events. Its UPDATE branch paired each old row with its new one by id: a join of two
-- transition tables, which the planner estimates at one row each and so runs as a nested loop,
-- every old row against every new one (10,000 comparisons for a drain step of 100 events, twice
-- per step: its lease and its acknowledgement). No pairing is needed: a status's change in
-- count is its count among the new rows less its count among the old ones (a row whose status
-- did not change adds and takes one). An agent's oldest open event is looked for again when the
-- number of its open events changed, or when the statement touched both open and finished
-- events of it (only then could some open and as many close, leaving the number as it was).
CREATE OR REPLACE FUNCTION herald_count_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ids text[];
    pending bigint[];
    sent bigint[];
    delivered bigint[];
    expired bigint[];
    reopened boolean[];
BEGIN
    IF TG_OP = 'UPDATE' THEN
        SELECT array_agg(agent_id), array_agg(counted.pending), array_agg(counted.sent),
            array_agg(counted.delivered), array_agg(counted.expired), array_agg(counted.reopened)
        INTO ids, pending, sent, delivered, expired, reopened
        FROM (
            SELECT agent_id,
                coalesce(sum(way) FILTER (WHERE status = 'pending'), 0) AS pending,
                coalesce(sum(way) FILTER (WHERE status = 'sent'), 0) AS sent,
                coalesce(sum(way) FILTER (WHERE status = 'delivered'), 0) AS delivered,
                coalesce(sum(way) FILTER (WHERE status = 'expired'), 0) AS expired,
                coalesce(sum(way) FILTER (WHERE status IN ('pending', 'sent')), 0) <> 0
                    OR coalesce(
                        bool_or(status IN ('pending', 'sent')) FILTER (WHERE way < 0)
                        AND bool_or(status NOT IN ('pending', 'sent')) FILTER (WHERE way < 0),
                        false
                    ) AS reopened
            FROM (
                SELECT agent_id, status, 1 AS way FROM new_events
                UNION ALL
                SELECT agent_id, status, -1 AS way FROM old_events
            ) AS changes
            GROUP BY agent_id
        ) AS counted
        WHERE counted.pending <> 0 OR counted.sent <> 0 OR counted.delivered <> 0
            OR counted.expired <> 0 OR counted.reopened;
    ELSE
        SELECT array_agg(agent_id), array_agg(-counted.pending), array_agg(-counted.sent),
            array_agg(-counted.delivered), array_agg(-counted.expired),
            array_agg(counted.pending + counted.sent > 0)
        INTO ids, pending, sent, delivered, expired, reopened
        FROM (
            SELECT agent_id,
                count(*) FILTER (WHERE status = 'pending') AS pending,
                count(*) FILTER (WHERE status = 'sent') AS sent,
                count(*) FILTER (WHERE status = 'delivered') AS delivered,
                count(*) FILTER (WHERE status = 'expired') AS expired
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
        oldest_open_at = CASE WHEN NOT c.reopened THEN agents.oldest_open_at ELSE (
            SELECT e.created_at FROM events e
            WHERE e.agent_id = agents.id AND e.status IN ('pending', 'sent')
            ORDER BY e.seq LIMIT 1
        ) END
    FROM unnest(ids, pending, sent, delivered, expired, reopened)
        AS c (agent_id, pending, sent, delivered, expired, reopened)
    WHERE agents.id = c.agent_id;
    RETURN NULL;
END
$$;
