-- The event types the operator declares (PUT /v1/event-types/{name}): what each means, and the
-- JSON Schema its events' data must be valid against, if any. Each process keeps them in memory
-- and reads them again when they change.
CREATE TABLE event_types (
    name           TEXT PRIMARY KEY,
    description    TEXT NOT NULL,
    payload_schema TEXT,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
