"""The commands an agent's machine runs to follow a hub's events: ``herald bridge`` (a stdio
MCP server for Claude Code) and ``herald drain`` (JSON lines, at least once)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from herald import loop
from herald.config import DEFAULTS, LOG_LEVELS, MCP_ERAS
from herald.errors import HeraldError
from herald.logs import configure_logging
from herald.operator.api import DEFAULT_URL


def add(parser: argparse.ArgumentParser, name: str) -> None:
    """Add the arguments of the command ``name`` to its parser."""
    parser.add_argument(
        "--url",
        default=os.environ.get("HERALD_URL", DEFAULT_URL),
        help=f"the hub (default $HERALD_URL, or {DEFAULT_URL})",
    )
    parser.add_argument(
        "--key", default=os.environ.get("HERALD_API_KEY"), help="the agent's key ($HERALD_API_KEY)"
    )
    if name == "bridge":
        _add_bridge(parser)
        parser.set_defaults(run=_bridge)
    elif name == "drain":
        _add_drain(parser)
        parser.set_defaults(run=_drain)
    else:
        raise ValueError(f"no command {name!r} here")


def _add_bridge(bridge: argparse.ArgumentParser) -> None:
    bridge.add_argument("--name", default="herald", help="the server name Claude Code shows")
    bridge.add_argument(
        "--permission-relay",
        metavar="HANDLE",
        help="relay Claude Code's permission prompts to this agent, whose reply allows or denies",
    )
    bridge.add_argument("--log-level", default="warning", choices=LOG_LEVELS)
    bridge.add_argument(
        "--mcp-era",
        choices=MCP_ERAS,
        default=DEFAULTS.mcp.era,
        help="which MCP protocol era a client probing with server/discover gets, as for"
        f" herald serve (default {DEFAULTS.mcp.era})",
    )


def _add_drain(drain: argparse.ArgumentParser) -> None:
    drain.add_argument("--consumer", help="a name for this drainer, when several share an agent")
    drain.add_argument("--limit", type=int, default=100, help="events per heartbeat (1-100)")
    drain.add_argument("--follow", action="store_true", help="keep polling for new events")
    drain.add_argument("--interval", type=float, default=5.0, metavar="SECONDS")


def _bridge(args: argparse.Namespace) -> int:
    # stdout carries the protocol: every log line goes to stderr.
    configure_logging(args.log_level, "text")
    if not args.key:
        print("herald bridge: give the agent's key with --key or HERALD_API_KEY", file=sys.stderr)
        return 2
    from herald.bridge import Bridge

    bridge = Bridge(
        args.url,
        args.key,
        name=args.name,
        permission_relay=args.permission_relay,
        era=args.mcp_era,
    )
    loop.run(bridge.run_stdio())
    return 0


def _drain(args: argparse.Namespace) -> int:
    if not args.key:
        print("herald drain: give the agent's key with --key or HERALD_API_KEY", file=sys.stderr)
        return 2
    from herald.client import HeraldClient

    async def drain() -> None:
        async with HeraldClient(args.url, args.key) as client:
            events = client.drain(
                consumer=args.consumer,
                limit=args.limit,
                follow=args.follow,
                interval_s=args.interval,
            )
            async for event in events:
                # Printed and flushed before the next batch acknowledges it.
                print(json.dumps(event.to_json(), ensure_ascii=False), flush=True)

    try:
        loop.run(drain())
    except HeraldError as exc:
        print(f"herald drain: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
