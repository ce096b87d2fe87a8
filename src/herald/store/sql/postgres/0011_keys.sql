-- An agent's key rotated with a grace (POST /v1/agents/{id}/rotate-key): the key it replaced
-- keeps working until previous_until, in every process, since each key lookup reads it here.
-- Only one previous key: a rotation during a grace replaces it.
ALTER TABLE agents ADD COLUMN previous_key_hash TEXT;
ALTER TABLE agents ADD COLUMN previous_until BIGINT;
CREATE INDEX agents_previous_key_hash ON agents (previous_key_hash)
    WHERE previous_key_hash IS NOT NULL;
