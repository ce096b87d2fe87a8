-- The operator's list of loop guard trips (GET /v1/loop-guards) reads the journal's trips by
-- time: an index of those rows alone, which the journal's other rows never enter.
CREATE INDEX journal_loop_guard_trips ON journal (at) WHERE kind = 'loop_guard';
