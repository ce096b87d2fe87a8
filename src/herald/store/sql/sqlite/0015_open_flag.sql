-- Whether an event is open (pending or sent), kept in a column of its own that only opening and
-- closing an event change. The open events' indexes select on it rather than on status: a push
-- (pending -> sent) then leaves them alone, where an index whose condition names status has its
-- entry taken out and put back, a page written per agent pushed to.
ALTER TABLE events ADD COLUMN is_open INTEGER NOT NULL DEFAULT 1;
UPDATE events SET is_open = 0 WHERE status NOT IN ('pending', 'sent');
DROP INDEX events_open;
CREATE INDEX events_open ON events (agent_id, seq) WHERE is_open = 1;
DROP INDEX events_expiry;
CREATE INDEX events_expiry ON events (expires_at) WHERE is_open = 1 AND expires_at IS NOT NULL;
