"""An agent's events as MCP Events (SEP-3415) subscriptions: the catalogue an agent can
subscribe to, occurrences, cursors that acknowledge, and the poll. Transport-free: the MCP
server (``herald.mcp.events``) speaks it on ``/mcp``."""
