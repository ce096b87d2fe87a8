-- Dead letters: how many times each event was handed out (leased by a drain or a poll), kept by
-- the statement that leases it, so that a claim tells from the rows it reads already which
-- events reached the hub's limit (--max-deliveries): those become 'dead' in the same statement
-- instead of being handed out again. A dead event is closed, counted in its agent's row like the
-- other statuses (the count's trigger of 0022, with dead_events), and pruned with the finished
-- ones, its retention counted from when it died (status_at). Events stored before start from
-- none; the column's default costs no rewrite of the table.
ALTER TABLE events ADD COLUMN handed_out INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN dead_events BIGINT NOT NULL DEFAULT 0;
DROP INDEX events_finished;
CREATE INDEX events_finished ON events (status_at) WHERE status IN ('delivered', 'expired', 'dead');

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
BEGIN
    IF TG_OP = 'UPDATE' THEN
        SELECT array_agg(agent_id), array_agg(counted.pending), array_agg(counted.sent),
            array_agg(counted.delivered), array_agg(counted.expired), array_agg(counted.dead),
            array_agg(counted.reopened),
            array_agg(counted.first_opened)
        INTO ids, pending, sent, delivered, expired, dead, reopened, first_opened
        FROM (
            SELECT agent_id,
                coalesce(sum(way) FILTER (WHERE status = 'pending'), 0) AS pending,
                coalesce(sum(way) FILTER (WHERE status = 'sent'), 0) AS sent,
                coalesce(sum(way) FILTER (WHERE status = 'delivered'), 0) AS delivered,
                coalesce(sum(way) FILTER (WHERE status = 'expired'), 0) AS expired,
                coalesce(sum(way) FILTER (WHERE status = 'dead'), 0) AS dead,
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
            OR counted.expired <> 0 OR counted.dead <> 0
            OR counted.reopened;
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
