-- Webhook and OpenClaw endpoints of agents, and the schedule of each event's delivery to them.
CREATE TABLE endpoints (
    id              TEXT PRIMARY KEY,
    agent_id        TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    kind            TEXT NOT NULL,
    url             TEXT NOT NULL,
    secret          TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    mode            TEXT,
    previous_secret TEXT,
    previous_until  INTEGER,
    state           TEXT NOT NULL DEFAULT 'active',
    disabled_reason TEXT,
    failing_since   INTEGER,
    last_error      TEXT,
    last_attempt_at INTEGER,
    UNIQUE (agent_id, kind)
);

CREATE TABLE deliveries (
    endpoint_id   TEXT NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    event_id      TEXT NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    attempts      INTEGER NOT NULL DEFAULT 0,
    next_at       INTEGER NOT NULL,
    state         TEXT NOT NULL DEFAULT 'waiting',
    claimed_by    TEXT,
    claimed_until INTEGER,
    last_error    TEXT,
    PRIMARY KEY (endpoint_id, event_id)
);

CREATE INDEX deliveries_due ON deliveries (next_at) WHERE state = 'waiting';
CREATE INDEX deliveries_event ON deliveries (event_id);
