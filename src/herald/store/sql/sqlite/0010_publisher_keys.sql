-- Publisher keys (POST /v1/keys): what an application publishes with instead of the admin key.
-- Kept only hashed, and looked up by hash on each request, so that a revoked key stops at once
-- in every process. handles and types are JSON arrays (NULL: any handle, any type).
CREATE TABLE publisher_keys (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    key_hash   TEXT NOT NULL UNIQUE,
    scopes     TEXT NOT NULL,
    handles    TEXT,
    types      TEXT,
    created_at INTEGER NOT NULL
);
