-- One agent's events are listed newest first by seq, read from the unique index on (agent_id,
-- seq) that every event enters anyway: the index on (agent_id, created_at, id) that listed them
-- by time is no longer read, and every stored event no longer pays for entering it.
DROP INDEX IF EXISTS events_agent_newest;
