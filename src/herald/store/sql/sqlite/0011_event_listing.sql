-- GET /v1/events lists events newest first by (created_at, id), of every agent or of one: each
-- page is read backwards from one of these indexes, from where the page before ended.
CREATE INDEX events_newest ON events (created_at, id);
CREATE INDEX events_agent_newest ON events (agent_id, created_at, id);
