"""The commands run beside the store: ``herald serve`` (its flags, one per setting), ``herald
admin-key rotate``, ``herald backup`` and ``herald restore``. What ``herald serve`` runs is
``herald.serve``."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
from collections.abc import Mapping

from herald import loop
from herald.config import DEFAULTS, ServeConfig
from herald.errors import HeraldError
from herald.logs import configure_logging
from herald.settings import SETTINGS, ConfigProblems, Resolved, effective_toml, resolve
from herald.urls import backend_of, password_free, sqlite_path


def add(parser: argparse.ArgumentParser, name: str) -> None:
    """Add the arguments of the command ``name`` to its parser."""
    if name == "serve":
        _add_serve(parser)
        parser.set_defaults(run=_serve)
    elif name == "admin-key":
        _add_admin_key(parser)
        parser.set_defaults(run=_rotate_admin_key)
    elif name == "backup":
        parser.add_argument("path", help="the file to write (replaced if it exists)")
        _add_store(parser)
        parser.set_defaults(run=_backup_or_restore)
    elif name == "restore":
        parser.add_argument("backup", help="the file herald backup wrote")
        _add_store(parser)
        parser.set_defaults(run=_backup_or_restore)
    else:
        raise ValueError(f"no command {name!r} here")


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
        if not await Hub.store_exists(args.store):
            raise HeraldError(_no_store_at(args.store))
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


def _no_store_at(store_url: str) -> str:
    """The line for an operator's command given a store that was never made: opening it would
    make an empty one, and a mistyped path or name would go unnoticed."""
    if backend_of(store_url) == "sqlite":
        where = f"no SQLite store at {sqlite_path(store_url)}"
    else:
        where = f"no herald store in {password_free(store_url)}"
    return f"there is {where}: give the --store that herald serve uses"


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
        elif setting.kind.repeatable:
            serve.add_argument(
                setting.flag,
                action="append",
                metavar=setting.kind.metavar,
                default=argparse.SUPPRESS,
                help=told,
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
            # herald.workers imports the server itself, once the metrics are set up to be
            # shared by the workers.
            from herald.workers import serve_in_workers

            return serve_in_workers(config, settings.admin_key, loop.run, _keep_what_lasts)
        from herald.serve import serve  # here: --check-config needs none of the server

        _keep_what_lasts()
        loop.run(serve(config, admin_key=settings.admin_key))
    except HeraldError as exc:
        print(f"herald: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


def _keep_what_lasts() -> None:
    """What the server's modules made as they were imported lives as long as the process: the
    collector's full passes need not walk it again. Each pass walked it all and stopped the
    event loop for 80-180 ms (with 100 streams or 200 MCP sessions open); now it walks what
    serving made, 20-90 ms. Forked workers share it unwritten, too."""
    gc.collect()
    gc.freeze()


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
