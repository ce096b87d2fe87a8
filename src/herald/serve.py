"""Running a hub from a ``ServeConfig``: the store, the delivery engine, the stream fan-out, the
webhook worker and the HTTP server with its connection guard, wired together. ``herald serve``
is this with its flags read into a ``ServeConfig``; a Python program calls ``serve`` the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from types import FrameType

import uvicorn

from herald.config import DEFAULTS, ServeConfig
from herald.delivery.engine import Notifier
from herald.delivery.fanout import Fanout
from herald.errors import HeraldError
from herald.http import create_app
from herald.http.app import HeraldApp
from herald.http.connections import (
    MAX_HEAD_BYTES,
    ConnectionBudget,
    ConnectionGuard,
    guarded_protocol,
    raise_file_limit,
)
from herald.hub import Hub
from herald.logs import hide_query_tokens, webhook_deliveries
from herald.loop_guard import LoopLimits
from herald.serving_lock import hold_store
from herald.settings import masked_url
from herald.times import Clock
from herald.urls import backend_of, sqlite_path
from herald.webhooks.sender import Sender
from herald.webhooks.worker import WebhookWorker

GRACEFUL_SHUTDOWN_S = 5
STOP_CHECK_S = 0.1
"""How often the server is looked at for a stop it was told (uvicorn's own pace)."""
STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _say(line: str) -> None:
    print(line, flush=True)


async def serve(
    config: ServeConfig = DEFAULTS,
    *,
    admin_key: str | None = None,
    announce: Callable[[str], None] = _say,
    stop: asyncio.Event | None = None,
    sock: socket.socket | None = None,
    clock: Clock | None = None,
) -> None:
    """Serve the hub until the process is told to stop (SIGINT or SIGTERM), or ``stop`` is set;
    either way open streams are ended first, then requests in flight get a few seconds.

    Every setting is checked before the port is taken, and the port before anything starts. A
    SQLite store is served by one process at a time: its file is locked before the port is
    taken, for as long as this runs.
    ``admin_key`` replaces the stored admin key for good; without one, a first start generates
    one and announces it once. ``announce`` gets the lines an operator should see (by default
    they are printed). ``sock``: a socket already listening (``herald.workers``), served
    instead of binding one. ``clock``: the hub's time (seconds, as ``time.time``); a test
    moves one by hand (``herald.testing.ManualClock``).

    Raises:
        HeraldError: a setting is invalid (the store URL, the head timeout, the webhook
            concurrency), the address cannot be taken, or the admin key is too short.
        StoreInUse: another process serves the SQLite store.
        StoreUnavailable: the store cannot be opened.
    """
    hub = build_hub(config, clock)
    caught: list[int] = []
    budget = ConnectionBudget.for_files(raise_file_limit())
    guard = ConnectionGuard(
        budget.max_connections, config.http.head_timeout_s, config.http.body_timeout_s
    )
    host = config.http.host
    with _sole_server(config.store_url) as alone:
        if sock is None:
            sock = listen(host, config.http.port)
        await hub.open()
        try:
            if alone:
                await _free_claims_left_behind(hub, announce)
            generated = await hub.setup_admin_key(admin_key)
            if generated:
                announce(
                    f"herald: new admin key (shown once, stored only hashed): {generated}\n"
                    "herald: set HERALD_ADMIN_KEY or keep it safe; it publishes and manages agents."
                )
            bound_port = sock.getsockname()[1]
            public_url = config.http.public_url or f"http://{host}:{bound_port}"
            per_key = config.limits.requests
            per_key = budget.per_key if per_key is None else per_key
            app, stopping = build_app(hub, config, public_url, per_key, guard)
            hide_query_tokens()
            server_config = uvicorn.Config(
                app,
                log_level=config.log_level,
                # uvicorn's lines go where the program's logging sends them (herald serve: in its
                # --log-format), not through uvicorn's own handlers.
                log_config=None,
                access_log=config.access_log,
                # Off: herald's middleware reads a proxy's headers itself, after it has found
                # the request's connection by the client address they rewrite
                # (herald.http.connections).
                proxy_headers=False,
                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
                http=guarded_protocol(guard),
                ws="none",  # herald serves no WebSocket: an upgrade is an ordinary request
                backlog=budget.backlog,
            )
            server = uvicorn.Server(server_config)
            announce(
                f"herald: at most {budget.max_connections} open connections (the open-file limit"
                f" is {budget.files}); a request head must come within"
                f" {config.http.head_timeout_s:g} s and fit in {MAX_HEAD_BYTES // 1024} KiB;"
                f" a request body must come whole within {config.http.body_timeout_s:g} s,"
                f" with no pause over {config.http.body_idle_timeout_s:g} s; one key may have"
                f" {per_key or 'any number of'} requests in flight at once"
            )
            with _signals_kept(server) as caught:
                # Said once a stop is kept for after the close: whoever waits for this line
                # (a supervisor, a test) may stop the server at once, and it stops cleanly.
                announce(
                    f"herald: listening on http://{host}:{bound_port}"
                    f" (store {masked_url(config.store_url)})"
                )
                async with _stopping_with(server, stop, stopping):
                    await server.serve(sockets=[sock])
        finally:
            await hub.close()
    for signal_number in caught:  # now that all is closed, the signals do what they would have
        signal.raise_signal(signal_number)


async def _free_claims_left_behind(hub: Hub, announce: Callable[[str], None]) -> None:
    """For a store this process serves alone (a SQLite store, its lock held): a webhook delivery
    claimed in it was claimed by a process that is gone, killed or stopped mid-request. It is
    free to be sent again now, rather than once that claim runs out (three webhook timeouts
    and half a minute later)."""
    freed = await hub.endpoints.release_claims()
    if freed:
        in_flight = webhook_deliveries(freed)
        announce(f"herald: {in_flight} in flight when herald last stopped: sent again")


@contextlib.contextmanager
def _sole_server(store_url: str) -> Iterator[bool]:
    """While inside, no other process may serve the store: SQLite's delivery state lives in one
    process. PostgreSQL is made for several processes, and needs no lock. Yields whether this
    process serves the store alone (it holds the lock).

    Raises:
        StoreInUse: another process serves the SQLite file.
    """
    if backend_of(store_url) == "postgres":
        yield False
        return
    with hold_store(
        sqlite_path(store_url),
        otherwise="a SQLite store is served by one process: stop that one, or use PostgreSQL"
        " (--store postgresql://...) to run several",
    ):
        yield True


@contextlib.contextmanager
def _signals_kept(server: uvicorn.Server) -> Iterator[list[int]]:
    """While inside, SIGINT and SIGTERM stop ``server`` and are kept in the list yielded, for
    the caller to raise once all is closed: had they ended the process as the server returned,
    a SQLite file would have kept its write-ahead log beside it (a copy of the file alone
    lacked the latest events).

    uvicorn takes these signals while it serves and, as it returns, gives back the handlers it
    found and raises them again, last first (as its documentation says, since 0.29): those
    handlers are these, and keep them in that order. Signals are only handled in the main thread."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return

    def keep(signal_number: int, frame: FrameType | None) -> None:
        caught.append(signal_number)
        server.should_exit = True  # a signal before uvicorn took them still stops it

    before = {number: signal.signal(number, keep) for number in STOPPING_SIGNALS}
    try:
        yield caught
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


@contextlib.asynccontextmanager
async def _stopping_with(
    server: uvicorn.Server, stop: asyncio.Event | None, on_stop: Callable[[], Awaitable[None]]
) -> AsyncIterator[None]:
    """While inside, a set ``stop`` tells ``server`` to shut down as a signal would; and once
    it is told to (``should_exit``, by either), ``on_stop`` runs: uvicorn waits for open
    requests before it shuts down, and streams never end by themselves.

    uvicorn has no hook between "told to stop" and "waiting for the requests" (the ASGI
    lifespan's shutdown comes after the wait): ``should_exit`` is looked at as often as
    uvicorn itself does. (``Server.should_exit`` is not in uvicorn's documentation, but it is
    the way its maintainers give to stop a server from code, encode/uvicorn#742: uvicorn has
    no documented one.)"""

    async def watch() -> None:
        while not server.should_exit:
            if stop is not None and stop.is_set():
                server.should_exit = True
                break
            await asyncio.sleep(STOP_CHECK_S)
        await on_stop()

    watcher = asyncio.create_task(watch())
    try:
        yield
    finally:
        if not server.should_exit:  # it ended by itself: nothing to stop
            watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


def build_hub(config: ServeConfig, clock: Clock | None = None) -> Hub:
    """An unopened hub on the configured store, on ``clock`` (by default the system's).

    Raises:
        InvalidInput: the store URL names no backend herald has.
    """
    settings = config.hub
    return Hub.from_url(
        config.store_url,
        lease_s=settings.lease_s,
        retention_s=settings.retention_s,
        maintenance_interval_s=settings.maintenance_interval_s,
        payload_check_s=settings.payload_check_s,
        scan_events=settings.scan_events,
        max_deliveries=settings.max_deliveries,
        loop_limits=LoopLimits.of(settings),
        clock=clock or time.time,
    )


def build_app(
    hub: Hub,
    config: ServeConfig,
    public_url: str,
    requests_per_key: int = 0,
    guard: ConnectionGuard | None = None,
) -> tuple[HeraldApp, Callable[[], Awaitable[None]]]:
    """The HTTP app over an opened hub, with the delivery engine, the stream fan-out and the
    webhook worker set as ``config`` says; and what to call when the server begins to stop,
    before it waits for its requests to end: the streams are closed (they never end by
    themselves), and the webhook requests in flight start their stop grace meanwhile.

    ``public_url`` is the hub's URL as agents reach it (told to OpenClaw agents);
    ``requests_per_key`` how many requests one key may have in flight (0: no limit);
    ``guard`` the connections of the server that serves it. With ``config.access_log``, a
    proxy's ``X-Forwarded-For`` and ``-Proto`` name the client and scheme in the log's lines,
    from the addresses uvicorn's ``--forwarded-allow-ips`` would trust (``trusted_proxies``).

    Raises:
        InvalidInput: the webhook concurrency is below 1.
    """
    delivery, webhook = config.delivery, config.webhooks
    notifier = Notifier(
        hub,
        ack_timeout_s=delivery.ack_timeout_s,
        backlog_limit=delivery.backlog_limit,
        poll_interval_s=delivery.poll_interval_s,
        presence_ttl_s=delivery.presence_ttl_s,
    )
    streams = config.streams
    fanout = Fanout(
        hub,
        buffer_size=streams.buffer_size,
        buffer_bytes=streams.buffer_bytes,
        poll_interval_s=streams.poll_interval_s,
    )
    sender = Sender(public_url, webhook.allow, webhook.timeout_s, clock=hub.clock)
    webhooks = WebhookWorker(
        hub,
        sender,
        schedule_s=webhook.schedule_s,
        disable_after_s=webhook.disable_after_s,
        grace_s=delivery.ack_timeout_s,
        present=notifier.pushable_agents,
        per_endpoint=webhook.per_endpoint,
        poll_interval_s=webhook.poll_interval_s,
        min_interval_s=webhook.min_interval_s,
        subscription_schedule_s=config.subscriptions.schedule_s,
        subscription_rate=config.subscriptions.rate,
        stop_grace_s=webhook.stop_grace_s,
    )
    app = create_app(
        hub,
        notifier=notifier,
        fanout=fanout,
        webhooks=webhooks,
        limits=config.limits,
        mcp_era=config.mcp.era,
        events_config=config.events,
        subscriptions_config=config.subscriptions,
        metrics_config=config.metrics,
        http_config=config.http,
        requests_per_key=requests_per_key,
        connections=guard,
        trusted_proxies=trusted_proxies() if config.access_log else None,
    )

    async def beginning_to_stop() -> None:
        webhooks.stop_soon()
        await fanout.close()

    return app, beginning_to_stop


def trusted_proxies() -> str:
    """The addresses whose ``X-Forwarded-For`` and ``-Proto`` are taken: as uvicorn's
    ``--forwarded-allow-ips`` documents its default, ``$FORWARDED_ALLOW_IPS``, else the
    loopback addresses."""
    return os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1")


def listen(host: str, port: int) -> socket.socket:
    """The listening socket.

    Raises:
        HeraldError: the address cannot be taken (in use, not this machine's, not allowed).
    """
    try:
        return socket.create_server((host, port), reuse_port=False)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise HeraldError(
                f"port {host}:{port} is in use: another process listens on it; stop that one,"
                " or choose another port (--port)"
            ) from exc
        # create_server repeats the address after the reason: the line says it once.
        reason = (exc.strerror or str(exc)).split(" (while attempting", 1)[0]
        reason = reason[:1].lower() + reason[1:]
        raise HeraldError(f"cannot listen on {host}:{port}: {reason}") from exc
