"""The ``herald`` command: its arguments. What ``herald serve`` runs is ``herald.serve``."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence

from herald.config import (
    DEFAULTS,
    MCP_ERAS,
    DeliveryConfig,
    HttpConfig,
    HubConfig,
    KeyLimits,
    McpConfig,
    ServeConfig,
    StreamConfig,
    SubscriptionConfig,
    WebhookConfig,
)
from herald.errors import HeraldError
from herald.webhooks.addresses import AddressPolicy
from herald.webhooks.checks import parse_schedule

LOG_LEVELS = ["debug", "info", "warning", "error"]


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
    _add_admin_key(commands.add_parser("admin-key", help="manage the admin key"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "bridge":
        return _bridge(args)
    if args.command == "drain":
        return _drain(args)
    if args.command == "admin-key":
        return _rotate_admin_key(args)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = serve_config(args)
        from herald.serve import serve  # here: bridge and drain need none of the server

        _run(serve(config, admin_key=os.environ.get("HERALD_ADMIN_KEY")))
    except HeraldError as exc:
        print(f"herald: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


def _add_serve(serve: argparse.ArgumentParser) -> None:
    """``herald serve``'s flags: each one sets a field of ``ServeConfig`` and defaults to it."""
    http, hub, delivery = DEFAULTS.http, DEFAULTS.hub, DEFAULTS.delivery
    webhooks, limits = DEFAULTS.webhooks, DEFAULTS.limits
    _add_store(serve)
    serve.add_argument(
        "--host", default=http.host, help=f"address to listen on (default {http.host})"
    )
    serve.add_argument(
        "--port",
        type=_int_from(0, 65535),
        default=http.port,
        help=f"port to listen on (default {http.port}; 0 picks a free one)",
    )
    serve.add_argument(
        "--lease",
        type=float,
        default=hub.lease_s,
        metavar="SECONDS",
        help=f"how long a drained event stays reserved for its consumer (default {hub.lease_s:g})",
    )
    serve.add_argument(
        "--ack-timeout",
        type=float,
        default=delivery.ack_timeout_s,
        metavar="SECONDS",
        help="how long a push may go unacknowledged before the next way is tried"
        f" (default {delivery.ack_timeout_s:g})",
    )
    serve.add_argument(
        "--backlog-limit",
        type=int,
        default=delivery.backlog_limit,
        metavar="N",
        help="on connect, a backlog longer than this arrives as one summary"
        f" (default {delivery.backlog_limit})",
    )
    serve.add_argument(
        "--mcp-era",
        choices=MCP_ERAS,
        default=DEFAULTS.mcp.era,
        help="which MCP protocol era a client probing with server/discover gets: auto (by its"
        " client profile: Claude Code stays on the legacy era, where herald can push to it;"
        " others get 2026-07-28), legacy (the probe is refused) or modern (it is answered)"
        f" (default {DEFAULTS.mcp.era})",
    )
    serve.add_argument(
        "--presence-ttl",
        type=float,
        default=delivery.presence_ttl_s,
        metavar="SECONDS",
        help="how long a live session stays registered in the store without a refresh: the"
        " sessions of a process that died drop out within it"
        f" (default {delivery.presence_ttl_s:g})",
    )
    serve.add_argument(
        "--stream-buffer",
        type=int,
        default=DEFAULTS.streams.buffer_size,
        metavar="N",
        help="how many events a stream client may fall behind before it is cut off"
        f" (default {DEFAULTS.streams.buffer_size})",
    )
    serve.add_argument(
        "--public-url",
        default=http.public_url,
        help="the hub's URL as agents reach it, told to OpenClaw agents (default: host and port)",
    )
    serve.add_argument(
        "--webhook-allow",
        default=str(webhooks.allow),
        metavar="CLASSES",
        help="address classes webhooks may go to besides public ones: loopback, private"
        " (link-local and cloud metadata addresses never)",
    )
    schedule = ",".join(str(s) for s in webhooks.schedule_s)
    serve.add_argument(
        "--webhook-schedule",
        default=schedule,
        metavar="SECONDS,...",
        help=f"delays before each webhook try (default {schedule})",
    )
    serve.add_argument(
        "--webhook-disable-after",
        type=float,
        default=webhooks.disable_after_s,
        metavar="SECONDS",
        help="disable an endpoint that keeps failing for this long"
        f" (default {webhooks.disable_after_s:g}: {webhooks.disable_after_s / 86400:g} days)",
    )
    serve.add_argument(
        "--webhook-timeout",
        type=float,
        default=webhooks.timeout_s,
        metavar="SECONDS",
        help=f"how long one webhook request may take (default {webhooks.timeout_s:g})",
    )
    serve.add_argument(
        "--webhook-concurrency",
        type=_int_from(1),
        default=webhooks.per_endpoint,
        metavar="N",
        help="requests in flight to one webhook or OpenClaw endpoint at most"
        f" (default {webhooks.per_endpoint})",
    )
    serve.add_argument(
        "--head-timeout",
        type=float,
        default=http.head_timeout_s,
        metavar="SECONDS",
        help="close a connection whose request head is not complete within this"
        f" (default {http.head_timeout_s:g})",
    )
    serve.add_argument(
        "--streams-per-key",
        type=_int_from(0),
        default=limits.streams,
        metavar="N",
        help=f"open GET /channel/stream per key at most (default {limits.streams}; 0: no limit)",
    )
    serve.add_argument(
        "--sessions-per-key",
        type=_int_from(0),
        default=limits.sessions,
        metavar="N",
        help=f"live MCP sessions per key at most (default {limits.sessions}; 0: no limit)",
    )
    serve.add_argument(
        "--publish-rate",
        type=float,
        default=limits.publish_rate,
        metavar="EVENTS",
        help="events per second one key may publish, each event of a batch counted "
        f"(default {limits.publish_rate:g}; 0: no limit)",
    )
    serve.add_argument(
        "--publish-burst",
        type=_int_from(1),
        default=limits.publish_burst,
        metavar="EVENTS",
        help="events one key may publish at once, beyond its rate"
        f" (default {limits.publish_burst})",
    )
    serve.add_argument("--log-level", default=DEFAULTS.log_level, choices=LOG_LEVELS)
    _add_subscriptions(serve)


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


def _add_subscriptions(serve: argparse.ArgumentParser) -> None:
    """The flags of ``SubscriptionConfig``: MCP Events webhook subscriptions."""
    subscriptions = DEFAULTS.subscriptions
    for flag, default, what in (
        ("--subscription-ttl", subscriptions.default_ttl_s, "the grant when none is suggested"),
        ("--subscription-max-ttl", subscriptions.max_ttl_s, "the longest grant"),
        ("--subscription-min-ttl", subscriptions.min_ttl_s, "the shortest grant (raised to it)"),
    ):
        serve.add_argument(
            flag,
            type=float,
            default=default,
            metavar="SECONDS",
            help=f"Events webhook subscriptions: {what} (default {default:g})",
        )
    serve.add_argument(
        "--subscription-no-expiry",
        action="store_true",
        help="grant no expiry to an Events webhook subscription that asks for it (ttlMs null);"
        " without it, it gets the longest grant",
    )
    schedule = ",".join(str(s) for s in subscriptions.schedule_s)
    serve.add_argument(
        "--subscription-schedule",
        default=schedule,
        metavar="SECONDS,...",
        help=f"delays before each try of an Events webhook delivery (default {schedule})",
    )
    serve.add_argument(
        "--subscription-limit",
        type=_int_from(0),
        default=subscriptions.max_per_agent,
        metavar="N",
        help="Events webhook subscriptions one agent may hold at once"
        f" (default {subscriptions.max_per_agent}; 0: no limit)",
    )


def serve_config(args: argparse.Namespace) -> ServeConfig:
    """The ``ServeConfig`` that ``herald serve``'s flags say; what no flag sets keeps its default.

    Raises:
        InvalidInput: the webhook or subscription schedule, the subscription TTLs, the address
            classes or a per-key limit is invalid.
    """
    return ServeConfig(
        store_url=args.store,
        log_level=args.log_level,
        http=HttpConfig(
            host=args.host,
            port=args.port,
            public_url=args.public_url,
            head_timeout_s=args.head_timeout,
        ),
        hub=HubConfig(lease_s=args.lease),
        delivery=DeliveryConfig(
            ack_timeout_s=args.ack_timeout,
            backlog_limit=args.backlog_limit,
            presence_ttl_s=args.presence_ttl,
        ),
        mcp=McpConfig(era=args.mcp_era),
        streams=StreamConfig(buffer_size=args.stream_buffer),
        webhooks=WebhookConfig(
            allow=AddressPolicy.parse(args.webhook_allow),
            schedule_s=parse_schedule(args.webhook_schedule),
            disable_after_s=args.webhook_disable_after,
            timeout_s=args.webhook_timeout,
            per_endpoint=args.webhook_concurrency,
        ),
        subscriptions=SubscriptionConfig(
            default_ttl_s=args.subscription_ttl,
            max_ttl_s=args.subscription_max_ttl,
            min_ttl_s=args.subscription_min_ttl,
            allow_no_expiry=args.subscription_no_expiry,
            schedule_s=parse_schedule(args.subscription_schedule),
            max_per_agent=args.subscription_limit,
        ),
        limits=KeyLimits(
            streams=args.streams_per_key,
            sessions=args.sessions_per_key,
            publish_rate=args.publish_rate,
            publish_burst=args.publish_burst,
        ),
    )


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


def _run(coroutine: object) -> None:
    try:
        import uvloop
    except ImportError:  # uvloop is optional (not on Windows)
        asyncio.run(coroutine)  # type: ignore[arg-type]
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(coroutine)  # type: ignore[arg-type]


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


if __name__ == "__main__":
    sys.exit(main())
