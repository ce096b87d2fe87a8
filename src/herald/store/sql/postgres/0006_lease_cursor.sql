-- The cursor a drain sent with the request that leased the event. A cursor acknowledges what its
-- consumer was handed before: an event leased in the answer to that very cursor (a lower seq
-- whose lease ran out elsewhere) is not acknowledged when the same cursor comes again, as it
-- does after a lost answer.
ALTER TABLE events ADD COLUMN lease_cursor BIGINT;
