-- The open events someone holds (leased, or pushed to a session), by holder: a cursor's
-- acknowledgement of what its consumer was handed reads these, not every open event before it.
CREATE INDEX events_held ON events (agent_id, lease_owner, seq)
    WHERE status IN ('pending', 'sent') AND lease_owner IS NOT NULL;
