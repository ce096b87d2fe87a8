-- Topics (PUT /v1/topics/{name}): names the operator declares, each with what it is for. An
-- agent subscribes to a topic's name or to a glob of names (* any run, ? one character, as
-- event-type globs; matched as LIKE patterns): a publish to a topic stores one event for each
-- agent with a pattern that matches it, read in the publish's own transaction.
CREATE TABLE topics (
    name        TEXT PRIMARY KEY,
    description TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE TABLE topic_subscriptions (
    agent_id   TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    pattern    TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (agent_id, pattern)
);
CREATE INDEX topic_subscriptions_pattern ON topic_subscriptions (pattern);
-- A publisher key may be limited to topics (globs of them); null: not limited.
ALTER TABLE publisher_keys ADD COLUMN topics JSONB;
