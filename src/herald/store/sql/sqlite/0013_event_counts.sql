-- Each agent's events counted by status, and the time its oldest open event was published, kept
-- exact in its row as they change, so that the operator's counts (GET /v1/stats, GET /v1/agents)
-- read the agents rather than every event. A publish adds its events to pending_events (and
-- sets oldest_open_at if nothing was open) in the UPDATE that takes their seqs; these triggers
-- follow every change of status and every deletion, whichever statement makes it.
-- oldest_open_at: the created_at of the agent's first open (pending or sent) event by seq; NULL
-- while none is open.
ALTER TABLE agents ADD COLUMN pending_events INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN sent_events INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN delivered_events INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN expired_events INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN oldest_open_at INTEGER;

UPDATE agents SET pending_events = counted.pending, sent_events = counted.sent,
    delivered_events = counted.delivered, expired_events = counted.expired
FROM (
    SELECT agent_id, sum(status = 'pending') AS pending, sum(status = 'sent') AS sent,
        sum(status = 'delivered') AS delivered, sum(status = 'expired') AS expired
    FROM events GROUP BY agent_id
) AS counted
WHERE agents.id = counted.agent_id;

UPDATE agents SET oldest_open_at = (
    SELECT e.created_at FROM events e INDEXED BY events_open
    WHERE e.agent_id = agents.id AND e.status IN ('pending', 'sent') ORDER BY e.seq LIMIT 1
)
WHERE pending_events + sent_events > 0;

-- The oldest open event is looked for again (one seek in the open events' index) only when an
-- event opens or closes.
CREATE TRIGGER events_count_status AFTER UPDATE OF status ON events
WHEN old.status <> new.status
BEGIN
    UPDATE agents SET
        pending_events = pending_events + (new.status = 'pending') - (old.status = 'pending'),
        sent_events = sent_events + (new.status = 'sent') - (old.status = 'sent'),
        delivered_events =
            delivered_events + (new.status = 'delivered') - (old.status = 'delivered'),
        expired_events = expired_events + (new.status = 'expired') - (old.status = 'expired'),
        oldest_open_at = CASE
            WHEN (old.status IN ('pending', 'sent')) = (new.status IN ('pending', 'sent'))
                THEN oldest_open_at
            ELSE (
                SELECT e.created_at FROM events e INDEXED BY events_open
                WHERE e.agent_id = new.agent_id AND e.status IN ('pending', 'sent')
                ORDER BY e.seq LIMIT 1
            )
        END
    WHERE id = new.agent_id;
END;

-- An agent's deletion deletes its events after its row: this then updates no row.
CREATE TRIGGER events_count_delete AFTER DELETE ON events
BEGIN
    UPDATE agents SET
        pending_events = pending_events - (old.status = 'pending'),
        sent_events = sent_events - (old.status = 'sent'),
        delivered_events = delivered_events - (old.status = 'delivered'),
        expired_events = expired_events - (old.status = 'expired'),
        oldest_open_at = CASE
            WHEN old.status NOT IN ('pending', 'sent') THEN oldest_open_at
            ELSE (
                SELECT e.created_at FROM events e INDEXED BY events_open
                WHERE e.agent_id = old.agent_id AND e.status IN ('pending', 'sent')
                ORDER BY e.seq LIMIT 1
            )
        END
    WHERE id = old.agent_id;
END;

-- Delivery attempts counted by way and outcome as they are recorded: the attempts table grows
-- with every delivery, and a count of it would read all of it. These counts are of the attempts
-- recorded since the store was made (from those still stored when it was upgraded to keep
-- them): retention prunes attempts with their events, never from these counts.
CREATE TABLE attempt_counts (
    mechanism TEXT NOT NULL,
    outcome   TEXT NOT NULL,
    recorded  INTEGER NOT NULL,
    PRIMARY KEY (mechanism, outcome)
);

INSERT INTO attempt_counts (mechanism, outcome, recorded)
SELECT mechanism, outcome, count(*) FROM attempts GROUP BY mechanism, outcome;

CREATE TRIGGER attempts_count AFTER INSERT ON attempts
BEGIN
    INSERT INTO attempt_counts (mechanism, outcome, recorded)
    VALUES (new.mechanism, new.outcome, 1)
    ON CONFLICT (mechanism, outcome) DO UPDATE SET recorded = recorded + 1;
END;
