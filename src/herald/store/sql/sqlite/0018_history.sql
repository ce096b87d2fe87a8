-- Which history of the store this is: a random id made when the store is made, and made anew by
-- `herald restore` in the copy it puts in place. Every position herald hands out (an events
-- cursor, an SSE id) carries it, so that a position from before a restore, where seqs are handed
-- out again, is never taken as a place in the restored store. One row.
CREATE TABLE herald_history (id TEXT NOT NULL);
INSERT INTO herald_history (id) VALUES (lower(hex(randomblob(8))));
