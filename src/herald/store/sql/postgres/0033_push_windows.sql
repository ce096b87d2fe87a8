-- Quiet hours and digests: an event an agent's rules hold back from being pushed names the
-- window that holds it (held_by), decided in the transaction that stores it. It stays pending,
-- drained and acknowledged like any other; no way pushes it. The index is partial, so an event
-- nothing holds costs it nothing, and a window's summary counts its events by type (and status:
-- not a cancelled one) from it alone.
ALTER TABLE events ADD COLUMN held_by TEXT;
CREATE INDEX events_held_by ON events (held_by, type, status) WHERE held_by IS NOT NULL;

-- The windows open: an agent's quiet hours until they end, a digest's burst until its window
-- ends. When one ends, its summary is stored (one event, herald.summary, whose dedupe key names
-- the window: made once whichever process makes it) and the window is deleted.
CREATE TABLE push_windows (
    id        TEXT PRIMARY KEY,
    agent_id  TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    reason    TEXT NOT NULL,
    rule      TEXT NOT NULL,
    opened_at BIGINT NOT NULL,
    until     BIGINT NOT NULL
);
CREATE INDEX push_windows_open ON push_windows (agent_id, rule, until);
CREATE INDEX push_windows_due ON push_windows (until);

-- The agents whose rules hold events back for a time: each process reads them (at most once a
-- second while it publishes) from this index, not from every agent.
CREATE INDEX agents_timed_rules ON agents (handle)
    WHERE preferences ?| ARRAY['quiet_hours', 'digests'];
