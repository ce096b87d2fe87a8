"""``herald serve`` as a user starts it: its admin key, its defaults, its flags and their errors."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import asyncpg
import pytest

from herald.cli import build_parser, main
from herald.cli_serve import serve_config, serve_settings
from herald.config import DEFAULTS, ServeConfig
from herald.settings import SETTINGS as ALL_SETTINGS
from herald.settings.sources import ConfigProblems
from tests.herald_process import HeraldProcess
from tests.webhooks.receiver import HANG, Receiver


def test_the_first_start_generates_an_admin_key_shows_it_once_and_stores_it_hashed(
    tmp_path: Path,
) -> None:
    store = tmp_path / "herald.db"
    first = HeraldProcess(f"sqlite:///{store}", admin_key=None)
    try:
        keys = [m.group(0) for line in first.lines if (m := re.search(r"herald_admin_\S+", line))]
        assert len(keys) == 1
        (key,) = keys
        with first.client(key) as admin:
            assert admin.post("/v1/agents", json={"handle": "alice"}).status_code == 201
    finally:
        first.stop()
    second = HeraldProcess(f"sqlite:///{store}", admin_key=None)
    try:
        assert not any("herald_admin_" in line for line in second.lines)
        with second.client(key) as admin:
            assert admin.get("/v1/agents").status_code == 200
    finally:
        second.stop()
    for path in tmp_path.iterdir():
        assert key.encode() not in path.read_bytes(), f"the admin key is in clear in {path.name}"
    assert not any(key in line for line in second.output())


def printed_admin_key(herald: HeraldProcess) -> str:
    (line,) = [line for line in herald.lines if "new admin key" in line]
    return line.rsplit(" ", 1)[1]


def admin_status(herald: HeraldProcess, key: str) -> int:
    with herald.client(key) as admin:
        return admin.get("/v1/agents").status_code


def test_herald_admin_key_replaces_the_stored_key_for_good(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'herald.db'}"
    chosen = "an-operator-chosen-admin-key-0123456789"
    first = HeraldProcess(store, admin_key=None)
    try:
        printed = printed_admin_key(first)
        assert admin_status(first, printed) == 200
    finally:
        first.stop()
    with_variable = HeraldProcess(store, admin_key=chosen)
    try:
        assert admin_status(with_variable, chosen) == 200
        assert admin_status(with_variable, printed) == 401
    finally:
        with_variable.stop()
    without_variable = HeraldProcess(store, admin_key=None)
    try:
        assert not any("new admin key" in line for line in without_variable.lines)
        assert admin_status(without_variable, chosen) == 200
        assert admin_status(without_variable, printed) == 401
    finally:
        without_variable.stop()


def test_a_herald_admin_key_under_32_characters_is_refused_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "herald.cli", "serve", "--port", "0",
         "--store", f"sqlite:///{tmp_path / 'herald.db'}"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HERALD_ADMIN_KEY": "short"},
    )  # fmt: skip
    assert result.returncode != 0
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "herald: HERALD_ADMIN_KEY must be at least 32 characters, not 5: choose a long random"
        " key, e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
    ]


def test_agent_keys_are_not_stored_in_clear(tmp_path: Path) -> None:
    herald = HeraldProcess(f"sqlite:///{tmp_path / 'herald.db'}")
    try:
        with herald.client(herald.admin_key) as admin:
            key = admin.post("/v1/agents", json={"handle": "alice"}).json()["api_key"]
    finally:
        herald.stop()
    for path in tmp_path.iterdir():
        assert key.encode() not in path.read_bytes()
    assert not any(key in line for line in herald.output())


def test_admin_key_rotate_prints_a_key_kept_only_hashed_that_replaces_the_old_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = f"sqlite:///{tmp_path / 'herald.db'}"
    HeraldProcess(store, admin_key=None).stop()  # the store herald serve made
    monkeypatch.delenv("HERALD_ADMIN_KEY", raising=False)
    assert main(["admin-key", "rotate", "--store", store]) == 0
    first = capsys.readouterr().out.strip()
    assert main(["admin-key", "rotate", "--store", store]) == 0
    second = capsys.readouterr().out.strip()
    assert first.startswith("herald_admin_") and second.startswith("herald_admin_")
    for path in tmp_path.iterdir():
        assert first.encode() not in path.read_bytes() and second.encode() not in path.read_bytes()
    herald = HeraldProcess(store, admin_key=None)
    try:
        assert admin_status(herald, second) == 200
        assert admin_status(herald, first) == 401
    finally:
        herald.stop()


def test_admin_key_rotate_refuses_an_unknown_store_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HERALD_ADMIN_KEY", raising=False)
    assert main(["admin-key", "rotate", "--store", "mysql://x"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "unknown store URL" in captured.err
    assert len(captured.err.splitlines()) == 1


def test_admin_key_rotate_on_a_missing_sqlite_store_refuses_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mistyped path: no empty store is made, and the key of the real one stays."""
    monkeypatch.delenv("HERALD_ADMIN_KEY", raising=False)
    mistyped = tmp_path / "hreald.db"
    assert main(["admin-key", "rotate", "--store", f"sqlite:///{mistyped}"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"herald admin-key rotate: there is no SQLite store at {mistyped}: give the --store that"
        " herald serve uses"
    ]
    assert list(tmp_path.iterdir()) == []


def test_admin_key_rotate_on_a_postgresql_database_without_a_store_refuses_and_makes_none(
    postgres_database_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HERALD_ADMIN_KEY", raising=False)
    mistyped = f"{postgres_database_url}?schema=hbu"
    assert main(["admin-key", "rotate", "--store", mistyped]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"herald admin-key rotate: there is no herald store in {mistyped}: give the --store"
        " that herald serve uses"
    ]
    assert main(["admin-key", "rotate", "--store", postgres_database_url]) == 2  # none at all

    async def schemas() -> set[str]:
        conn = await asyncpg.connect(postgres_database_url)
        try:
            rows = await conn.fetch("SELECT nspname FROM pg_namespace")
            tables = await conn.fetchval(
                "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
            )
        finally:
            await conn.close()
        assert tables == 0
        return {row["nspname"] for row in rows}

    assert "hbu" not in asyncio.run(schemas())


def test_serve_defaults_to_a_sqlite_file_in_the_working_directory(tmp_path: Path) -> None:
    herald = HeraldProcess("sqlite:///herald.db", cwd=tmp_path)
    herald.stop()
    assert (tmp_path / "herald.db").exists()


def test_an_unknown_store_url_is_a_clear_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "herald.cli", "serve", "--store", "mysql://x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "unknown store URL" in result.stderr and "Traceback" not in result.stderr


def test_webhook_concurrency_bounds_the_requests_in_flight_to_one_endpoint(
    tmp_path: Path,
) -> None:
    receiver = Receiver(script=[(HANG, {})] * 3)
    extra = ("--webhook-allow", "loopback", "--webhook-concurrency", "1")
    herald = HeraldProcess(f"sqlite:///{tmp_path / 'herald.db'}", extra_args=extra)
    try:
        with herald.client(herald.admin_key) as admin:
            agent = admin.post("/v1/agents", json={"handle": "alice"}).json()
            admin.put(f"/v1/agents/{agent['id']}/webhook", json={"url": receiver.url})
            batch = [{"to": "alice", "type": "t", "text": f"e{n}"} for n in range(3)]
            admin.post("/v1/events", json=batch)
        receiver.arrived.get(timeout=30)
        with pytest.raises(queue.Empty):
            receiver.arrived.get(timeout=2)  # a second request in flight would be here by now
        receiver.release.set()
        for _ in range(2):
            receiver.arrived.get(timeout=30)  # then the others, one after another
    finally:
        herald.stop()
        receiver.close()


def test_a_webhook_concurrency_below_one_is_a_clear_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "herald.cli", "serve", "--webhook-concurrency", "0",
         "--store", f"sqlite:///{tmp_path / 'herald.db'}"],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "concurrency" in result.stderr and "Traceback" not in result.stderr


def test_a_port_in_use_is_one_clear_line_and_nothing_started(tmp_path: Path) -> None:
    store = tmp_path / "herald.db"
    serve = [sys.executable, "-m", "herald.cli", "serve", "--store", f"sqlite:///{store}"]
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        result = subprocess.run(
            [*serve, "--port", port], capture_output=True, text=True, timeout=60
        )
        # The flags are checked first: a bad one is the error, not the port.
        bad_flag = subprocess.run(
            [*serve, "--port", port, "--head-timeout", "0"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode != 0
    assert result.stderr.splitlines() == [
        f"herald: port 127.0.0.1:{port} is in use: another process listens on it; stop that"
        " one, or choose another port (--port)"
    ]
    assert result.stdout == ""
    assert not store.exists(), "the store was opened although herald could not listen"
    assert bad_flag.returncode == 2
    assert "--head-timeout" in bad_flag.stderr and "in use" not in bad_flag.stderr


def serve_flags(*flags: str) -> ServeConfig:
    return serve_config(build_parser().parse_args(["serve", *flags]))


OUT_OF_RANGE = [
    ("--lease", "-1"),
    ("--lease", "nan"),
    ("--ack-timeout", "0"),
    ("--backlog-limit", "-1"),
    ("--max-deliveries", "-1"),
    ("--stream-buffer", "0"),
    ("--webhook-timeout", "0"),
    ("--webhook-disable-after", "-5"),
]


@pytest.mark.parametrize(("flag", "value"), OUT_OF_RANGE, ids=[f"{f}={v}" for f, v in OUT_OF_RANGE])
def test_a_serve_flag_out_of_range_is_refused_saying_what_to_give(flag: str, value: str) -> None:
    with pytest.raises(ConfigProblems) as refused:
        serve_flags(flag, value)
    (said,) = refused.value.problems
    assert f"(flag {flag}): write " in said and said.endswith(f"not {value!r}")


def test_a_serve_flag_out_of_range_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    store = tmp_path / "herald.db"
    result = subprocess.run(
        [sys.executable, "-m", "herald.cli", "serve", "--port", "0", "--lease", "nan",
         "--store", f"sqlite:///{store}"],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    (said,) = result.stderr.splitlines()
    assert said.startswith("herald: lease (flag --lease): write a duration") and "'nan'" in said
    assert list(tmp_path.iterdir()) == []


def test_every_setting_has_a_flag_that_is_tested() -> None:
    tested = {flag[0] for flag, _, _ in SETTINGS}
    assert tested == {setting.flag for setting in ALL_SETTINGS}


def test_herald_serve_without_flags_runs_on_the_defaults_of_serve_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HERALD_STORE", raising=False)
    assert serve_flags() == ServeConfig()


def test_herald_store_sets_the_default_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERALD_STORE", "sqlite:///elsewhere.db")
    assert serve_flags().store_url == "sqlite:///elsewhere.db"


SETTINGS = [
    (("--store", "postgresql://h@db/h"), lambda c: c.store_url, "postgresql://h@db/h"),
    (("--host", "0.0.0.0"), lambda c: c.http.host, "0.0.0.0"),
    (("--port", "9000"), lambda c: c.http.port, 9000),
    (("--public-url", "https://h.example"), lambda c: c.http.public_url, "https://h.example"),
    (("--head-timeout", "3"), lambda c: c.http.head_timeout_s, 3.0),
    (("--body-timeout", "30"), lambda c: c.http.body_timeout_s, 30.0),
    (("--body-idle-timeout", "2"), lambda c: c.http.body_idle_timeout_s, 2.0),
    (("--lease", "7"), lambda c: c.hub.lease_s, 7.0),
    (("--ack-timeout", "9"), lambda c: c.delivery.ack_timeout_s, 9.0),
    (("--backlog-limit", "2"), lambda c: c.delivery.backlog_limit, 2),
    (("--presence-ttl", "3"), lambda c: c.delivery.presence_ttl_s, 3.0),
    (("--mcp-era", "modern"), lambda c: c.mcp.era, "modern"),
    (("--inbox-check", "1m"), lambda c: c.events.inbox_check_s, 60.0),
    (("--loop-exchanges", "40"), lambda c: c.hub.loop_exchanges, 40),
    (("--loop-window", "120"), lambda c: c.hub.loop_window_s, 120),
    (("--loop-per-minute", "5"), lambda c: c.hub.loop_per_minute, 5),
    (("--stream-buffer", "50"), lambda c: c.streams.buffer_size, 50),
    (("--webhook-allow", "private"), lambda c: str(c.webhooks.allow), "private"),
    (("--webhook-schedule", "0,1"), lambda c: c.webhooks.schedule_s, (0, 1)),
    (("--webhook-disable-after", "60"), lambda c: c.webhooks.disable_after_s, 60.0),
    (("--webhook-timeout", "2"), lambda c: c.webhooks.timeout_s, 2.0),
    (("--webhook-concurrency", "1"), lambda c: c.webhooks.per_endpoint, 1),
    (("--webhook-stop-grace", "0"), lambda c: c.webhooks.stop_grace_s, 0.0),
    (("--streams-per-key", "0"), lambda c: c.limits.streams, 0),
    (("--sessions-per-key", "3"), lambda c: c.limits.sessions, 3),
    (("--requests-per-key", "0"), lambda c: c.limits.requests, 0),
    (("--publish-rate", "5"), lambda c: c.limits.publish_rate, 5.0),
    (("--publish-burst", "6"), lambda c: c.limits.publish_burst, 6),
    (("--poll-rate", "7"), lambda c: c.limits.poll_rate, 7.0),
    (("--poll-burst", "8"), lambda c: c.limits.poll_burst, 8),
    (("--scan-events", "9"), lambda c: c.hub.scan_events, 9),
    (("--max-deliveries", "0"), lambda c: c.hub.max_deliveries, 0),
    (("--log-level", "debug"), lambda c: c.log_level, "debug"),
    (("--log-format", "json"), lambda c: c.log_format, "json"),
    (("--access-log",), lambda c: c.access_log, True),
    (("--workers", "3", "--store", "postgresql://h@db/h"), lambda c: c.workers, 3),
    (("--retention", "12h"), lambda c: c.hub.retention_s, 12 * 3600.0),
    (("--subscription-ttl", "120"), lambda c: c.subscriptions.default_ttl_s, 120.0),
    (("--subscription-max-ttl", "7200"), lambda c: c.subscriptions.max_ttl_s, 7200.0),
    (("--subscription-min-ttl", "30"), lambda c: c.subscriptions.min_ttl_s, 30.0),
    (("--subscription-no-expiry",), lambda c: c.subscriptions.allow_no_expiry, True),
    (("--subscription-schedule", "0,9"), lambda c: c.subscriptions.schedule_s, (0, 9)),
    (("--subscription-limit", "0"), lambda c: c.subscriptions.max_per_agent, 0),
    (("--subscription-rate", "5"), lambda c: c.subscriptions.rate, 5.0),
    (
        ("--subscription-allow", "https://a.example/hooks/"),
        lambda c: c.subscriptions.allow,
        ("https://a.example/hooks/",),
    ),
    (
        ("--cors-origin", "https://app.example.com"),
        lambda c: c.http.cors_origins,
        ("https://app.example.com",),
    ),
    (("--metrics-token", "m" * 32), lambda c: c.metrics.token, "m" * 32),
    (("--metrics-open",), lambda c: c.metrics.open, True),
]


@pytest.mark.parametrize(("flag", "setting", "value"), SETTINGS, ids=[s[0][0] for s in SETTINGS])
def test_each_serve_flag_sets_its_setting_and_only_that(
    flag: tuple[str, ...], setting: Callable[[ServeConfig], object], value: object
) -> None:
    config = serve_flags("--store", DEFAULTS.store_url, *flag)
    assert setting(config) == value != setting(DEFAULTS)
    needed = {"store_url"} if "--store" in flag[1:] else set()  # --workers needs PostgreSQL
    changed = [
        (name, group)
        for name, group in vars(config).items()
        if group != getattr(DEFAULTS, name) and name not in needed
    ]
    assert len(changed) == 1, changed


def settings_from(
    flags: tuple[str, ...], environ: dict[str, str], toml: str | None, tmp_path: Path
) -> ServeConfig:
    config_flag: tuple[str, ...] = ()
    if toml is not None:
        (tmp_path / "herald.toml").write_text(toml)
        config_flag = ("--config", str(tmp_path / "herald.toml"))
    args = build_parser().parse_args(["serve", *config_flag, *flags])
    return serve_settings(args, environ).config


PRECEDENCE = [
    ("port", "--port", "HERALD_PORT", lambda c: c.http.port, ("7001", "7002", "7003"), 8787),
    (
        "retention",
        "--retention",
        "HERALD_RETENTION",
        lambda c: c.hub.retention_s,
        ("90s", "15m", '"12h"'),
        7 * 86400,
    ),
    (
        "webhook_allow",
        "--webhook-allow",
        "HERALD_WEBHOOK_ALLOW",
        lambda c: str(c.webhooks.allow),
        ("loopback", "private", '"loopback,private"'),
        "",
    ),
    (
        "subscription_allow",
        "--subscription-allow",
        "HERALD_SUBSCRIPTION_ALLOW",
        lambda c: c.subscriptions.allow,
        ("https://a.example/", "https://b.example/", '"https://c.example/"'),
        (),
    ),
    (
        "cors_origin",
        "--cors-origin",
        "HERALD_CORS_ORIGIN",
        lambda c: c.http.cors_origins,
        ("https://a.example", "https://b.example", '"https://c.example"'),
        (),
    ),
    (
        "subscription_max_ttl",
        "--subscription-max-ttl",
        "HERALD_SUBSCRIPTION_MAX_TTL",
        lambda c: c.subscriptions.max_ttl_s,
        ("2h", "3h", "14400"),
        86400,
    ),
]


@pytest.mark.parametrize(
    ("key", "flag", "variable", "setting", "values", "default"),
    PRECEDENCE,
    ids=[p[0] for p in PRECEDENCE],
)
def test_a_flag_beats_the_environment_which_beats_the_file_which_beats_the_default(
    tmp_path: Path,
    key: str,
    flag: str,
    variable: str,
    setting: Callable[[ServeConfig], object],
    values: tuple[str, str, str],
    default: object,
) -> None:
    from_flag, from_env, from_file = values
    toml = f"{key} = {from_file}\n"
    everything = settings_from((flag, from_flag), {variable: from_env}, toml, tmp_path)
    no_flag = settings_from((), {variable: from_env}, toml, tmp_path)
    file_only = settings_from((), {}, toml, tmp_path)
    nothing = settings_from((), {}, None, tmp_path)
    expected = [
        setting(settings_from((flag, text.strip('"')), {}, None, tmp_path)) for text in values
    ]
    assert len(set(map(str, expected))) == 3, "the three sources' values must differ"
    assert setting(everything) == expected[0]
    assert setting(no_flag) == expected[1]
    assert setting(file_only) == expected[2]
    assert setting(nothing) == default == setting(DEFAULTS)


def test_herald_config_names_the_file_when_no_flag_does(tmp_path: Path) -> None:
    (tmp_path / "h.toml").write_text('retention = "2d"\nsubscription_no_expiry = true\n')
    config = settings_from((), {"HERALD_CONFIG": str(tmp_path / "h.toml")}, None, tmp_path)
    assert config.hub.retention_s == 2 * 86400
    assert config.subscriptions.allow_no_expiry is True


def run_serve(
    *flags: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HERALD_")}
    return subprocess.run(
        [sys.executable, "-m", "herald.cli", "serve", *flags],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **(env or {})},
        cwd=cwd,
    )


def problems(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *flags: str, **env: str
) -> list[str]:
    """What ``herald serve --check-config`` says is wrong, in process (nothing is started)."""
    for name in [name for name in os.environ if name.startswith("HERALD_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["serve", "--check-config", *flags]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err.splitlines()


def test_a_bad_flag_value_is_named_with_what_to_write(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert problems(capsys, monkeypatch, "--port", "x", "--retention", "soon") == [
        "herald: port (flag --port): write an integer from 0 to 65535, not 'x'",
        "herald: retention (flag --retention): write a duration such as 90s, 15m, 12h or 7d"
        " (a number alone is seconds), not 'soon'",
    ]


def test_the_subscription_allowlist_takes_a_prefix_per_flag_and_refuses_a_bad_one_by_name(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    two = ("https://a.example/hooks/", "http://127.0.0.1:9/mcp/")
    flags = ("--subscription-allow", two[0], "--subscription-allow", two[1])
    assert settings_from(flags, {}, None, tmp_path).subscriptions.allow == two
    spaced = {"HERALD_SUBSCRIPTION_ALLOW": " ".join(two)}
    assert settings_from((), spaced, None, tmp_path).subscriptions.allow == two
    listed = f"subscription_allow = {json.dumps(list(two))}\n"
    assert settings_from((), {}, listed, tmp_path).subscriptions.allow == two
    assert problems(capsys, monkeypatch, "--subscription-allow", "https://a.example/?k=1") == [
        "herald: subscription_allow (flag --subscription-allow): the prefix"
        " 'https://a.example/?k=1' must be an origin and a path, such as"
        " https://hooks.example.com/mcp/, without credentials, a query or a fragment"
    ]
    assert problems(capsys, monkeypatch, HERALD_SUBSCRIPTION_ALLOW="hooks.example/") == [
        "herald: subscription_allow (env HERALD_SUBSCRIPTION_ALLOW): the prefix"
        " 'hooks.example/' must be an absolute http or https URL"
    ]


def test_cors_origins_take_one_per_flag_and_refuse_one_a_browser_would_not_send(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    two = ("https://app.example.com", "http://localhost:5173")
    flags = ("--cors-origin", two[0], "--cors-origin", two[1])
    assert settings_from(flags, {}, None, tmp_path).http.cors_origins == two
    spaced = {"HERALD_CORS_ORIGIN": " ".join(two)}
    assert settings_from((), spaced, None, tmp_path).http.cors_origins == two
    listed = f"cors_origin = {json.dumps(list(two))}\n"
    assert settings_from((), {}, listed, tmp_path).http.cors_origins == two
    assert problems(capsys, monkeypatch, "--cors-origin", "https://App.example.com:443/") == [
        "herald: cors_origin (flag --cors-origin): the origin 'https://App.example.com:443/'"
        " must be written as a browser sends it: 'https://app.example.com'"
    ]
    assert problems(capsys, monkeypatch, HERALD_CORS_ORIGIN="https://app.example.com/page") == [
        "herald: cors_origin (env HERALD_CORS_ORIGIN): the origin 'https://app.example.com/page'"
        " is not an origin such as https://app.example.com or http://localhost:5173: an http or"
        " https scheme and a host (IDNA-encoded, xn--...), a port if need be, and nothing after"
        " them"
    ]


def test_a_bad_or_unknown_variable_is_named_with_what_to_write(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    found = problems(capsys, monkeypatch, HERALD_LOG_FORMAT="xml", HERALD_WEBHOOK_ALOW="loopback")
    assert found == [
        "herald: log_format (env HERALD_LOG_FORMAT): write one of text, json, not 'xml'",
        "herald: HERALD_WEBHOOK_ALOW (env): herald serve has no such setting:"
        " write HERALD_WEBHOOK_ALLOW",
    ]


def test_variables_of_other_commands_are_not_mistakes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERALD_URL", "http://127.0.0.1:8787")
    monkeypatch.setenv("HERALD_API_KEY", "k")
    assert main(["serve", "--check-config"]) == 0
    assert "HERALD_URL" not in capsys.readouterr().err


def test_a_bad_or_unknown_key_in_the_file_is_named_with_its_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    toml = tmp_path / "herald.toml"
    toml.write_text('# herald\nport = 8000\n\nwebhook_alow = "loopback"\nlease = -5\n')
    assert problems(capsys, monkeypatch, "--config", str(toml)) == [
        f"herald: webhook_alow ({toml}:4): herald serve has no such setting: write webhook_allow",
        f"herald: lease ({toml}:5): write a duration above 0 such as 90s, 15m, 12h or 7d"
        " (a number alone is seconds), not -5",
    ]


def test_a_mistake_in_the_file_counts_even_where_a_flag_overrides_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    toml = tmp_path / "herald.toml"
    toml.write_text("port = 99999\n")
    assert problems(capsys, monkeypatch, "--config", str(toml), "--port", "8000") == [
        f"herald: port ({toml}:1): write an integer from 0 to 65535, not 99999"
    ]


def test_a_file_that_cannot_be_read_or_parsed_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing, broken = tmp_path / "missing.toml", tmp_path / "broken.toml"
    broken.write_text("port =\n")
    assert problems(capsys, monkeypatch, "--config", str(missing)) == [
        f"herald: {missing}: cannot be read (FileNotFoundError): give a readable TOML file"
        " with --config or HERALD_CONFIG"
    ]
    assert problems(capsys, monkeypatch, HERALD_CONFIG=str(broken)) == [
        f"herald: {broken}: not valid TOML: Invalid value (at line 1, column 7)"
    ]


def test_settings_that_do_not_fit_together_are_named_with_their_sources(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    found = problems(
        capsys, monkeypatch, "--subscription-min-ttl", "2h", HERALD_SUBSCRIPTION_TTL="1h"
    )
    assert found == [
        "herald: subscription_min_ttl (flag --subscription-min-ttl), subscription_ttl"
        " (env HERALD_SUBSCRIPTION_TTL): subscription TTLs must be above 0 s, the minimum at"
        " most the default and the default at most the maximum"
    ]


def test_a_short_metrics_token_is_refused_without_being_shown(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert problems(capsys, monkeypatch, HERALD_METRICS_TOKEN="letmein") == [
        "herald: metrics_token (env HERALD_METRICS_TOKEN): the metrics token must be at least"
        " 32 characters, not 7: choose a long random key, e.g. python3 -c 'import secrets;"
        " print(secrets.token_urlsafe(32))'"
    ]


def test_an_unknown_store_url_is_named_with_its_source(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert problems(capsys, monkeypatch, HERALD_STORE="mysql://x") == [
        "herald: store (env HERALD_STORE): unknown store URL 'mysql://x': use sqlite:///path.db"
        " or postgresql://user@host/db"
    ]


def test_check_config_prints_the_effective_configuration_with_secrets_masked(
    tmp_path: Path,
) -> None:
    (tmp_path / "herald.toml").write_text('retention = "12h"\nport = 7000\n')
    admin_key = "a-secret-admin-key-0123456789abcdefgh"
    metrics_token = "a-secret-metrics-token-0123456789abcdef"
    result = run_serve(
        "--check-config", "--config", "herald.toml", "--port", "7100",
        env={"HERALD_ADMIN_KEY": admin_key, "HERALD_STORE": "postgresql://h:hunter2@db/h",
             "HERALD_METRICS_TOKEN": metrics_token},
        cwd=tmp_path,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    told = f"# metrics_token is set, {len(metrics_token)} characters (masked)"
    assert f"{told}  # env HERALD_METRICS_TOKEN" in lines and metrics_token not in result.stdout
    assert 'store = "postgresql://h:***@db/h"  # env HERALD_STORE' in lines
    assert "port = 7100  # flag --port" in lines
    assert 'retention = "12h"  # herald.toml:1' in lines
    assert 'lease = "30s"  # default' in lines
    assert f"# HERALD_ADMIN_KEY: set, {len(admin_key)} characters (masked)" in lines
    assert admin_key not in result.stdout and "hunter2" not in result.stdout
    assert not (tmp_path / "herald.db").exists(), "checking opened the store"


def test_the_printed_configuration_reads_back_as_the_same_configuration(tmp_path: Path) -> None:
    flags = ("--retention", "36h", "--webhook-schedule", "0,9", "--webhook-allow", "private")
    printed = run_serve("--check-config", *flags).stdout
    (tmp_path / "herald.toml").write_text(printed)
    assert settings_from((), {}, printed, tmp_path) == settings_from(flags, {}, None, tmp_path)


def test_bad_values_from_the_environment_are_refused_before_the_port_is_taken(
    tmp_path: Path,
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        result = run_serve(
            "--port", port, env={"HERALD_RETENTION": "0"}, cwd=tmp_path
        )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "herald: retention (env HERALD_RETENTION): write a duration above 0 such as 90s, 15m,"
        " 12h or 7d (a number alone is seconds), not '0'"
    ]
    assert list(tmp_path.iterdir()) == []


def json_lines(herald: HeraldProcess) -> list[dict[str, object]]:
    """Every log line so far, each parsed; the lines for the operator ("herald: ...") are
    printed, not logged."""
    return [json.loads(line) for line in herald.output() if not line.startswith("herald: ")]


def test_json_logs_say_each_attempt_and_each_change_of_an_endpoint_in_one_line(
    tmp_path: Path,
) -> None:
    receiver = Receiver(script=[(500, {})])
    extra = ("--log-level", "info", "--log-format", "json", "--webhook-allow", "loopback",
             "--webhook-schedule", "0,1")  # fmt: skip
    herald = HeraldProcess(f"sqlite:///{tmp_path / 'herald.db'}", extra_args=extra)
    try:
        with herald.client(herald.admin_key) as admin:
            agent = admin.post("/v1/agents", json={"handle": "alice"}).json()
            endpoint = admin.put(
                f"/v1/agents/{agent['id']}/webhook", json={"url": receiver.url}
            ).json()
            event = admin.post("/v1/events", json={"to": "alice", "type": "t", "text": "hi"}).json()
        herald.wait_for_line(lambda line: '"state": "recovered"' in line)
        lines = json_lines(herald)
    finally:
        herald.stop()
        receiver.close()
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    attempts = [line for line in lines if line.get("event") == event["id"]]
    assert [(a["way"], a["target"], a["outcome"]) for a in attempts] == [
        ("webhook", endpoint["id"], "failed"),
        ("webhook", endpoint["id"], "delivered"),
    ]
    assert attempts[0]["next_try"] is not None and attempts[1]["next_try"] is None
    assert attempts[0]["level"] == "info" and "HTTP 500" in str(attempts[0]["error"])
    changes = [(line["endpoint"], line["state"]) for line in lines if "state" in line]
    assert changes == [(endpoint["id"], "failing"), (endpoint["id"], "recovered")]


def test_each_flags_help_tells_its_default_from_the_config_and_its_variable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    told = " ".join(capsys.readouterr().out.split())
    for setting in ALL_SETTINGS:
        assert f"(default {setting.shown_default()}; ${setting.env})" in told, setting.name
    assert "(default 7d; $HERALD_RETENTION)" in told


SERVER_STACK = ("starlette", "uvicorn", "mcp", "pydantic", "jsonschema", "sqlite3", "asyncpg")
"""What ``herald serve`` loads and an operator's command must not: it would take a second more
to start (herald's hub and store, the HTTP server, the MCP SDK, the models of its inputs)."""


@pytest.mark.parametrize(
    "command",
    [
        ["send", "--file", "{empty}", "--json"],
        ["send", "--file", "{empty}"],
        ["send", "--help"],
        ["agent", "list", "--help"],
        ["status", "--json"],
        ["--help"],
    ],
)
def test_an_operators_command_loads_neither_the_server_nor_the_store(
    command: list[str], tmp_path: Path
) -> None:
    empty = tmp_path / "events.jsonl"
    empty.write_text("")
    argv = [word.format(empty=empty) for word in command]
    # Run to its end (a hub that is not there: the command fails, as it should, after its
    # imports), then list what it loaded.
    script = (
        "import sys\n"
        "from herald.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    env = {**os.environ, "HERALD_URL": "http://127.0.0.1:9", "HERALD_ADMIN_KEY": "k" * 40}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    loaded = set(done.stderr.splitlines()[-1].split())
    assert "herald.cli" in loaded
    assert {m.partition(".")[0] for m in loaded} & set(SERVER_STACK) == set()
    herald_server = ("herald.hub", "herald.store", "herald.http", "herald.mcp")
    assert {m for m in loaded if m.startswith(herald_server)} == set()
