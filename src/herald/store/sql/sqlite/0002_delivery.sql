-- Who sent an event (an agent's handle; NULL for an application), what it answers, and the
-- form an interactive event asks for; replies to events; per-agent delivery overrides.
ALTER TABLE events ADD COLUMN sender TEXT;
ALTER TABLE events ADD COLUMN reply_to TEXT;
ALTER TABLE events ADD COLUMN reply_schema TEXT;
ALTER TABLE agents ADD COLUMN delivery TEXT NOT NULL DEFAULT '{}';

CREATE TABLE replies (
    id              TEXT PRIMARY KEY,
    event_id        TEXT NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    agent_id        TEXT NOT NULL,
    text            TEXT NOT NULL,
    data            TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    routed_event_id TEXT
);

CREATE INDEX replies_event ON replies (event_id);
