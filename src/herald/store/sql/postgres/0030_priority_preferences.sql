-- Priorities: how much each event matters to its agent (low, normal, high, urgent). A low event
-- is never pushed (no webhook is scheduled for it; a stream or an MCP session passes it over,
-- and a pushed position does not acknowledge it): it waits to be drained. Events stored before
-- are normal; the column's default costs no rewrite of the table.
ALTER TABLE events ADD COLUMN priority text NOT NULL DEFAULT 'normal';
-- Preferences: an agent's own rules for what is pushed to it (muted event-type globs), as JSON.
-- The webhooks' schedule and a pushed position's acknowledgement read them in SQL.
ALTER TABLE agents ADD COLUMN preferences jsonb NOT NULL DEFAULT '{}';
