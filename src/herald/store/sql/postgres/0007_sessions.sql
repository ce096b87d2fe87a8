-- Live sessions, so that every process sharing the store sees them: the process holding one
-- refreshes its expiry while it lives; a session of a process that died is ignored once its
-- expiry passes, and deleted by the next expire().
CREATE TABLE sessions (
    id             TEXT PRIMARY KEY,
    agent_id       TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    process        TEXT NOT NULL,
    transport      TEXT NOT NULL,
    era            TEXT NOT NULL,
    client_name    TEXT,
    client_version TEXT,
    capabilities   JSONB NOT NULL,
    can_push       BOOLEAN NOT NULL,
    connected_at   BIGINT NOT NULL,
    seen_at        BIGINT NOT NULL,
    expires_at     BIGINT NOT NULL
);

CREATE INDEX sessions_agent ON sessions (agent_id, expires_at);
CREATE INDEX sessions_expiry ON sessions (expires_at);
