-- A publish to a topic writes a row of each subscriber's agent (its seq) and wakes each of them.
--
-- Agents' pages keep half their room free, so that the update of an agent's counters (a publish,
-- an acknowledgement) fits in its own page: PostgreSQL then writes no new entry into the four
-- indexes of agents (a "HOT" update), where a full page cost each of a topic's 10,000 updates a
-- row and three index entries elsewhere. It holds for pages written from now on (a new store,
-- new agents); VACUUM FULL agents applies it to the pages of an existing store.
ALTER TABLE agents SET (fillfactor = 50);

-- A committed insert of events names its agents in notifications of up to 200 ids each, joined
-- by commas (an id is 30 characters: 6,200 bytes, under the 8,000 a payload may hold), instead
-- of one notification for each agent: 10,000 for a topic's publish, each queued, sent to every
-- listening process and handled there on its own. A process of an older herald reads such a
-- payload as one unknown agent and is not woken by it; its readers still poll the table.
CREATE OR REPLACE FUNCTION herald_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('herald_events', string_agg(agent_id, ','))
    FROM (
        SELECT agent_id, (row_number() OVER (ORDER BY agent_id) - 1) / 200 AS part
        FROM (SELECT DISTINCT agent_id FROM new_events) AS agents
    ) AS numbered
    GROUP BY part;
    RETURN NULL;
END
$$;
