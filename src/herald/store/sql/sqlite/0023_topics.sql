-- Topics (PUT /v1/topics/{name}): names the operator declares, each with what it is for. An
-- agent subscribes to a topic's name or to a glob of names (* any run, ? one character, as
-- event-type globs; GLOB matches them): a publish to a topic stores one event for each agent
-- with a pattern that matches it, read in the publish's own transaction.
CREATE TABLE topics (
    name        TEXT PRIMARY KEY,
    description TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE TABLE topic_subscriptions (
    agent_id   TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    pattern    TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (agent_id, pattern)
) WITHOUT ROWID;
CREATE INDEX topic_subscriptions_pattern ON topic_subscriptions (pattern);
-- A publisher key may be limited to topics (globs of them, as JSON text); null: not limited.
ALTER TABLE publisher_keys ADD COLUMN topics TEXT;
