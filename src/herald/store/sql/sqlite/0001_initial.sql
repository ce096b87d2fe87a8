CREATE TABLE agents (
    id          TEXT PRIMARY KEY,
    handle      TEXT NOT NULL UNIQUE,
    key_hash    TEXT NOT NULL UNIQUE,
    webhook_url TEXT,
    created_at  INTEGER NOT NULL,
    last_seq    INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE events (
    id          TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    type        TEXT NOT NULL,
    text        TEXT NOT NULL,
    data        TEXT NOT NULL,
    dedupe_key  TEXT,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER,
    status      TEXT NOT NULL,
    status_at   INTEGER,
    lease_owner TEXT,
    lease_until INTEGER,
    UNIQUE (agent_id, seq)
);

CREATE UNIQUE INDEX events_dedupe ON events (agent_id, dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE INDEX events_open ON events (agent_id, seq) WHERE status IN ('pending', 'sent');
CREATE INDEX events_expiry ON events (expires_at)
    WHERE status IN ('pending', 'sent') AND expires_at IS NOT NULL;
CREATE INDEX events_finished ON events (status_at) WHERE status IN ('delivered', 'expired');

CREATE TABLE attempts (
    id        INTEGER PRIMARY KEY,
    event_id  TEXT NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    at        INTEGER NOT NULL,
    mechanism TEXT NOT NULL,
    session   TEXT,
    outcome   TEXT NOT NULL,
    error     TEXT
);

CREATE INDEX attempts_event ON attempts (event_id);

CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
