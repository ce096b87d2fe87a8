-- Every herald process LISTENs on herald_events; a committed insert of events names their agents,
-- once per agent and transaction. It is a wake-up hint: the table stays the truth.
CREATE FUNCTION herald_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('herald_events', agent_id) FROM (SELECT DISTINCT agent_id FROM new_events) AS agents;
    RETURN NULL;
END
$$;

CREATE TRIGGER events_notify AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION herald_notify_events();
