-- Which history of the store this is: a random id made when the store is made. Every position
-- herald hands out (an events cursor, an SSE id) carries it with this table's own oid, so that a
-- position from before a restore, where seqs are handed out again, is never taken as a place in
-- the restored store: pg_restore makes its tables anew (with --clean, or into a new database),
-- and a table made anew gets another oid. One row.
CREATE TABLE herald_history (id TEXT NOT NULL);
INSERT INTO herald_history (id) VALUES (substr(md5(random()::text || clock_timestamp()::text), 1, 16));
