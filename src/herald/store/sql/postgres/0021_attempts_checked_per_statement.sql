-- An attempt names an event that exists, and goes with it. The foreign key checked that one
-- attempt at a time, each check a query of its own: a drain step records two attempts per event
-- (its acknowledgement and its lease), and those checks were a tenth of the server's work for
-- the step. The statement that records attempts now checks them all in one query, in the
-- trigger that counts them: their events are locked against deletion as the key locked them (KEY
-- SHARE), and an attempt whose event is gone fails the statement as the key did. An event's
-- deletion, by whatever statement, deletes its attempts in one statement too.
ALTER TABLE attempts DROP CONSTRAINT attempts_event_id_fkey;

CREATE OR REPLACE FUNCTION herald_count_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ids text[];
    missing text;
BEGIN
    SELECT array_agg(DISTINCT event_id) INTO ids FROM new_attempts;
    IF cardinality(ids) <> (
        SELECT count(*) FROM (SELECT FROM events WHERE id = ANY(ids) FOR KEY SHARE) AS locked
    ) THEN
        SELECT named.id INTO missing FROM unnest(ids) AS named (id)
        WHERE NOT EXISTS (SELECT FROM events e WHERE e.id = named.id) LIMIT 1;
        RAISE foreign_key_violation USING
            MESSAGE = format('an attempt names event %s, which is not in table "events"', missing),
            TABLE = 'attempts', CONSTRAINT = 'attempts_event_id_fkey';
    END IF;
    INSERT INTO attempt_counts (mechanism, outcome, recorded)
    SELECT mechanism, outcome, count(*) FROM new_attempts GROUP BY mechanism, outcome;
    RETURN NULL;
END
$$;

CREATE FUNCTION herald_delete_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM attempts WHERE event_id = ANY(ARRAY(SELECT id FROM old_events));
    RETURN NULL;
END
$$;

CREATE TRIGGER events_delete_attempts AFTER DELETE ON events
    REFERENCING OLD TABLE AS old_events
    FOR EACH STATEMENT EXECUTE FUNCTION herald_delete_attempts();
