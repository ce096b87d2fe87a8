-- The senders a publisher key may name in an event's "from" (the agent that gets the replies),
-- a JSON array of handle globs; '[]': none. A key made before keeps what it could do if it was
-- for every agent (["*"]); a key narrowed to some agents could name any sender, and so make
-- their replies go to any agent: it now names none until the admin makes a key that may.
ALTER TABLE publisher_keys ADD COLUMN senders TEXT NOT NULL DEFAULT '[]';
UPDATE publisher_keys SET senders = '["*"]' WHERE handles IS NULL;
