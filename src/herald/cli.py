"""The ``herald`` command: which subcommands there are, and the one given run.

A subcommand's arguments and what it runs live in its own module, imported only when it is the
one given: ``herald send`` and the other operator's commands (``herald.operator``) only call a
hub's HTTP API, and start without loading the server and the store that ``herald serve`` needs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from herald import __version__


@dataclass(frozen=True)
class Subcommand:
    help: str
    module: str
    """Where it is: ``add(parser, name)`` adds its arguments to ``parser`` and sets ``run``, a
    function of the parsed arguments that returns the exit code."""


SERVING = "herald.cli_serve"
FOLLOWING = "herald.cli_bridge"
OPERATOR = "herald.operator.commands"
PIPE_CLOSED = 141
"""The exit code of a command whose reader closed its stdout (``herald events | head``): what
the shell reports for its own tools, stopped by SIGPIPE (128 + 13)."""

SUBCOMMANDS = {
    "serve": Subcommand("run the hub: HTTP API and delivery", SERVING),
    "bridge": Subcommand(
        "a stdio MCP server for Claude Code that follows a hub's events", FOLLOWING
    ),
    "backup": Subcommand(
        "copy a SQLite store, even while it is served (PostgreSQL: see pg_dump)", SERVING
    ),
    "restore": Subcommand("put a backup in a SQLite store's place, with herald stopped", SERVING),
    "drain": Subcommand("print an agent's pending events as JSON lines, at least once", FOLLOWING),
    "agent": Subcommand("manage agents: add, list, show, rm, keys, endpoints", OPERATOR),
    "send": Subcommand("publish an event, or a file of them", OPERATOR),
    "events": Subcommand("events, newest first", OPERATOR),
    "event": Subcommand("one event: its attempts, or offer it again", OPERATOR),
    "endpoints": Subcommand("every agent's webhook endpoints", OPERATOR),
    "endpoint": Subcommand("one endpoint", OPERATOR),
    "status": Subcommand("is the hub healthy: one screen", OPERATOR),
    "tail": Subcommand(
        "a live feed of publishes, delivery attempts, acks, expiries and endpoint changes",
        OPERATOR,
    ),
    "key": Subcommand("publisher keys: keys that may only publish", OPERATOR),
    "topics": Subcommand("topics and their subscribers: list, add, show, rm, subscribe", OPERATOR),
    "admin-key": Subcommand("manage the admin key", SERVING),
}


def build_parser(loaded: Collection[str] = SUBCOMMANDS.keys()) -> argparse.ArgumentParser:
    """The parser of every subcommand; the arguments only of those ``loaded`` (each imports its
    module), which is all that parsing a command line of one of them needs."""
    parser = argparse.ArgumentParser(
        prog="herald", description="Get every event to every AI agent."
    )
    # herald's own constant, not importlib.metadata (which costs every command ~50 ms to import);
    # tests/test_package.py holds it equal to the installed distribution's version.
    parser.add_argument("--version", action="version", version=f"herald {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, subcommand in SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=subcommand.help, description=subcommand.help)
        if name in loaded:
            importlib.import_module(subcommand.module).add(sub, name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser(loaded=_named(argv)).parse_args(argv)
        code: int = args.run(args)
        sys.stdout.flush()  # what is still buffered meets a closed pipe here, not at exit
    except BrokenPipeError:
        # The reader went away: stop without a word, as the shell's own tools do. Python would
        # flush stdout again at exit and complain; its writes now go nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return PIPE_CLOSED
    return code


def _named(argv: Sequence[str]) -> list[str]:
    """The subcommand the command line names: its first word that is not an option (``herald``
    itself has none but --help), if it is one."""
    words = [word for word in argv if not word.startswith("-")]
    return [words[0]] if words and words[0] in SUBCOMMANDS else []


if __name__ == "__main__":
    sys.exit(main())
