-- The webhook workers of the processes serving this database. Each is known by an advisory lock
-- that its process holds while it lives, on a connection of its own: once the lock is gone (the
-- process was killed), the others free its claims instead of waiting for them to run out.
-- missing_since: when another process first found the lock gone (NULL while it is held).
CREATE TABLE claimants (
    id            TEXT PRIMARY KEY,
    lock_key      BIGINT NOT NULL,
    missing_since BIGINT
);
