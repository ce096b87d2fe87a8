-- The event types the operator declares (PUT /v1/event-types/{name}): what each means, and the
-- JSON Schema its events' data must be valid against, if any. Each process keeps them in memory
-- and reads them again when they change.
CREATE TABLE event_types (
    name           TEXT PRIMARY KEY,
    description    TEXT NOT NULL,
    payload_schema JSONB,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL
);

-- Every herald process LISTENs on herald_catalogue too: a committed change of the catalogue
-- tells the others to read it again (a hint: each also reads it again once its copy is 5 s old).
CREATE FUNCTION herald_notify_catalogue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('herald_catalogue', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER event_types_notify AFTER INSERT OR UPDATE OR DELETE ON event_types
    FOR EACH STATEMENT EXECUTE FUNCTION herald_notify_catalogue();
