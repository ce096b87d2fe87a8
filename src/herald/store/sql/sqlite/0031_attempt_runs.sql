-- A drain step's attempts (the acknowledgement of its cursor's events, the lease of the next
-- page) are one row each, naming the step's events, rather than one row per event: a step of
-- 100 events writes 2 rows instead of 200 with their index entries. Each event keeps the ids of
-- the runs that name it (attempt_runs: "12,15"), set by the same UPDATE that leases or
-- acknowledges it, so an event's history reads its runs by id, never by a scan. A run goes
-- with its agent, and is pruned once none of its events is left (Store.prune). An event's
-- history is in time order; at one time, a run comes after the attempts row numbered "after"
-- (the newest when it was written) and before the next.
ALTER TABLE events ADD COLUMN attempt_runs TEXT;

CREATE TABLE attempt_runs (
    id        INTEGER PRIMARY KEY,
    agent_id  TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    at        INTEGER NOT NULL,
    after     INTEGER NOT NULL,
    mechanism TEXT NOT NULL,
    session   TEXT,
    outcome   TEXT NOT NULL,
    error     TEXT,
    event_ids TEXT NOT NULL
);

CREATE INDEX attempt_runs_agent ON attempt_runs (agent_id);
CREATE INDEX attempt_runs_at ON attempt_runs (at);

-- The finished events' index, selected by comparisons rather than an IN list: SQLite checks a
-- partial index's condition for each row an UPDATE changes (before and after), and codes an IN
-- list there as a table of the list's values made anew each time: two per event a drain step
-- acknowledges, about a sixth of the step's work. The same rows; prune names the same terms
-- (rows.FINISHED) so that it reads this index.
DROP INDEX events_finished;
CREATE INDEX events_finished ON events (status_at)
    WHERE (status = 'delivered' OR status = 'expired' OR status = 'dead' OR status = 'cancelled');
