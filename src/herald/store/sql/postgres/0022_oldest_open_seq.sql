-- Each agent's oldest open event's seq, kept beside when it was published (oldest_open_at, 0015)
-- by the same writes: no event before it is open. A drain step reads its agent's events from
-- there, and the count's trigger looks for the next oldest from there: from the agent's first
-- seq, both read past the index entries of every event already delivered (entries that only a
-- vacuum takes out), more of them with each step. NULL while none is open.
ALTER TABLE agents ADD COLUMN oldest_open_seq BIGINT;

UPDATE agents SET oldest_open_seq = (
    SELECT min(e.seq) FROM events e
    WHERE e.agent_id = agents.id AND e.status IN ('pending', 'sent')
);

-- As 0020's, and an agent's oldest open event is looked for from its oldest open seq before the
-- statement, or from the first event the statement opened if that is older (an event opens
-- again when it is redelivered); with neither, nothing is open.
CREATE OR REPLACE FUNCTION herald_count_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ids text[];
    pending bigint[];
    sent bigint[];
    delivered bigint[];
    expired bigint[];
    reopened boolean[];
    first_opened bigint[];
BEGIN
    IF TG_OP = 'UPDATE' THEN
        SELECT array_agg(agent_id), array_agg(counted.pending), array_agg(counted.sent),
            array_agg(counted.delivered), array_agg(counted.expired), array_agg(counted.reopened),
            array_agg(counted.first_opened)
        INTO ids, pending, sent, delivered, expired, reopened, first_opened
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
                    ) AS reopened,
                min(seq) FILTER (WHERE way > 0 AND status IN ('pending', 'sent')) AS first_opened
            FROM (
                SELECT agent_id, seq, status, 1 AS way FROM new_events
                UNION ALL
                SELECT agent_id, seq, status, -1 AS way FROM old_events
            ) AS changes
            GROUP BY agent_id
        ) AS counted
        WHERE counted.pending <> 0 OR counted.sent <> 0 OR counted.delivered <> 0
            OR counted.expired <> 0 OR counted.reopened;
    ELSE
        SELECT array_agg(agent_id), array_agg(-counted.pending), array_agg(-counted.sent),
            array_agg(-counted.delivered), array_agg(-counted.expired),
            array_agg(counted.pending + counted.sent > 0), array_agg(NULL::bigint)
        INTO ids, pending, sent, delivered, expired, reopened, first_opened
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
    FROM unnest(ids, pending, sent, delivered, expired, reopened, first_opened)
        AS c (agent_id, pending, sent, delivered, expired, reopened, first_opened)
    WHERE agents.id = c.agent_id;
    RETURN NULL;
END
$$;
