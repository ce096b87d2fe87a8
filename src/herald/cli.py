"""The ``herald`` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence

import uvicorn

from herald.errors import HeraldError
from herald.webhooks.checks import DEFAULT_SCHEDULE_S, parse_schedule

DEFAULT_STORE = "sqlite:///herald.db"
DEFAULT_PORT = 8787
LOG_LEVELS = ["debug", "info", "warning", "error"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="herald", description="Get every event to every AI agent."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the hub: HTTP API and delivery")
    serve.add_argument(
        "--store",
        default=os.environ.get("HERALD_STORE", DEFAULT_STORE),
        help=f"store URL (default {DEFAULT_STORE}, or $HERALD_STORE)",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    serve.add_argument(
        "--port",
        type=_int_from(0, 65535),
        default=DEFAULT_PORT,
        help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    serve.add_argument(
        "--lease",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long a drained event stays reserved for its consumer (default 30)",
    )
    serve.add_argument(
        "--ack-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="how long a push may go unacknowledged before the next way is tried (default 300)",
    )
    serve.add_argument(
        "--backlog-limit",
        type=int,
        default=10,
        metavar="N",
        help="on connect, a backlog longer than this arrives as one summary (default 10)",
    )
    serve.add_argument(
        "--stream-buffer",
        type=int,
        default=2000,
        metavar="N",
        help="how many events a stream client may fall behind before it is cut off (default 2000)",
    )
    serve.add_argument(
        "--public-url",
        help="the hub's URL as agents reach it, told to OpenClaw agents (default: host and port)",
    )
    serve.add_argument(
        "--webhook-allow",
        default="",
        metavar="CLASSES",
        help="address classes webhooks may go to besides public ones: loopback, private"
        " (link-local and cloud metadata addresses never)",
    )
    serve.add_argument(
        "--webhook-schedule",
        default=",".join(str(s) for s in DEFAULT_SCHEDULE_S),
        metavar="SECONDS,...",
        help="delays before each webhook try (default 0,5,300,1800,7200,18000,36000,36000)",
    )
    serve.add_argument(
        "--webhook-disable-after",
        type=float,
        default=5 * 24 * 3600,
        metavar="SECONDS",
        help="disable an endpoint that keeps failing for this long (default 5 days)",
    )
    serve.add_argument("--webhook-timeout", type=float, default=15.0, metavar="SECONDS")
    serve.add_argument(
        "--webhook-concurrency",
        type=_int_from(1),
        default=4,
        metavar="N",
        help="requests in flight to one webhook or OpenClaw endpoint at most (default 4)",
    )
    serve.add_argument(
        "--head-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="close a connection whose request head is not complete within this (default 10)",
    )
    serve.add_argument(
        "--streams-per-key",
        type=_int_from(0),
        default=16,
        metavar="N",
        help="open GET /channel/stream per key at most (default 16; 0: no limit)",
    )
    serve.add_argument(
        "--sessions-per-key",
        type=_int_from(0),
        default=64,
        metavar="N",
        help="live MCP sessions per key at most (default 64; 0: no limit)",
    )
    serve.add_argument(
        "--publish-rate",
        type=float,
        default=1000.0,
        metavar="EVENTS",
        help="events per second one key may publish, each event of a batch counted "
        "(default 1000; 0: no limit)",
    )
    serve.add_argument(
        "--publish-burst",
        type=_int_from(1),
        default=5000,
        metavar="EVENTS",
        help="events one key may publish at once, beyond its rate (default 5000)",
    )
    serve.add_argument("--log-level", default="info", choices=LOG_LEVELS)
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
    args = parser.parse_args(argv)
    if args.command == "bridge":
        return _bridge(args)
    if args.command == "drain":
        return _drain(args)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        _run(_serve(args))
    except HeraldError as exc:
        print(f"herald: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


def _bridge(args: argparse.Namespace) -> int:
    # stdout carries the protocol: every log line goes to stderr.
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    if not args.key:
        print("herald bridge: give the agent's key with --key or HERALD_API_KEY", file=sys.stderr)
        return 2
    from herald.bridge import Bridge

    bridge = Bridge(args.url, args.key, name=args.name, permission_relay=args.permission_relay)
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


def _run(coroutine: object) -> None:
    try:
        import uvloop
    except ImportError:  # uvloop is optional (not on Windows)
        asyncio.run(coroutine)  # type: ignore[arg-type]
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(coroutine)  # type: ignore[arg-type]


async def _serve(args: argparse.Namespace) -> None:
    from herald.delivery.engine import Notifier
    from herald.http.fanout import Fanout
    from herald.http import create_app
    from herald.http.connections import (
        MAX_HEAD_BYTES,
        ConnectionBudget,
        ConnectionGuard,
        guarded_protocol,
        raise_file_limit,
    )
    from herald.http.limits import KeyLimits
    from herald.hub import Hub
    from herald.webhooks.addresses import AddressPolicy
    from herald.webhooks.sender import Sender
    from herald.webhooks.worker import WebhookWorker

    store_url, host, port = args.store, args.host, args.port
    # Every flag is checked before the port is taken, and the port before anything starts.
    hub = Hub.from_url(store_url, lease_s=args.lease)
    limits = KeyLimits(
        streams=args.streams_per_key,
        sessions=args.sessions_per_key,
        publish_rate=args.publish_rate,
        publish_burst=args.publish_burst,
    )
    budget = ConnectionBudget.for_files(raise_file_limit())
    guard = ConnectionGuard(budget.max_connections, args.head_timeout)
    schedule_s = parse_schedule(args.webhook_schedule)
    policy = AddressPolicy.parse(args.webhook_allow)
    sock = _listen(host, port)
    await hub.open()
    try:
        generated = await hub.setup_admin_key(os.environ.get("HERALD_ADMIN_KEY"))
        if generated:
            print(
                f"herald: new admin key (shown once, stored only hashed): {generated}\n"
                "herald: set HERALD_ADMIN_KEY or keep it safe; it publishes and manages agents.",
                flush=True,
            )
        notifier = Notifier(hub, ack_timeout_s=args.ack_timeout, backlog_limit=args.backlog_limit)
        bound_port = sock.getsockname()[1]
        fanout = Fanout(hub, buffer_size=args.stream_buffer)
        public_url = args.public_url or f"http://{host}:{bound_port}"
        sender = Sender(public_url, policy, args.webhook_timeout)
        webhooks = WebhookWorker(
            hub,
            sender,
            schedule_s=schedule_s,
            disable_after_s=args.webhook_disable_after,
            per_endpoint=args.webhook_concurrency,
            grace_s=args.ack_timeout,
            present=notifier.present_agents,
        )
        config = uvicorn.Config(
            create_app(hub, notifier=notifier, fanout=fanout, webhooks=webhooks, limits=limits),
            log_level=args.log_level,
            access_log=False,
            timeout_graceful_shutdown=5,
            http=guarded_protocol(guard),
            ws="none",  # herald serves no WebSocket: an upgrade is an ordinary request
            backlog=budget.backlog,
        )
        server = _Server(config, on_shutdown=fanout.close)
        print(
            f"herald: at most {budget.max_connections} open connections (the open-file limit is "
            f"{budget.files}); a request head must come within {args.head_timeout:g} s and fit "
            f"in {MAX_HEAD_BYTES // 1024} KiB",
            flush=True,
        )
        print(
            f"herald: listening on http://{host}:{bound_port} (store {_redact(store_url)})",
            flush=True,
        )
        await server.serve(sockets=[sock])
    finally:
        await hub.close()


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket.

    Raises:
        HeraldError: the address cannot be taken (in use, not this machine's, not allowed).
    """
    try:
        return socket.create_server((host, port), reuse_port=False)
    except OSError as exc:
        # create_server repeats the address after the reason: the line says it once.
        reason = (exc.strerror or str(exc)).split(" (while attempting", 1)[0]
        reason = reason[:1].lower() + reason[1:]
        raise HeraldError(f"cannot listen on {host}:{port}: {reason}") from exc


def _int_from(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` (to ``high``)."""
    bounds = f"from {low} to {high}" if high is not None else f"of {low} or more"

    def parse(text: str) -> int:
        try:
            value: int | None = int(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be an integer {bounds}, not {text!r}")
        return value

    return parse


class _Server(uvicorn.Server):
    """uvicorn waits for open requests before it shuts down; streams never end by themselves, so
    they are told to end (resume later) first."""

    def __init__(self, config: uvicorn.Config, on_shutdown: Callable[[], Awaitable[None]]) -> None:
        super().__init__(config)
        self._on_shutdown = on_shutdown

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await self._on_shutdown()
        await super().shutdown(sockets)


def _redact(url: str) -> str:
    """The store URL without a password, fit for a log line."""
    scheme, sep, rest = url.partition("://")
    credentials, at, location = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{location}"


if __name__ == "__main__":
    sys.exit(main())
