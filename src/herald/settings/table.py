"""Every setting of ``herald serve``: its name (the TOML key; ``--name-with-dashes`` is its flag,
``HERALD_NAME`` its variable), the ``ServeConfig`` field it sets and the kind of value it takes.
The defaults are ``herald.config.DEFAULTS``'s, never repeated here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from herald.config import DEFAULTS, LOG_FORMATS, LOG_LEVELS, MCP_ERAS
from herald.settings.kinds import (
    ADDRESSES,
    DURATION,
    ORIGINS,
    SCHEDULE,
    SWITCH,
    TEXT,
    URL_PREFIXES,
    Kind,
    choice,
    integer,
    number,
)

ENV_PREFIX = "HERALD_"


@dataclass(frozen=True)
class Setting:
    name: str
    """The key in a TOML file, e.g. ``webhook_allow``."""
    field: str
    """The ``ServeConfig`` field it sets: ``store_url``, or ``group.field`` (``webhooks.allow``)."""
    kind: Kind
    help: str
    secret: bool = False
    """Never printed (``--check-config`` says only that it is set)."""

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def default(self) -> Any:
        value: Any = DEFAULTS
        for part in self.field.split("."):
            value = getattr(value, part)
        return value

    def shown_default(self) -> str:
        default = self.default
        if default is None or default == ():
            return "none"
        plain = self.kind.plain(default)
        return ",".join(str(d) for d in plain) if isinstance(plain, list) else str(plain)


def _subscriptions(what: str) -> str:
    return f"Events webhook subscriptions: {what}"


SETTINGS = (
    Setting("store", "store_url", TEXT, "store URL: sqlite:///PATH or postgresql://USER@HOST/DB"),
    Setting("host", "http.host", TEXT, "address to listen on"),
    Setting("port", "http.port", integer(0, 65535), "port to listen on (0 picks a free one)"),
    Setting(
        "public_url",
        "http.public_url",
        TEXT,
        "the hub's URL as agents reach it, told to OpenClaw agents (none: host and port)",
    ),
    Setting(
        "head_timeout",
        "http.head_timeout_s",
        DURATION,
        "close a connection whose request head is not complete within this",
    ),
    Setting(
        "body_timeout",
        "http.body_timeout_s",
        DURATION,
        "refuse a request body (408) and close its connection when it is not whole within this",
    ),
    Setting(
        "body_idle_timeout",
        "http.body_idle_timeout_s",
        DURATION,
        "refuse a request body (408) and close its connection when it sends nothing for this",
    ),
    Setting(
        "cors_origin",
        "http.cors_origins",
        ORIGINS,
        "a web origin (https://app.example.com) whose pages may call the API: its preflights"
        " are answered and answers to it carry Access-Control-Allow-Origin; repeat the flag for"
        " more (in the variable, separate them by spaces); none: no CORS",
    ),
    Setting(
        "lease",
        "hub.lease_s",
        DURATION,
        "how long a drained event stays reserved for its consumer",
    ),
    Setting(
        "max_deliveries",
        "hub.max_deliveries",
        integer(0),
        "how many times an event is handed out unacknowledged before it becomes dead (0: no limit)",
    ),
    Setting(
        "loop_exchanges",
        "hub.loop_exchanges",
        integer(1),
        "loop guard: the messages two agents may exchange within --loop-window before a send"
        " between them is refused (429 loop_guard)",
    ),
    Setting(
        "loop_window",
        "hub.loop_window_s",
        integer(1),
        "loop guard: the window of --loop-exchanges, in seconds",
    ),
    Setting(
        "loop_per_minute",
        "hub.loop_per_minute",
        integer(1),
        "loop guard: the messages one agent may send to agents a minute",
    ),
    Setting(
        "scan_events",
        "hub.scan_events",
        integer(1),
        "the most events one narrowed read looks at (an events/poll, a filtered GET /v1/events"
        " page); its answer says where to go on",
    ),
    Setting(
        "retention",
        "hub.retention_s",
        DURATION,
        "how long delivered and expired events are kept before they are pruned",
    ),
    Setting(
        "ack_timeout",
        "delivery.ack_timeout_s",
        DURATION,
        "how long a push may go unacknowledged before the next way is tried",
    ),
    Setting(
        "backlog_limit",
        "delivery.backlog_limit",
        integer(0),
        "on connect, a backlog longer than this arrives as one summary",
    ),
    Setting(
        "presence_ttl",
        "delivery.presence_ttl_s",
        DURATION,
        "how long a live session stays registered in the store without a refresh: the"
        " sessions of a process that died drop out within it",
    ),
    Setting(
        "mcp_era",
        "mcp.era",
        choice(MCP_ERAS),
        "which MCP protocol era a client probing with server/discover gets: auto (by its"
        " client profile: Claude Code stays on the legacy era, where herald can push to it;"
        " others get 2026-07-28), legacy (the probe is refused) or modern (it is answered)",
    ),
    Setting(
        "inbox_check",
        "events.inbox_check_s",
        DURATION,
        "how often subscriptions/listen streams read their agents' inboxes for a change no"
        " wake-up told of (on SQLite an event expiring; on PostgreSQL one whose notification"
        " was lost)",
    ),
    Setting(
        "stream_buffer",
        "streams.buffer_size",
        integer(1),
        "how many events a stream client may fall behind before it is cut off",
    ),
    Setting(
        "webhook_allow",
        "webhooks.allow",
        ADDRESSES,
        "address classes webhooks may go to besides public ones: loopback, private"
        " (link-local and cloud metadata addresses never)",
    ),
    Setting("webhook_schedule", "webhooks.schedule_s", SCHEDULE, "delays before each webhook try"),
    Setting(
        "webhook_disable_after",
        "webhooks.disable_after_s",
        DURATION,
        "disable an endpoint that keeps failing for this long",
    ),
    Setting(
        "webhook_timeout", "webhooks.timeout_s", DURATION, "how long one webhook request may take"
    ),
    Setting(
        "webhook_stop_grace",
        "webhooks.stop_grace_s",
        number(0),
        "when herald stops, the seconds webhook requests in flight have to be answered (none is"
        " started meanwhile; those still unanswered are sent again later)",
    ),
    Setting(
        "webhook_concurrency",
        "webhooks.per_endpoint",
        integer(1),
        "requests in flight to one webhook or OpenClaw endpoint at most",
    ),
    Setting(
        "streams_per_key",
        "limits.streams",
        integer(0),
        "open GET /channel/stream per key at most, counted by each process alone (0: no limit)",
    ),
    Setting(
        "requests_per_key",
        "limits.requests",
        integer(0),
        "requests one key may have in flight at once, streams included, counted by each"
        " process alone (default: a quarter of the open connections it can hold; 0: no limit)",
    ),
    Setting(
        "sessions_per_key",
        "limits.sessions",
        integer(0),
        "live MCP sessions per key at most, counted by each process alone (0: no limit)",
    ),
    Setting(
        "publish_rate",
        "limits.publish_rate",
        number(0),
        "events per second one key may publish, each event of a batch counted (0: no limit);"
        " each process counts alone, in memory so that a publish costs no extra write: N"
        " processes (--workers N, or N hosts) let a key publish up to N times this",
    ),
    Setting(
        "publish_burst",
        "limits.publish_burst",
        integer(1),
        "events one key may publish at once, beyond its rate, in each process alone",
    ),
    Setting(
        "poll_rate",
        "limits.poll_rate",
        number(0),
        "events one key's events/poll calls may look at per second, matching or not, counted"
        " by each process alone (0: no limit)",
    ),
    Setting(
        "poll_burst",
        "limits.poll_burst",
        integer(1),
        "events one key's events/poll calls may look at at once, beyond its rate, in each"
        " process alone",
    ),
    Setting(
        "subscription_ttl",
        "subscriptions.default_ttl_s",
        DURATION,
        _subscriptions("the grant when none is suggested"),
    ),
    Setting(
        "subscription_max_ttl",
        "subscriptions.max_ttl_s",
        DURATION,
        _subscriptions("the longest grant"),
    ),
    Setting(
        "subscription_min_ttl",
        "subscriptions.min_ttl_s",
        DURATION,
        _subscriptions("the shortest grant (raised to it)"),
    ),
    Setting(
        "subscription_no_expiry",
        "subscriptions.allow_no_expiry",
        SWITCH,
        _subscriptions(
            "grant no expiry to one that asks for it (ttlMs null); without it, it"
            " gets the longest grant"
        ),
    ),
    Setting(
        "subscription_schedule",
        "subscriptions.schedule_s",
        SCHEDULE,
        _subscriptions("delays before each try of a delivery"),
    ),
    Setting(
        "subscription_limit",
        "subscriptions.max_per_agent",
        integer(0),
        _subscriptions(
            "how many one agent may hold at once, in the store: every process counts them all"
            " (0: no limit)"
        ),
    ),
    Setting(
        "subscription_rate",
        "subscriptions.rate",
        number(0),
        _subscriptions(
            "deliveries per second to one subscription at most, counted in the store across"
            " every process; a second's worth (at least one) may go at once, the rest waits"
            " (deliveryStatus says throttled) and goes later (0: no limit)"
        ),
    ),
    Setting(
        "subscription_allow",
        "subscriptions.allow",
        URL_PREFIXES,
        _subscriptions(
            "a callback URL prefix the operator vouches for (https://hooks.example.com/mcp/):"
            " a URL under it is verified without a challenge; repeat the flag for more (in the"
            " variable, separate them by spaces). Where a URL may point is still"
            " --webhook-allow's to say"
        ),
    ),
    Setting(
        "metrics_token",
        "metrics.token",
        TEXT,
        "a bearer token that reads GET /metrics and nothing else, besides the admin key (at"
        " least 32 characters; give it as $HERALD_METRICS_TOKEN rather than as a flag, which"
        " every user of the machine can read)",
        secret=True,
    ),
    Setting(
        "metrics_open",
        "metrics.open",
        SWITCH,
        "answer GET /metrics without a key, for a port that only the scraper can reach",
    ),
    Setting("log_level", "log_level", choice(LOG_LEVELS), "the least severe log level written"),
    Setting(
        "log_format",
        "log_format",
        choice(LOG_FORMATS),
        "text for people, json for collectors (one object a line: time, level, logger, message"
        " and the line's fields)",
    ),
    Setting("access_log", "access_log", SWITCH, "log a line per HTTP request"),
    Setting(
        "workers",
        "workers",
        integer(1, 64),
        "processes serving the port, sharing the work (PostgreSQL only)",
    ),
)

BY_NAME = {setting.name: setting for setting in SETTINGS}
BY_ENV = {setting.env: setting for setting in SETTINGS}

CONFIG_ENV = "HERALD_CONFIG"
"""The TOML file to read, when ``--config`` does not name one."""
ADMIN_KEY_ENV = "HERALD_ADMIN_KEY"
NOT_SETTINGS = frozenset(
    {
        CONFIG_ENV,
        ADMIN_KEY_ENV,
        # herald bridge and herald drain, and the test peers' (tests/peers/).
        "HERALD_API_KEY",
        "HERALD_URL",
        "HERALD_AGENT_ID",
        "HERALD_AGENT_KEY",
        "HERALD_AGENT_HANDLE",
        "HERALD_PEER_KEY",
        "HERALD_PEER_HANDLE",
        "HERALD_WAIT_MS",
        # The test suite's, the benchmarks' and scripts/'.
        "HERALD_TEST_POSTGRES_URL",
        "HERALD_FUZZ_EXAMPLES",
        "HERALD_FUZZ_RANDOM",
        "HERALD_BENCH_POSTGRES_URL",
        "HERALD_EXTRAS",
    }
)
"""``HERALD_*`` variables that are not settings of ``herald serve``: any other is a mistake."""
