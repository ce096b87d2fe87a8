"""herald as an MCP server, or inside one."""

from herald.mcp.server import HeraldServer, attach, create_server

__all__ = ["HeraldServer", "attach", "create_server"]
