-- GET /v1/stream follows this journal: one row per transaction that published, recorded
-- attempts or acknowledgements, expired events or changed an endpoint, written in it. An
-- identity's values are not in commit order (a transaction may take a lower position and commit
-- after a higher one was read), so rows are read by (tx, position), the writing transaction's id
-- first, and only those of transactions older than every one still running: a reader never
-- passes a row that commits later. The detail names what changed (herald.store.journal); the
-- feed reads the events it names. Pruned with the events' retention, the newest row always kept.
CREATE TABLE journal (
    tx       xid8 NOT NULL DEFAULT pg_current_xact_id(),
    position BIGINT GENERATED ALWAYS AS IDENTITY,
    at       BIGINT NOT NULL,
    kind     TEXT NOT NULL,
    agent_id TEXT,
    detail   TEXT NOT NULL,
    PRIMARY KEY (tx, position)
);
