-- A schedule pass reads only the events after the seq each endpoint was scheduled through:
-- every event of its agent up to it has a delivery to it or is one no pass schedules (closed,
-- expired, low, held, muted). A pass moves it up to before the first event it left without a
-- delivery (in its grace, locked by a drain, or past its limit), or to the agent's last seq.
-- What makes an earlier event schedulable again moves it back, and counts in schedule_resets:
-- the agent's muted types changed, an event redelivered. A pass that read the events before
-- such a change (another process's transaction) leaves the mark alone: it moves it only while
-- schedule_resets is what it read. A disabled endpoint's mark stands still (no pass looks at
-- it): it is true again when the endpoint is enabled. A new endpoint starts at 0: it gets the
-- backlog.
ALTER TABLE endpoints
    ADD COLUMN scheduled_through bigint NOT NULL DEFAULT 0,
    ADD COLUMN schedule_resets bigint NOT NULL DEFAULT 0;
