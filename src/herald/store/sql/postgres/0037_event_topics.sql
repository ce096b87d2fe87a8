-- A topic's copies say which topic they came from: the name as it was published to, kept on each
-- subscriber's copy (null on an event published to its agent, and on every event stored before
-- this). A publisher key limited to topics may cancel a copy of one of them by it, and the
-- listings filter by it. Adding a nullable column without a default rewrites no row.
ALTER TABLE events ADD COLUMN topic TEXT;
