-- Which webhook-id a subscription's event deliveries carry, as its client's profile asked when
-- it subscribed: the event's id ('event', what deployed clients check) or one of each
-- delivery's own ('message').
ALTER TABLE subscriptions ADD COLUMN webhook_id TEXT NOT NULL DEFAULT 'event';
