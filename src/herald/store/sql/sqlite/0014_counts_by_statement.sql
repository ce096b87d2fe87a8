-- The counts of 0013 are kept by the statements that change them (herald.store.sqlite.counts),
-- once per statement: the triggers per row cost an acknowledgement of a hundred events about as
-- much again as the acknowledgement itself, and each attempt one upsert of its count.
DROP TRIGGER events_count_status;
DROP TRIGGER events_count_delete;
DROP TRIGGER attempts_count;
