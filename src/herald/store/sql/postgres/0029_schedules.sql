-- Schedules: an event published for later (deliver_at) is stored at once as 'scheduled', with
-- a placeholder seq below zero (each agent's next one down), offered by no way (every way reads
-- pending or sent events) and counted in no agent's row. When it is due, one statement makes it
-- pending with its agent's next seq, as a publish would have numbered it then. The index holds
-- only the scheduled events, by due time: finding those due is one range read of it.
ALTER TABLE events ADD COLUMN deliver_at BIGINT;
CREATE INDEX events_due ON events (deliver_at) WHERE status = 'scheduled';
