-- Where an MCP Events webhook subscription's pace has reached under a per-subscription rate
-- (herald serve --subscription-rate): claims take its deliveries no faster, in every process.
ALTER TABLE subscriptions ADD COLUMN paced_until BIGINT;
