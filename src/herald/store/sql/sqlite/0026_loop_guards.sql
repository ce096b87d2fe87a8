-- Loop guards: a message between agents (send_message, a reply routed to an agent) carries the
-- thread it belongs to, and each send counts the sender's messages of the window before it is
-- stored. The index covers both counts: the exchanges between two agents (either direction:
-- sender and addressee) and all the sender's messages of the last minute. It is partial, so a
-- publisher's events (no thread) cost it nothing.
ALTER TABLE events ADD COLUMN thread TEXT;
CREATE INDEX events_threads ON events (sender, agent_id, created_at) WHERE thread IS NOT NULL;

-- The limits the operator raised (or lowered) for an agent, each null for the serve-wide default.
CREATE TABLE loop_guard_limits (
    agent_id   TEXT PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
    exchanges  INTEGER,
    window_s   INTEGER,
    per_minute INTEGER
);
