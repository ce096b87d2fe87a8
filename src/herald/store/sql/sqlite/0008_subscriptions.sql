-- MCP Events webhook subscriptions (events/subscribe): an endpoint of kind 'subscription' each,
-- many per agent, so (agent_id, kind) is unique only for the other kinds. SQLite cannot drop a
-- table constraint: endpoints is made anew, and deliveries with it (its foreign key follows the
-- renamed table; dropping the old endpoints first would cascade into the deliveries).
CREATE TABLE endpoints_new (
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
    expires_at      INTEGER,
    last_ok_at      INTEGER
);
INSERT INTO endpoints_new (id, agent_id, kind, url, secret, created_at, mode, previous_secret,
    previous_until, state, disabled_reason, failing_since, last_error, last_attempt_at)
SELECT id, agent_id, kind, url, secret, created_at, mode, previous_secret, previous_until, state,
    disabled_reason, failing_since, last_error, last_attempt_at FROM endpoints;

CREATE TABLE deliveries_new (
    endpoint_id   TEXT NOT NULL REFERENCES endpoints_new (id) ON DELETE CASCADE,
    event_id      TEXT NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    attempts      INTEGER NOT NULL DEFAULT 0,
    next_at       INTEGER NOT NULL,
    state         TEXT NOT NULL DEFAULT 'waiting',
    claimed_by    TEXT,
    claimed_until INTEGER,
    last_error    TEXT,
    PRIMARY KEY (endpoint_id, event_id)
);
INSERT INTO deliveries_new SELECT endpoint_id, event_id, attempts, next_at, state, claimed_by,
    claimed_until, last_error FROM deliveries;

DROP TABLE deliveries;
DROP TABLE endpoints;
ALTER TABLE endpoints_new RENAME TO endpoints;
ALTER TABLE deliveries_new RENAME TO deliveries;

CREATE UNIQUE INDEX endpoints_agent_kind ON endpoints (agent_id, kind) WHERE kind <> 'subscription';
CREATE INDEX deliveries_due ON deliveries (endpoint_id, next_at, event_id) WHERE state = 'waiting';
CREATE INDEX deliveries_event ON deliveries (event_id);

-- What a subscription takes beside its endpoint (same id): its catalogue entry and arguments,
-- the events they match (type globs, sender), the seq its deliveries start after, and when its
-- (agent, URL) was verified.
CREATE TABLE subscriptions (
    id           TEXT PRIMARY KEY REFERENCES endpoints (id) ON DELETE CASCADE,
    agent_id     TEXT NOT NULL,
    name         TEXT NOT NULL,
    arguments    TEXT NOT NULL,
    match_types  TEXT NOT NULL,
    match_sender TEXT,
    after_seq    INTEGER NOT NULL,
    verified_at  INTEGER
);
CREATE INDEX subscriptions_agent ON subscriptions (agent_id);
