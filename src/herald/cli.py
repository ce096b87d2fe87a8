"""The ``herald`` command: its arguments. What ``herald serve`` runs is ``herald.serve``."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Mapping, Sequence

from herald.config import DEFAULTS, LOG_LEVELS, MCP_ERAS, ServeConfig
from herald.errors import HeraldError
from herald.logs import configure_logging
from herald.operator import commands as operator_commands
from herald.settings import SETTINGS, ConfigProblems, Resolved, effective_toml, resolve


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="herald", description="Get every event to every AI agent."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _add_serve(commands.add_parser("serve", help="run the hub: HTTP API and delivery"))
    bridge = commands.add_parser(
        "bridge", help="a stdio MCP server for Claude Code that follows a hub's events"
    )
    bridge.add_argument("--url", required=True, help="the hub, e.g. http://127.0.0.1:8787")
    bridge.add_argument(
        "--key", default=os.environ.get("HERALD_API_KEY"), help="the agent's key ($HERALD_API_KEY)"
    )
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
    _add_backup_and_restore(commands)
    drain = commands.add_parser(
        "drain", help="print an agent's pending events as JSON lines, at least once"
    )
    drain.add_argument("--url", required=True, help="the hub, e.g. http://127.0.0.1:8787")
    drain.add_argument(
        "--key", default=os.environ.get("HERALD_API_KEY"), help="the agent's key ($HERALD_API_KEY)"
    )
    drain.add_argument("--consumer", help="a name for this drainer, when several share an agent")
    drain.add_argument("--limit", type=int, default=100, help="events per heartbeat (1-100)")
    drain.add_argument("--follow", action="store_true", help="keep polling for new events")
    drain.add_argument("--interval", type=float, default=5.0, metavar="SECONDS")
    operator_commands.register(commands)
    _add_admin_key(commands.add_parser("admin-key", help="manage the admin key"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "operator", False):
        try:
            operator_commands.run(args)
        except HeraldError as exc:
            print(f"herald: {exc.message}", file=sys.stderr)
            return 1
        return 0
    if args.command == "bridge":
        return _bridge(args)
    if args.command == "drain":
        return _drain(args)
    if args.command == "admin-key":
        return _rotate_admin_key(args)
    if args.command in {"backup", "restore"}:
        return _backup_or_restore(args)
    return _serve(args)


def _add_backup_and_restore(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    backup = commands.add_parser(
        "backup", help="copy a SQLite store, even while it is served (PostgreSQL: see pg_dump)"
    )
    backup.add_argument("path", help="the file to write (replaced if it exists)")
    _add_store(backup)
    restore = commands.add_parser(
        "restore", help="put a backup in a SQLite store's place, with herald stopped"
    )
    restore.add_argument("backup", help="the file herald backup wrote")
    _add_store(restore)


def _add_store(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        default=os.environ.get("HERALD_STORE", DEFAULTS.store_url),
        help=f"store URL (default {DEFAULTS.store_url}, or $HERALD_STORE)",
    )


def _add_admin_key(admin_key: argparse.ArgumentParser) -> None:
    actions = admin_key.add_subparsers(dest="action", required=True)
    rotate = actions.add_parser(
        "rotate",
        help="print a new admin key, which replaces the stored one for good: every herald"
        " sharing the store stops taking the old one within a second",
    )
    _add_store(rotate)


def _rotate_admin_key(args: argparse.Namespace) -> int:
    if os.environ.get("HERALD_ADMIN_KEY"):
        print(
            "herald admin-key rotate: HERALD_ADMIN_KEY is set, and the next herald serve would"
            " replace the new key with it again; unset it, or change it and restart instead",
            file=sys.stderr,
        )
        return 2
    from herald.hub import Hub  # here: the other commands need no store

    async def rotate() -> str:
        async with Hub.from_url(args.store) as hub:
            return await hub.rotate_admin_key()

    try:
        key = asyncio.run(rotate())
    except HeraldError as exc:
        print(f"herald admin-key rotate: {exc.message}", file=sys.stderr)
        return 2
    print(key)
    print(
        "herald: the admin key is replaced (shown once, stored only hashed); every herald"
        " sharing the store stops taking the old one within a second",
        file=sys.stderr,
    )
    return 0


def _add_serve(serve: argparse.ArgumentParser) -> None:
    """``herald serve``'s flags: one per setting (``herald.settings``). A flag not given is left
    out, so that a variable, the file or the default can set it; what each defaults to is told
    from ``DEFAULTS``."""
    serve.add_argument(
        "--config",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="read settings from this TOML file: each flag's name without -- and with _ for -,"
        ' e.g. webhook_allow = "loopback"; flags and variables win over it ($HERALD_CONFIG)',
    )
    serve.add_argument(
        "--check-config",
        action="store_true",
        help="check the flags, variables and file, print the configuration they make and exit",
    )
    for setting in SETTINGS:
        told = f"{setting.help} (default {setting.shown_default()}; ${setting.env})"
        if setting.kind.is_switch:
            serve.add_argument(
                setting.flag, action="store_true", default=argparse.SUPPRESS, help=told
            )
        else:
            serve.add_argument(
                setting.flag, metavar=setting.kind.metavar, default=argparse.SUPPRESS, help=told
            )


def serve_settings(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Resolved:
    """The settings ``herald serve``'s flags, ``environ`` (by default the process's) and the
    TOML file they name make.

    Raises:
        ConfigProblems: one line per problem.
    """
    given = {s.name: getattr(args, s.name) for s in SETTINGS if hasattr(args, s.name)}
    environ = os.environ if environ is None else environ
    return resolve(given, environ, getattr(args, "config", None))


def serve_config(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ServeConfig:
    """The ``ServeConfig`` of ``serve_settings``.

    Raises:
        ConfigProblems: one line per problem.
    """
    return serve_settings(args, environ).config


def _serve(args: argparse.Namespace) -> int:
    try:
        settings = serve_settings(args)
    except ConfigProblems as exc:
        for problem in exc.problems:
            print(f"herald: {problem}", file=sys.stderr)
        return 2
    except HeraldError as exc:  # settings that are each fine but not together
        print(f"herald: {exc.message}", file=sys.stderr)
        return 2
    if args.check_config:
        print("\n".join(effective_toml(settings)))
        return 0
    config = settings.config
    configure_logging(config.log_level, config.log_format)
    try:
        if config.workers > 1:
            from herald.workers import serve_in_workers

            return serve_in_workers(config, settings.admin_key, _run)
        from herald.serve import serve  # here: bridge and drain need none of the server

        _run(serve(config, admin_key=settings.admin_key))
    except HeraldError as exc:
        print(f"herald: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


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
    _run(bridge.run_stdio())
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
        _run(drain())
    except HeraldError as exc:
        print(f"herald drain: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


def _backup_or_restore(args: argparse.Namespace) -> int:
    from herald import backup

    try:
        if args.command == "backup":
            backup.backup(args.store, args.path)
        else:
            backup.restore(args.backup, args.store)
    except HeraldError as exc:
        print(f"herald {args.command}: {exc.message}", file=sys.stderr)
        return 1
    return 0


def _run(coroutine: object) -> None:
    try:
        import uvloop
    except ImportError:  # uvloop is optional (not on Windows)
        asyncio.run(coroutine)  # type: ignore[arg-type]
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(coroutine)  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
