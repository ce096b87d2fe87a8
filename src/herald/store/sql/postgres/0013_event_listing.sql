-- GET /v1/events lists events newest first by (created_at, id), of every agent or of one: each
-- page is read backwards from one of these indexes, from where the page before ended. Ids are
-- compared byte by byte, as SQLite does, whatever the database's collation.
CREATE INDEX events_newest ON events (created_at, id COLLATE "C");
CREATE INDEX events_agent_newest ON events (agent_id, created_at, id COLLATE "C");
