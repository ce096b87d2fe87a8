-- Every herald process LISTENs on herald_inbox too: a committed statement that closes open
-- events (acknowledged, delivered, expired) or opens finished ones again names their agents,
-- once per agent and transaction, so that each process's subscriptions/listen streams tell
-- their clients that the inbox changed, whichever process changed it. A statement that only
-- leases or pushes open events (they stay open) names no one. A hint, like herald_events: the
-- streams also read the inboxes they follow at a slow interval.
CREATE FUNCTION herald_notify_inbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('herald_inbox', agent_id) FROM (
        SELECT agent_id FROM new_events WHERE status NOT IN ('pending', 'sent')
        UNION
        SELECT agent_id FROM old_events WHERE status NOT IN ('pending', 'sent')
    ) AS agents;
    RETURN NULL;
END
$$;

CREATE TRIGGER events_notify_inbox AFTER UPDATE ON events
    REFERENCING OLD TABLE AS old_events NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION herald_notify_inbox();
