-- Claims read each endpoint's due deliveries in (next_at, event_id) order from this index, so
-- that the backlog of an endpoint with no room left (a dead one, say) is never read.
DROP INDEX deliveries_due;
CREATE INDEX deliveries_due ON deliveries (endpoint_id, next_at, event_id) WHERE state = 'waiting';
