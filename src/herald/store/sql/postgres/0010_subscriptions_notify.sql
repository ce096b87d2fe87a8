-- Every herald process LISTENs on herald_subscriptions: a webhook subscription deleted (ended by
-- its client, expired, its agent or event type deleted) tells the others at once, so that none
-- goes on sending what it holds of it.
CREATE FUNCTION herald_notify_subscription_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('herald_subscriptions', OLD.id);
    RETURN NULL;
END
$$;

CREATE TRIGGER endpoints_subscription_deleted AFTER DELETE ON endpoints
    FOR EACH ROW WHEN (OLD.kind = 'subscription')
    EXECUTE FUNCTION herald_notify_subscription_deleted();
