-- GET /v1/stream follows this journal: one row per transaction that published, recorded
-- attempts or acknowledgements, expired events or changed an endpoint, written in it. SQLite has
-- one writer, so the position order is the commit order. The detail names what changed
-- (herald.store.journal); the feed reads the events it names. Pruned with the events' retention,
-- the newest row always kept, so that no position is given twice.
CREATE TABLE journal (
    position INTEGER PRIMARY KEY,
    at       INTEGER NOT NULL,
    kind     TEXT NOT NULL,
    agent_id TEXT,
    detail   TEXT NOT NULL
);
