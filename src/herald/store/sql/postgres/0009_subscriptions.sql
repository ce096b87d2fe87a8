-- MCP Events webhook subscriptions (events/subscribe): an endpoint of kind 'subscription' each,
-- many per agent, so (agent_id, kind) is unique only for the other kinds.
ALTER TABLE endpoints DROP CONSTRAINT endpoints_agent_id_kind_key;
CREATE UNIQUE INDEX endpoints_agent_kind ON endpoints (agent_id, kind) WHERE kind <> 'subscription';
ALTER TABLE endpoints ADD COLUMN expires_at BIGINT, ADD COLUMN last_ok_at BIGINT;

-- What a subscription takes beside its endpoint (same id): its catalogue entry and arguments,
-- the events they match (type globs, sender), the seq its deliveries start after, and when its
-- (agent, URL) was verified.
CREATE TABLE subscriptions (
    id           TEXT PRIMARY KEY REFERENCES endpoints (id) ON DELETE CASCADE,
    agent_id     TEXT NOT NULL,
    name         TEXT NOT NULL,
    arguments    JSONB NOT NULL,
    match_types  JSONB NOT NULL,
    match_sender TEXT,
    after_seq    BIGINT NOT NULL,
    verified_at  BIGINT
);
CREATE INDEX subscriptions_agent ON subscriptions (agent_id);
