-- Dead letters: how many times each event was handed out (leased by a drain or a poll), kept by
-- the statement that leases it, so that a claim tells from the rows it reads already which
-- events reached the hub's limit (--max-deliveries): those become 'dead' instead of being handed
-- out again, closed and counted in their agent's row like the other statuses. Events stored
-- before start from none. A dead event is pruned with the finished ones, its retention counted
-- from when it died (status_at).
ALTER TABLE events ADD COLUMN handed_out INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN dead_events INTEGER NOT NULL DEFAULT 0;
DROP INDEX events_finished;
CREATE INDEX events_finished ON events (status_at) WHERE status IN ('delivered', 'expired', 'dead');
