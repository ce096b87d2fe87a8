-- Each agent's events counted by status, and the time its oldest open event was published, kept
-- exact in its row as they change, so that the operator's counts (GET /v1/stats, GET /v1/agents)
-- read the agents rather than every event. A publish adds its events to pending_events (and
-- sets oldest_open_at if nothing was open) in the UPDATE that takes their seqs; these triggers
-- follow every change of status and every deletion, whichever statement makes it, once per
-- statement: a row's trigger would write a new version of the agent's row per event.
-- oldest_open_at: the created_at of the agent's first open (pending or sent) event by seq; NULL
-- while none is open.
ALTER TABLE agents
    ADD COLUMN pending_events BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN sent_events BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN delivered_events BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN expired_events BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN oldest_open_at BIGINT;

UPDATE agents SET pending_events = counted.pending, sent_events = counted.sent,
    delivered_events = counted.delivered, expired_events = counted.expired,
    oldest_open_at = (
        SELECT e.created_at FROM events e
        WHERE e.agent_id = agents.id AND e.status IN ('pending', 'sent') ORDER BY e.seq LIMIT 1
    )
FROM (
    SELECT agent_id,
        count(*) FILTER (WHERE status = 'pending') AS pending,
        count(*) FILTER (WHERE status = 'sent') AS sent,
        count(*) FILTER (WHERE status = 'delivered') AS delivered,
        count(*) FILTER (WHERE status = 'expired') AS expired
    FROM events GROUP BY agent_id
) AS counted
WHERE agents.id = counted.agent_id;

-- The agents' rows are now written on every change of an event's status: room is left in each
-- page for their new versions (updates that change no indexed column then stay in the page). The
-- operator's counts read every agent: small enough that parallel workers cost more than they
-- save. The planner learns the new columns now, not at the next autovacuum.
ALTER TABLE agents SET (fillfactor = 70, parallel_workers = 0);
ANALYZE agents;

-- What a statement changed, per agent, added to the agents' rows: after an UPDATE, each event
-- whose status changed counted out of its old status and into its new one (a lease changes none,
-- and updates no agent); after a DELETE, each event counted out. reopened: an event of the agent
-- opened or closed, so its oldest open event is looked for again (one seek in the open events'
-- index). The rows are locked in id order first, as a publish locks them, so that the two cannot
-- deadlock; an agent deleted with its events has no row left to lock or update. (Each branch
-- reads only the transition tables its trigger has: a statement is planned when it first runs.)
CREATE FUNCTION herald_count_events() RETURNS trigger LANGUAGE plpgsql AS $$
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
            SELECT o.agent_id,
                count(*) FILTER (WHERE n.status = 'pending')
                    - count(*) FILTER (WHERE o.status = 'pending') AS pending,
                count(*) FILTER (WHERE n.status = 'sent')
                    - count(*) FILTER (WHERE o.status = 'sent') AS sent,
                count(*) FILTER (WHERE n.status = 'delivered')
                    - count(*) FILTER (WHERE o.status = 'delivered') AS delivered,
                count(*) FILTER (WHERE n.status = 'expired')
                    - count(*) FILTER (WHERE o.status = 'expired') AS expired,
                bool_or((o.status IN ('pending', 'sent')) <> (n.status IN ('pending', 'sent')))
                    AS reopened
            FROM old_events o JOIN new_events n ON n.id = o.id
            WHERE o.status <> n.status
            GROUP BY o.agent_id
        ) AS counted;
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

CREATE TRIGGER events_count_status AFTER UPDATE ON events
    REFERENCING OLD TABLE AS old_events NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION herald_count_events();

CREATE TRIGGER events_count_delete AFTER DELETE ON events
    REFERENCING OLD TABLE AS old_events
    FOR EACH STATEMENT EXECUTE FUNCTION herald_count_events();

-- Delivery attempts counted by way and outcome as they are recorded: the attempts table grows
-- with every delivery, and a count of it would read all of it. These counts are of the attempts
-- recorded since the store was made (from those still stored when it was upgraded to keep
-- them): retention prunes attempts with their events, never from these counts. Each statement
-- that records attempts adds rows of its own (no row is updated: deliveries never wait for one
-- another on a shared count), and the upkeep that prunes events sums them up again.
CREATE TABLE attempt_counts (
    mechanism TEXT NOT NULL,
    outcome   TEXT NOT NULL,
    recorded  BIGINT NOT NULL
);

INSERT INTO attempt_counts (mechanism, outcome, recorded)
SELECT mechanism, outcome, count(*) FROM attempts GROUP BY mechanism, outcome;

CREATE FUNCTION herald_count_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO attempt_counts (mechanism, outcome, recorded)
    SELECT mechanism, outcome, count(*) FROM new_attempts GROUP BY mechanism, outcome;
    RETURN NULL;
END
$$;

CREATE TRIGGER attempts_count AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS new_attempts
    FOR EACH STATEMENT EXECUTE FUNCTION herald_count_attempts();
