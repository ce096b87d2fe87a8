-- Schedules: an event published for later (deliver_at) is stored at once as 'scheduled', with
-- a placeholder seq below zero (each agent's next one down), offered by no way (every way reads
-- pending or sent events) and counted in no agent's row. When it is due, one statement makes it
-- pending with its agent's next seq, as a publish would have numbered it then. The index holds
-- only the scheduled events, by due time: finding those due is one range read of it.
ALTER TABLE events ADD COLUMN deliver_at BIGINT;
CREATE INDEX events_due ON events (deliver_at) WHERE status = 'scheduled';
-- A cancelled event is kept for the retention from when it was cancelled, then pruned with the
-- finished ones.
DROP INDEX events_finished;
CREATE INDEX events_finished ON events (status_at)
    WHERE status IN ('delivered', 'expired', 'dead', 'cancelled');
