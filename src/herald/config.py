"""Every setting of a running hub, with its default, written once.

``herald serve``'s flags take their defaults from here, and so do the constructors that a Python
program calls itself (``Hub``, ``Notifier``, ``Fanout``, ``WebhookWorker``, the webhook
``Sender``, ``KeyLimits``): a default changes in this file or nowhere. ``herald.serve.serve``
runs a hub from a ``ServeConfig``, as ``herald serve`` does::

    config = ServeConfig(store_url="postgresql://herald@db/herald", hub=HubConfig(lease_s=60))
    await serve(config)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from herald.addresses import AddressPolicy
from herald.endpoint_checks import check_url_prefix
from herald.errors import InvalidInput
from herald.keys import check_chosen_key
from herald.origins import check_origin
from herald.urls import backend_of

DAY_S = 24 * 3600
MIN_PRESENCE_TTL_S = 1.0


def _require_seconds(**durations: float) -> None:
    """Each duration (named as the error should say it) is a finite number of seconds above 0.

    Raises:
        InvalidInput: one is not.
    """
    for name, seconds in durations.items():
        if not math.isfinite(seconds) or seconds <= 0:
            what = name.replace("_", " ")
            raise InvalidInput(f"the {what} must be more than 0 seconds, not {seconds:g}")


def _require_schedule(schedule_s: tuple[int, ...]) -> None:
    """A retry schedule has at least one delay, none negative.

    Raises:
        InvalidInput: it has not.
    """
    if not schedule_s or any(delay < 0 for delay in schedule_s):
        raise InvalidInput("a retry schedule needs at least one delay, none negative")


def _require_count(least: int, **counts: int) -> None:
    """Each count (named as the error should say it) is ``least`` or more.

    Raises:
        InvalidInput: one is not.
    """
    for name, count in counts.items():
        if count < least:
            what = name.replace("_", " ")
            raise InvalidInput(f"the {what} must be {least} or more, not {count}")


@dataclass(frozen=True)
class HttpConfig:
    """Where the hub listens, how long a connection may take to ask, and which web pages may
    ask.

    Raises:
        InvalidInput: a body timeout is not above 0 s, or a CORS origin is not one as browsers
            write it.
    """

    host: str = "127.0.0.1"
    """The address to listen on."""
    port: int = 8787
    """The port to listen on; 0 picks a free one."""
    public_url: str | None = None
    """The hub's URL as agents reach it, told to OpenClaw agents; None: ``http://host:port``."""
    head_timeout_s: float = 10.0
    """A connection whose request head is not complete within this is closed."""
    body_timeout_s: float = 60.0
    """A request body not whole this long after herald began to read it is refused (408) and
    its connection closed; a body left unread after an early answer must end as soon after
    that answer, or its connection is closed."""
    body_idle_timeout_s: float = 10.0
    """A request body that sends nothing for this long while herald waits for it is refused
    (408) and its connection closed."""
    cors_origins: tuple[str, ...] = ()
    """The web origins (``https://app.example.com``) whose pages may call the API: their
    preflights are answered and every answer to them says so (CORS). None: no CORS at all."""

    def __post_init__(self) -> None:
        for origin in self.cors_origins:
            check_origin(origin, "a CORS origin")
        _require_seconds(
            body_timeout=self.body_timeout_s, body_idle_timeout=self.body_idle_timeout_s
        )


@dataclass(frozen=True)
class HubConfig:
    """The hub's hold on events in the store.

    Raises:
        InvalidInput: a duration is not above 0 s.
    """

    lease_s: float = 30.0
    """How long a drained event stays reserved for its consumer before it is offered again."""
    retention_s: float = 7 * DAY_S
    """How long delivered and expired events are kept before they are pruned."""
    maintenance_interval_s: float = 5.0
    """How often events are expired and pruned."""
    max_deliveries: int = 25
    """How many times an event may be handed out (leased by a drain or a poll) without being
    acknowledged: the next time it would be, it becomes ``dead`` instead, offered no more until
    the operator redelivers it. 0: handed out for ever."""
    payload_check_s: float = 2.0
    """The longest checking one publish's events against their types' payload schemas may
    take (in a child process): past it the publish is refused and the check stopped."""
    scan_events: int = 1_000
    """The most events one narrowed read looks at (an ``events/poll`` or a subscription's start
    whose types or sender match few of them, a page of ``GET /v1/events`` with filters): past
    it, the answer's cursor says where to go on, so no read goes through a whole backlog. On
    SQLite a poll holds the one writer while it looks: 1,000 events take about a millisecond,
    10,000 about thirty."""

    loop_exchanges: int = 12
    """Loop guard (``herald.loop_guard``): how many messages two agents may exchange (either
    direction) within ``loop_window_s`` before a send between them is refused."""
    loop_window_s: int = 600
    """The window of ``loop_exchanges``, in seconds."""
    loop_per_minute: int = 30
    """Loop guard: how many messages one agent may send to agents a minute."""

    def __post_init__(self) -> None:
        if min(self.loop_exchanges, self.loop_window_s, self.loop_per_minute) < 1:
            raise InvalidInput("the loop guard's limits and window must be 1 or more")
        if self.scan_events < 1:
            raise InvalidInput("the events a read looks at (scan_events) must be 1 or more")
        if self.max_deliveries < 0:
            raise InvalidInput("max_deliveries must be 0 (no limit) or more")
        _require_seconds(
            lease=self.lease_s,
            retention=self.retention_s,
            maintenance_interval=self.maintenance_interval_s,
            payload_check_time=self.payload_check_s,
        )


@dataclass(frozen=True)
class DeliveryConfig:
    """The cascade's pace for live sessions (MCP and the stdio bridge).

    Raises:
        InvalidInput: a duration is not above 0 s (the presence TTL: under 1 s), or the
            backlog limit is negative.
    """

    ack_timeout_s: float = 300.0
    """How long a push may go unacknowledged before the next way is tried (an agent's
    ``delivery.ack_timeout_s`` overrides it); also how long a webhook waits for a live session."""
    backlog_limit: int = 10
    """On (re)connect, a backlog longer than this arrives as one summary."""
    poll_interval_s: float = 5.0
    """How often a session looks at the store without a wake-up."""
    presence_ttl_s: float = 30.0
    """How long a live session stays registered in the store without a refresh (its process
    refreshes it every third of this): the sessions of a process that died drop out within it."""

    def __post_init__(self) -> None:
        _require_seconds(ack_timeout=self.ack_timeout_s, poll_interval=self.poll_interval_s)
        _require_count(0, backlog_limit=self.backlog_limit)
        if not math.isfinite(self.presence_ttl_s) or self.presence_ttl_s < MIN_PRESENCE_TTL_S:
            raise InvalidInput(
                f"the presence TTL must be at least {MIN_PRESENCE_TTL_S:g} s: a process refreshes"
                " its sessions every third of it"
            )


@dataclass(frozen=True)
class EventsConfig:
    """The pace of MCP Events subscriptions (``events/poll``, ``events/stream``) and of
    ``subscriptions/listen`` streams."""

    heartbeat_s: float = 25.0
    """An ``events/stream`` that pushed nothing for this long sends a heartbeat with its cursor
    (the standard asks for one at least every 30 s)."""
    poll_idle_ms: int = 10_000
    """The ``nextPollMs`` of a poll that found nothing."""
    poll_flowing_ms: int = 1_000
    """The ``nextPollMs`` of a poll that found events but not a full page: more may follow."""
    inbox_check_s: float = 5.0
    """How often the inboxes of agents with a ``subscriptions/listen`` stream are read, for
    changes no wake-up tells of: on SQLite an event expiring, on PostgreSQL a change whose
    notification was lost (every process hears the others' acknowledgements and expiries)."""


MCP_ERAS = ("auto", "legacy", "modern")


@dataclass(frozen=True)
class McpConfig:
    """How ``/mcp`` and the stdio bridge meet a client."""

    era: str = "auto"
    """Which MCP protocol era a client that probes with ``server/discover`` gets: ``auto`` (its
    client profile decides: Claude Code stays on the legacy era, where herald can push to it;
    any other client gets 2026-07-28), ``legacy`` (the probe is refused: every client falls
    back to ``initialize``) or ``modern`` (the probe is answered, whoever sends it)."""

    def __post_init__(self) -> None:
        if self.era not in MCP_ERAS:
            raise InvalidInput(f"the MCP era must be one of {', '.join(MCP_ERAS)}")


@dataclass(frozen=True)
class StreamConfig:
    """The live buffer that every ``GET /channel/stream`` of one agent reads from.

    Raises:
        InvalidInput: a buffer holds less than 1 event or byte, or the poll interval is not
            above 0 s.
    """

    buffer_size: int = 2000
    """How many events a stream client may fall behind before it is cut off (and resumes)."""
    buffer_bytes: int = 32 * 1024 * 1024
    """The most bytes of events kept per agent, whatever their number: 2,000 events of the
    largest size would be half a gigabyte."""
    poll_interval_s: float = 5.0
    """How often an agent's buffer looks at the store without a wake-up."""

    def __post_init__(self) -> None:
        _require_count(1, stream_buffer=self.buffer_size, stream_buffer_bytes=self.buffer_bytes)
        _require_seconds(stream_poll_interval=self.poll_interval_s)


@dataclass(frozen=True)
class WebhookConfig:
    """Signed webhooks and OpenClaw wakes, for agents that hold no connection.

    Raises:
        InvalidInput: a duration is not above 0 s (the stop grace: below 0 s), the concurrency
            is below 1, or the schedule is empty or has a negative delay.
    """

    allow: AddressPolicy = field(default_factory=AddressPolicy)
    """Address classes webhooks may go to besides public ones (loopback, private); link-local
    and cloud metadata addresses never."""
    schedule_s: tuple[int, ...] = (0, 5, 300, 1800, 7200, 18000, 36000, 36000)
    """Delays before each try: at once, then after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h
    (about 27.6 h); its length is the number of tries."""
    disable_after_s: float = 5 * DAY_S
    """An endpoint that keeps failing for this long is disabled (its events stay drainable)."""
    timeout_s: float = 15.0
    """How long one request to an endpoint may take."""
    per_endpoint: int = 4
    """Requests in flight to one endpoint at most."""
    poll_interval_s: float = 1.0
    """How often the worker looks for due deliveries without a wake-up."""
    min_interval_s: float = 0.2
    """The shortest pause between two of the worker's rounds."""
    stop_grace_s: float = 5.0
    """When herald stops, how long the requests in flight may take to be answered (none is
    started meanwhile); those still unanswered are cut off, and sent again with the same
    ``webhook-id`` by the next process that claims them."""

    def __post_init__(self) -> None:
        if not math.isfinite(self.stop_grace_s) or self.stop_grace_s < 0:
            raise InvalidInput(
                f"the webhook stop grace must be 0 seconds or more, not {self.stop_grace_s:g}"
            )
        _require_seconds(
            webhook_timeout=self.timeout_s,
            time_a_webhook_may_keep_failing=self.disable_after_s,
            webhook_poll_interval=self.poll_interval_s,
        )
        _require_count(1, webhook_concurrency=self.per_endpoint)
        _require_schedule(self.schedule_s)


@dataclass(frozen=True)
class SubscriptionConfig:
    """MCP Events webhook subscriptions (``events/subscribe``): how long a grant lasts, how
    often a delivery is tried, and how many one agent may hold.

    Raises:
        InvalidInput: the TTLs are not minimum <= default <= maximum, all above 0, the
            schedule is empty or has a negative delay, or the limit or the rate is negative.
    """

    default_ttl_s: float = 3600.0
    """The grant of a subscribe that suggests no ``ttlMs``."""
    max_ttl_s: float = float(DAY_S)
    """The longest grant; a longer suggestion gets this."""
    min_ttl_s: float = 60.0
    """The shortest grant; a shorter suggestion is raised to this (no refresh storms)."""
    allow_no_expiry: bool = False
    """Grant no expiry to a subscribe that asks for it (``ttlMs: null``); otherwise it gets the
    longest grant."""
    schedule_s: tuple[int, ...] = (0, 5, 30, 120, 600)
    """Delays before each try of one delivery: at once, then after 5 s, 30 s, 2 min and 10 min
    (5 tries within 15 min); its length is the number of tries."""
    max_per_agent: int = 100
    """The subscriptions one agent may hold at once (a refresh of one it holds is always taken:
    each matching event is POSTed once per subscription); 0: no limit."""
    allow: tuple[str, ...] = ()
    """Callback URL prefixes (``https://hooks.example.com/mcp/``) whose URLs are verified
    without a challenge or a receiver document: the operator vouches for them."""
    rate: float = 0.0
    """Deliveries per second to one subscription at most, counted in the store across every
    process; a second's worth (at least one) may go at once. Deliveries held back go later,
    none is lost; 0: no limit."""

    def __post_init__(self) -> None:
        for prefix in self.allow:
            check_url_prefix(prefix, "a subscription allowlist prefix")
        if not math.isfinite(self.rate) or self.rate < 0:
            raise InvalidInput(
                "the subscription rate must be 0 (no limit) or more deliveries per second"
            )
        if self.max_per_agent < 0:
            raise InvalidInput("the subscription limit per agent must be 0 (no limit) or more")
        ttls = (self.min_ttl_s, self.default_ttl_s, self.max_ttl_s)
        if not all(math.isfinite(t) and t > 0 for t in ttls) or sorted(ttls) != list(ttls):
            raise InvalidInput(
                "subscription TTLs must be above 0 s, the minimum at most the default and the"
                " default at most the maximum"
            )
        _require_schedule(self.schedule_s)


@dataclass(frozen=True)
class KeyLimits:
    """What one key may hold or do at once; 0 turns a limit off. The defaults are far above
    what an agent or an application publishing for its agents needs.

    Raises:
        InvalidInput: a limit is negative, or the burst is below one event.
    """

    streams: int = 16
    """Open ``GET /channel/stream`` connections per key."""
    sessions: int = 64
    """Live MCP sessions at ``/mcp`` per key."""
    publish_rate: float = 1000.0
    """Events per second per key, each event of a batch counted."""
    publish_burst: int = 5000
    """Events a key may publish at once after being idle: a full 1,000-event batch fits."""
    poll_rate: float = 50_000.0
    """Events a key's ``events/poll`` calls may look at per second (the seqs each one read,
    matching or not; a poll that starts a subscription counts ``HubConfig.scan_events``): a
    drain reading 100 events a poll goes at 500 polls a second, a poll whose types match
    nothing in a long backlog at 50 a second."""
    poll_burst: int = 50_000
    """Events a key's polls may look at at once after being idle."""
    requests: int | None = None
    """Requests one key may have in flight at once, streams included (None: a quarter of the
    connections ``herald serve`` can hold; 0: no limit). An operator who lifts the stream limit
    for one key's many streams lifts this one too."""

    def __post_init__(self) -> None:
        if self.streams < 0 or self.sessions < 0:
            raise InvalidInput("stream and session limits must be 0 (no limit) or more")
        if self.requests is not None and self.requests < 0:
            raise InvalidInput("the requests per key must be 0 (no limit) or more")
        if not math.isfinite(self.publish_rate) or self.publish_rate < 0:
            raise InvalidInput("the publish rate must be 0 (no limit) or more events per second")
        if self.publish_burst < 1:
            raise InvalidInput("the publish burst must be 1 event or more")
        if not math.isfinite(self.poll_rate) or self.poll_rate < 0:
            raise InvalidInput("the poll rate must be 0 (no limit) or more events per second")
        if self.poll_burst < 1:
            raise InvalidInput("the poll burst must be 1 event or more")


@dataclass(frozen=True)
class MetricsConfig:
    """Who may read ``GET /metrics``: the admin key always; besides it, a token that reads
    nothing else, or anyone at all.

    Raises:
        InvalidInput: the token is under 32 characters or not all visible ASCII.
    """

    token: str | None = field(default=None, repr=False)
    """A bearer token that reads ``/metrics`` and nothing else, for a scraper that should not
    hold the admin key; None: none."""
    open: bool = False
    """Answer ``/metrics`` without a key: for a hub whose port only the scraper can reach."""

    def __post_init__(self) -> None:
        if self.token is not None:
            check_chosen_key(self.token, "the metrics token")


LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")


@dataclass(frozen=True)
class ServeConfig:
    """Everything ``herald serve`` can be told, grouped by the part of the hub it sets."""

    store_url: str = "sqlite:///herald.db"
    """The store's URL: ``sqlite:///PATH`` (relative to the working directory) or
    ``postgresql://...``."""
    log_level: str = "info"
    """The least severe log level written: debug, info, warning or error."""
    log_format: str = "text"
    """How log lines are written: ``text`` for people, ``json`` (one object a line) for
    collectors."""
    access_log: bool = False
    """Log a line per HTTP request (uvicorn's access log)."""
    workers: int = 1
    """Processes serving the port, sharing the work (``herald.workers``); more than one needs
    PostgreSQL, since a SQLite store is served by one process."""
    http: HttpConfig = field(default_factory=HttpConfig)
    hub: HubConfig = field(default_factory=HubConfig)
    delivery: DeliveryConfig = field(default_factory=DeliveryConfig)
    mcp: McpConfig = field(default_factory=McpConfig)
    events: EventsConfig = field(default_factory=EventsConfig)
    streams: StreamConfig = field(default_factory=StreamConfig)
    webhooks: WebhookConfig = field(default_factory=WebhookConfig)
    subscriptions: SubscriptionConfig = field(default_factory=SubscriptionConfig)
    limits: KeyLimits = field(default_factory=KeyLimits)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)

    def __post_init__(self) -> None:
        if self.log_level not in LOG_LEVELS:
            raise InvalidInput(f"the log level must be one of {', '.join(LOG_LEVELS)}")
        if self.log_format not in LOG_FORMATS:
            raise InvalidInput(f"the log format must be one of {', '.join(LOG_FORMATS)}")
        if self.workers > 1 and backend_of(self.store_url) != "postgres":
            raise InvalidInput(
                f"--workers {self.workers} needs a PostgreSQL store: a SQLite store is served by"
                " one process (give --store postgresql://... or leave --workers out)"
            )


DEFAULTS = ServeConfig()
"""The defaults, for constructors' signatures and the CLI's flags."""
