-- GET /v1/stats counts cancelled events (and scheduled ones, from events_due): the index holds
-- only the cancelled events, so counting them reads it alone, never the finished events of
-- events_finished. No other event enters it.
CREATE INDEX events_cancelled ON events (status_at) WHERE status = 'cancelled';
