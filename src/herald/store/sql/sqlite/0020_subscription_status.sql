-- What an MCP Events webhook subscription's deliveryStatus and its gaps need to outlive a
-- restart: when a gap arose that its endpoint has not been told of yet (events it was owed
-- expired or were pruned, or a delivery was given up on), until when a receiver's Retry-After
-- holds a delivery back, and its attempts and failures per minute over the last hour (the
-- rolling window its suspension is decided on).
ALTER TABLE subscriptions ADD COLUMN gap_at INTEGER;
ALTER TABLE subscriptions ADD COLUMN held_until INTEGER;
CREATE INDEX subscriptions_gaps ON subscriptions (id) WHERE gap_at IS NOT NULL;

CREATE TABLE subscription_minutes (
    subscription_id TEXT NOT NULL REFERENCES subscriptions (id) ON DELETE CASCADE,
    minute          INTEGER NOT NULL,
    attempts        INTEGER NOT NULL,
    failures        INTEGER NOT NULL,
    PRIMARY KEY (subscription_id, minute)
);
