"""``herald serve`` as a user starts it: its admin key, its defaults, its flags and their errors."""

from __future__ import annotations

import os
import queue
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from herald.cli import build_parser, main, serve_config
from herald.config import DEFAULTS, ServeConfig
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
        f"herald: cannot listen on 127.0.0.1:{port}: address already in use"
    ]
    assert result.stdout == ""
    assert not store.exists(), "the store was opened although herald could not listen"
    assert bad_flag.returncode == 2
    assert "head timeout" in bad_flag.stderr and "cannot listen" not in bad_flag.stderr


def serve_flags(*flags: str) -> ServeConfig:
    return serve_config(build_parser().parse_args(["serve", *flags]))


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
    (("--lease", "7"), lambda c: c.hub.lease_s, 7.0),
    (("--ack-timeout", "9"), lambda c: c.delivery.ack_timeout_s, 9.0),
    (("--backlog-limit", "2"), lambda c: c.delivery.backlog_limit, 2),
    (("--presence-ttl", "3"), lambda c: c.delivery.presence_ttl_s, 3.0),
    (("--stream-buffer", "50"), lambda c: c.streams.buffer_size, 50),
    (("--webhook-allow", "private"), lambda c: str(c.webhooks.allow), "private"),
    (("--webhook-schedule", "0,1"), lambda c: c.webhooks.schedule_s, (0, 1)),
    (("--webhook-disable-after", "60"), lambda c: c.webhooks.disable_after_s, 60.0),
    (("--webhook-timeout", "2"), lambda c: c.webhooks.timeout_s, 2.0),
    (("--webhook-concurrency", "1"), lambda c: c.webhooks.per_endpoint, 1),
    (("--streams-per-key", "0"), lambda c: c.limits.streams, 0),
    (("--sessions-per-key", "3"), lambda c: c.limits.sessions, 3),
    (("--publish-rate", "5"), lambda c: c.limits.publish_rate, 5.0),
    (("--publish-burst", "6"), lambda c: c.limits.publish_burst, 6),
    (("--log-level", "debug"), lambda c: c.log_level, "debug"),
    (("--subscription-ttl", "120"), lambda c: c.subscriptions.default_ttl_s, 120.0),
    (("--subscription-max-ttl", "7200"), lambda c: c.subscriptions.max_ttl_s, 7200.0),
    (("--subscription-min-ttl", "30"), lambda c: c.subscriptions.min_ttl_s, 30.0),
    (("--subscription-no-expiry",), lambda c: c.subscriptions.allow_no_expiry, True),
    (("--subscription-schedule", "0,9"), lambda c: c.subscriptions.schedule_s, (0, 9)),
    (("--subscription-limit", "0"), lambda c: c.subscriptions.max_per_agent, 0),
]


@pytest.mark.parametrize(("flag", "setting", "value"), SETTINGS, ids=[s[0][0] for s in SETTINGS])
def test_each_serve_flag_sets_its_setting_and_only_that(
    flag: tuple[str, ...], setting: Callable[[ServeConfig], object], value: object
) -> None:
    config = serve_flags("--store", DEFAULTS.store_url, *flag)
    assert setting(config) == value != setting(DEFAULTS)
    changed = [
        (name, group) for name, group in vars(config).items() if group != getattr(DEFAULTS, name)
    ]
    assert len(changed) == 1, changed
