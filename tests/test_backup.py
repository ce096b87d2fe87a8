"""``herald backup`` and ``herald restore`` as an operator runs them, beside a running herald."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from tests.backends import BACKENDS
from tests.conftest import run_admin_sql, scratch_database
from tests.herald_process import HeraldProcess
from tests.http.test_api import new_agent, publish
from tests.http.test_mcp_events import (
    MODERN,
    agent_http,
    meta,
    modern,
    stream_messages,
    stream_request,
)
from tests.http.test_mcp_events import answer as mcp_answer
from tests.sse import Frame, SSEReader

WAIT_S = 60


def herald_command(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``herald`` run with ``args``; ``env``: variables that replace the process's own."""
    return subprocess.run(
        [sys.executable, "-m", "herald.cli", *args],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        env=None if env is None else {**os.environ, **env},
    )


class Publisher:
    """Publishes events to one agent through a running herald, one after another, until the
    ``with`` block ends; ``answered()`` is the id of every publish herald has answered."""

    def __init__(self, herald: HeraldProcess, to: str) -> None:
        self._client = herald.client(herald.admin_key)
        self._to = to
        self._answered: list[str] = []
        self._progress = threading.Condition()
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._publish, daemon=True)

    def __enter__(self) -> Publisher:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=WAIT_S)
        self._client.close()
        if self._failure is not None and error is None:
            raise self._failure

    def answered(self) -> list[str]:
        with self._progress:
            return list(self._answered)

    def wait_for(self, count: int) -> None:
        """Return once ``count`` publishes are answered (bounded)."""
        with self._progress:
            done = self._progress.wait_for(
                lambda: len(self._answered) >= count or self._failure is not None, WAIT_S
            )
        assert done and self._failure is None, self._failure or f"{len(self._answered)} answered"

    def _publish(self) -> None:
        try:
            while not self._stop.is_set():
                response = publish(self._client, self._to, "under load")
                assert response.status_code == 202, response.text
                with self._progress:
                    self._answered.append(response.json()["id"])
                    self._progress.notify_all()
        except BaseException as exc:  # handed to the test's thread
            with self._progress:
                self._failure = exc
                self._progress.notify_all()


def missing_events(herald: HeraldProcess, event_ids: list[str]) -> list[str]:
    with herald.client(herald.admin_key) as admin:
        return [i for i in event_ids if admin.get(f"/v1/events/{i}").status_code != 200]


def test_a_backup_taken_under_load_holds_every_event_answered_before_it_began(
    tmp_path: Path,
) -> None:
    store, copy = tmp_path / "herald.db", tmp_path / "backups" / "herald-copy.db"
    copy.parent.mkdir()
    herald = HeraldProcess(f"sqlite:///{store}")
    try:
        with herald.client(herald.admin_key) as admin:
            agent = new_agent(admin)
        with Publisher(herald, agent["handle"]) as publisher:
            publisher.wait_for(200)
            before = publisher.answered()
            result = herald_command("backup", str(copy), "--store", f"sqlite:///{store}")
            publisher.wait_for(len(publisher.answered()) + 1)  # the load went on throughout
    finally:
        herald.stop()
    assert result.returncode == 0, result.stderr
    (said,) = result.stdout.splitlines()
    assert said.startswith(f"herald: backed up {store} to {copy} (") and "integrity" in said
    assert sorted(p.name for p in copy.parent.iterdir()) == [copy.name], "a temporary file is left"
    from_copy = HeraldProcess(f"sqlite:///{copy}")
    try:
        assert missing_events(from_copy, before) == []
    finally:
        from_copy.stop()


def test_restore_puts_a_backup_in_place_of_a_crashed_store_and_its_stale_wal(
    tmp_path: Path,
) -> None:
    store, copy = tmp_path / "herald.db", tmp_path / "herald-copy.db"
    url = f"sqlite:///{store}"
    herald = HeraldProcess(url)
    try:
        with herald.client(herald.admin_key) as admin:
            handle = new_agent(admin)["handle"]
            kept = [publish(admin, handle, f"kept {n}").json()["id"] for n in range(5)]
            assert herald_command("backup", str(copy), "--store", url).returncode == 0
            later = publish(admin, handle, "after the backup").json()["id"]
        while_served = herald_command("restore", str(copy), "--store", url)
    finally:
        herald.kill()  # a crash: the store's -wal stays beside it, holding the later event
    assert while_served.returncode == 1
    assert while_served.stderr.splitlines() == [
        f"herald restore: {store} is in use by another herald (pid {herald.process.pid});"
        " stop it before restoring its store"
    ]
    assert (tmp_path / "herald.db-wal").exists()
    restored = herald_command("restore", str(copy), "--store", url)
    assert restored.returncode == 0, restored.stderr
    assert not (tmp_path / "herald.db-wal").exists()
    herald = HeraldProcess(url)
    try:
        assert missing_events(herald, kept) == []
        assert missing_events(herald, [later]) == [later]
    finally:
        herald.stop()


def test_restore_refuses_a_file_that_is_no_herald_store_and_leaves_the_store_as_it_was(
    tmp_path: Path,
) -> None:
    store, bogus = tmp_path / "herald.db", tmp_path / "notes.txt"
    url = f"sqlite:///{store}"
    HeraldProcess(url).stop()
    before = store.read_bytes()
    bogus.write_text("not a database\n" * 100)
    result = herald_command("restore", str(bogus), "--store", url)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"herald restore: {bogus} is not a herald store: file is not a database"
    ]
    assert store.read_bytes() == before
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_backup_of_a_missing_store_or_onto_the_store_itself_is_refused(tmp_path: Path) -> None:
    missing = herald_command(
        "backup", str(tmp_path / "copy.db"), "--store", f"sqlite:///{tmp_path / 'none.db'}"
    )
    assert missing.returncode == 1
    assert missing.stderr == f"herald backup: there is no SQLite store at {tmp_path / 'none.db'}\n"
    onto_itself = herald_command(
        "backup", str(tmp_path / "h.db"), "--store", f"sqlite:///{tmp_path / 'h.db'}"
    )
    assert onto_itself.returncode == 1
    assert "would replace the store itself" in onto_itself.stderr
    assert list(tmp_path.iterdir()) == []


def with_password(url: str, password: str) -> str:
    """``url`` with a password in its user part (trust auth lets it be any)."""
    scheme, rest = url.split("://", 1)
    user, host = rest.split("@", 1)
    return f"{scheme}://{user}:{password}@{host}"


@dataclass
class PostgresBackup:
    """A PostgreSQL store that herald served, backed up with ``herald backup`` (given a password
    in its URL) when it held ``kept``, then given ``later``; herald is stopped."""

    url: str
    dump: Path
    backed_up: subprocess.CompletedProcess[str]
    kept: list[str]
    later: str


@pytest.fixture(scope="module")
def postgres_backup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresBackup]:
    """One backed-up PostgreSQL store for the module's tests that restore it (into a fresh
    database, or in its own place): each puts it back from the same dump."""
    directory = tmp_path_factory.mktemp("pg-backup")
    dump = directory / "herald.dump"
    with scratch_database() as url:
        herald = HeraldProcess(url)
        try:
            with herald.client(herald.admin_key) as admin:
                handle = new_agent(admin)["handle"]
                kept = [publish(admin, handle, f"kept {n}").json()["id"] for n in range(5)]
                backed_up = herald_command(
                    "backup", str(dump), "--store", with_password(url, "s3cret")
                )
                later = publish(admin, handle, "after the backup").json()["id"]
        finally:
            herald.stop()
        yield PostgresBackup(url, dump, backed_up, kept, later)


def test_a_postgresql_backup_restores_into_a_fresh_database_with_its_events(
    postgres_backup: PostgresBackup,
) -> None:
    backed_up, dump = postgres_backup.backed_up, postgres_backup.dump
    assert backed_up.returncode == 0, backed_up.stderr
    assert "s3cret" not in backed_up.stdout + backed_up.stderr
    (said,) = backed_up.stdout.splitlines()
    assert said.startswith("herald: backed up ") and f" to {dump} (pg_dump" in said
    assert sorted(p.name for p in dump.parent.iterdir()) == [dump.name], "a temporary file is left"
    with scratch_database() as fresh:
        restored = herald_command("restore", str(dump), "--store", with_password(fresh, "s3cret"))
        assert restored.returncode == 0, restored.stderr
        assert "s3cret" not in restored.stdout + restored.stderr
        assert restored.stdout.startswith("herald: restored ")
        herald = HeraldProcess(fresh)
        try:
            assert missing_events(herald, postgres_backup.kept) == []
        finally:
            herald.stop()


def test_without_pg_dump_a_postgresql_backup_fails_naming_the_command_to_run(
    tmp_path: Path,
) -> None:
    url = "postgresql://herald:s3cret@db.example:5432/herald?sslmode=require&schema=hub"
    nowhere = tmp_path / "empty-path"
    nowhere.mkdir()
    result = herald_command(
        "backup", str(tmp_path / "herald.dump"), "--store", url, env={"PATH": str(nowhere)}
    )
    assert result.returncode == 1
    command = (
        f"pg_dump --format=custom --schema=hub --file={tmp_path / 'herald.dump'}"
        " 'postgresql://herald@db.example:5432/herald?sslmode=require'"
    )
    (said,) = result.stderr.splitlines()
    assert said.startswith("herald backup: pg_dump is not installed") and said.endswith(command)
    assert "s3cret" not in result.stdout + result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [nowhere.name]


def test_without_pg_restore_a_postgresql_restore_fails_naming_the_command_to_run(
    tmp_path: Path,
) -> None:
    url = "postgresql://herald:s3cret@db.example:5432/herald"
    dump = tmp_path / "herald.dump"
    dump.write_bytes(b"PGDMP")
    result = herald_command("restore", str(dump), "--store", url, env={"PATH": str(tmp_path)})
    assert result.returncode == 1
    (said,) = result.stderr.splitlines()
    assert said.startswith("herald restore: pg_restore is not installed")
    assert said.endswith(f"pg_restore --clean --if-exists --no-owner --single-transaction"
                         f" --exit-on-error --dbname=postgresql://herald@db.example:5432/herald"
                         f" {dump}")  # fmt: skip
    assert "s3cret" not in result.stdout + result.stderr


@pytest.fixture(scope="module")
def made_store() -> Iterator[str]:
    """A PostgreSQL store made by herald serve and left as it was, for the module's tests whose
    backups of it fail."""
    with scratch_database() as url:
        HeraldProcess(url).stop()
        yield url


@pytest.mark.postgres
def test_a_postgresql_backup_of_a_mistyped_store_fails_in_one_line_and_writes_nothing(
    made_store: str, tmp_path: Path
) -> None:
    mistyped_database = f"{made_store}_x"
    mistyped_schema = f"{made_store}?schema=hbu"
    for url in (with_password(mistyped_database, "s3cret"), mistyped_schema):
        result = herald_command("backup", str(tmp_path / "herald.dump"), "--store", url)
        assert result.returncode == 1, result.stdout
        (said,) = result.stderr.splitlines()
        assert said.startswith(("herald backup: cannot open", "herald backup: there is no"))
        assert "s3cret" not in result.stdout + result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.postgres
def test_a_failing_pg_dump_fails_the_backup_in_one_line_without_the_password(
    made_store: str, tmp_path: Path
) -> None:
    role = f"herald_reader_{uuid.uuid4().hex[:8]}"
    run_admin_sql(f'CREATE ROLE "{role}" LOGIN')  # may connect, may read no table
    try:
        scheme, rest = made_store.split("://", 1)
        url = f"{scheme}://{role}:s3cret@{rest.split('@', 1)[1]}"
        result = herald_command("backup", str(tmp_path / "herald.dump"), "--store", url)
    finally:
        run_admin_sql(f'DROP ROLE "{role}"')
    assert result.returncode == 1
    (said,) = result.stderr.splitlines()
    assert said.startswith("herald backup: pg_dump failed: ") and "permission denied" in said
    assert "s3cret" not in result.stdout + result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_postgresql_restore_puts_the_store_back_as_it_was_at_the_backup(
    postgres_backup: PostgresBackup,
) -> None:
    backed_up = postgres_backup.backed_up
    assert backed_up.returncode == 0, backed_up.stderr
    restored = herald_command("restore", str(postgres_backup.dump), "--store", postgres_backup.url)
    assert restored.returncode == 0, restored.stderr
    herald = HeraldProcess(postgres_backup.url)
    try:
        assert missing_events(herald, postgres_backup.kept) == []
        assert missing_events(herald, [postgres_backup.later]) == [postgres_backup.later]
    finally:
        herald.stop()


def test_a_postgresql_restore_into_a_schema_puts_it_back_as_it_was_at_the_backup(
    postgres_database_url: str, tmp_path: Path
) -> None:
    postgres_database_url += "?schema=hub"
    dump = tmp_path / "herald.dump"
    herald = HeraldProcess(postgres_database_url)
    try:
        with herald.client(herald.admin_key) as admin:
            handle = new_agent(admin)["handle"]
            kept = [publish(admin, handle, f"kept {n}").json()["id"] for n in range(3)]
            backed_up = herald_command("backup", str(dump), "--store", postgres_database_url)
            assert backed_up.returncode == 0, backed_up.stderr
            later = publish(admin, handle, "after the backup").json()["id"]
    finally:
        herald.stop()
    restored = herald_command("restore", str(dump), "--store", postgres_database_url)
    assert restored.returncode == 0, restored.stderr
    herald = HeraldProcess(postgres_database_url)
    try:
        assert missing_events(herald, kept) == []
        assert missing_events(herald, [later]) == [later]
    finally:
        herald.stop()


@contextlib.contextmanager
def restorable_store(backend: str, directory: Path) -> Iterator[tuple[str, Callable[[], str]]]:
    """A store URL of ``backend``, and a function that backs it up now and returns another
    that puts that backup in place (herald stopped) and returns the restored store's URL: on
    SQLite with ``herald backup`` and ``herald restore``, on PostgreSQL with ``pg_dump`` and
    ``pg_restore`` into a new database, as an operator restores one."""
    with contextlib.ExitStack() as stack:
        if backend == "sqlite":
            url, copy = f"sqlite:///{directory / 'herald.db'}", directory / "copy.db"

            def sqlite_backup() -> Callable[[], str]:
                done = herald_command("backup", str(copy), "--store", url)
                assert done.returncode == 0, done.stderr

                def put_back() -> str:
                    done = herald_command("restore", str(copy), "--store", url)
                    assert done.returncode == 0, done.stderr
                    return url

                return put_back

            yield url, sqlite_backup
            return
        url, dump = stack.enter_context(scratch_database()), directory / "herald.dump"
        new_url = stack.enter_context(scratch_database())

        def pg_backup() -> Callable[[], str]:
            run(["pg_dump", "--format=custom", f"--file={dump}", url])

            def put_back() -> str:
                run(["pg_restore", "--no-owner", f"--dbname={new_url}", str(dump)])
                return new_url

            return put_back

        yield url, pg_backup


def run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr


@dataclass
class Restored:
    """A store served again after a restore (``after_a_restore``), and what clients were given
    of it before: each test reading it has an agent of its own."""

    herald: HeraldProcess
    agents: dict[str, dict[str, Any]]
    """Each reading test's agent, by the name of its test (``READERS``)."""
    kept: dict[str, list[str]]
    """The ids of every event of each agent the restored store holds, oldest first."""
    sse_positions: dict[str, str]
    """The SSE id of the eighth event of the agents of "positions" and "cursor"."""
    poll_cursor: str
    """The cursor of the events/poll of the agent of "positions" handed its first 8 events."""
    feed_id: str
    """The id of the admin's feed item of the eighth event of the agent of "feed"."""


READERS = ("positions", "cursor", "feed")
"""The tests that read a restored store: each has its agent in it."""


@contextlib.contextmanager
def after_a_restore(backend: str, directory: Path) -> Iterator[Restored]:
    """A store backed up when each agent (one per test of ``READERS``) had its first three
    events, each given five more, read by clients (their positions: an SSE id, an events/poll
    cursor, an id of the admin's feed, live since before the first event), then put back from
    the backup and served again, with ten events published to each agent since."""
    with restorable_store(backend, directory) as (url, back_up):
        herald = HeraldProcess(url)
        try:
            live = SSEReader(herald.url, herald.admin_key or "", path="/v1/stream")
            with herald.client(herald.admin_key) as admin:
                agents = {name: new_agent(admin) for name in READERS}
                kept = {
                    name: [
                        publish(admin, agent["handle"], f"kept {n}").json()["id"] for n in range(3)
                    ]
                    for name, agent in agents.items()
                }
                put_back = back_up()
                for agent in agents.values():
                    for n in range(5):
                        publish(admin, agent["handle"], f"lost {n}")
            feed = [_published(live, agents["feed"]["handle"]) for _ in range(8)]
            feed_id, _ = feed[-1].raw_id, live.close()
            sse_positions = {
                name: _sse_position(herald, agents[name]) for name in ("positions", "cursor")
            }
            poll_cursor = asyncio.run(_poll_through(herald, agents["positions"]["api_key"], 8))
        finally:
            herald.stop()
        herald = HeraldProcess(put_back())
        try:
            with herald.client(herald.admin_key) as admin:
                for name, agent in agents.items():
                    for n in range(10):
                        kept[name].append(publish(admin, agent["handle"], f"new {n}").json()["id"])
            yield Restored(herald, agents, kept, sse_positions, poll_cursor, feed_id)
        finally:
            herald.stop()


@pytest.fixture(scope="module")
def restored_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Restored]:
    """The restored store of the module's tests on SQLite: each reads its own agent."""
    with after_a_restore("sqlite", tmp_path_factory.mktemp("restored")) as restored:
        yield restored


@pytest.fixture(scope="module")
def restored_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Restored]:
    """The restored store of the module's tests on PostgreSQL: each reads its own agent."""
    with after_a_restore("postgres", tmp_path_factory.mktemp("restored")) as restored:
        yield restored


@pytest.fixture(params=BACKENDS)
def restored(request: pytest.FixtureRequest) -> Restored:
    """The restored store on each backend, made once for the module's tests."""
    found = request.getfixturevalue(f"restored_{request.param}")
    assert isinstance(found, Restored)
    return found


def _sse_position(herald: HeraldProcess, agent: dict[str, Any]) -> str:
    """The SSE id of the agent's eighth event, read from its stream."""
    sse = SSEReader(herald.url, agent["api_key"], after=0)
    assert [sse.next() is not None for _ in range(8)] == [True] * 8
    position, _ = sse.last_id, sse.close()
    return position


def test_positions_given_before_a_restore_get_every_pending_event_and_are_told(
    restored: Restored,
) -> None:
    """After a restore, seqs the old store gave are given again: a position from before it is
    no place in the restored store, even once new events pass it. SSE, events/poll and
    events/stream each get every pending event, with the notice that history was lost."""
    herald, agent, kept = restored.herald, restored.agents["positions"], restored.kept["positions"]
    sse = SSEReader(herald.url, agent["api_key"], last_event_id=restored.sse_positions["positions"])
    notice = sse.next()
    assert notice is not None and notice.event == "truncated", notice
    assert notice.data["missing"] is None
    frames = [sse.next() for _ in kept]
    sse.close()
    assert [frame.data["id"] for frame in frames if frame is not None] == kept
    polled, active, pushed = asyncio.run(
        _poll_and_stream(herald, agent["api_key"], restored.poll_cursor, len(kept))
    )
    assert polled["truncated"] is True
    assert [event["eventId"] for event in polled["events"]] == kept
    assert active["params"]["truncated"] is True
    assert [message["params"]["eventId"] for message in pushed] == kept


async def _poll_through(herald: HeraldProcess, key: str, count: int) -> str:
    """The cursor of an events/poll that was handed the agent's first ``count`` events."""
    async with agent_http(herald, key) as http:
        start = await modern(http, "events/poll", {"name": "herald.event", "cursor": None})
        given = {"name": "herald.event", "cursor": start["result"]["cursor"]}
        page = (await modern(http, "events/poll", given))["result"]
    assert len(page["events"]) == count, page
    return str(page["cursor"])


async def _poll_and_stream(
    herald: HeraldProcess, key: str, cursor: str, count: int
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """An events/poll from ``cursor``, then an events/stream from it: the poll's result, the
    stream's ``active`` notification and its first ``count`` events."""
    async with agent_http(herald, key) as http:
        polled = await modern(http, "events/poll", {"name": "herald.event", "cursor": cursor})
        body, headers = await stream_request(http, "modern")
        body["params"]["cursor"] = cursor
        async with stream_messages(http, body, headers) as messages:
            active = await anext(messages)
            pushed = [await anext(messages) for _ in range(count)]
    return polled["result"], active, pushed


def test_a_cursor_given_before_a_restore_acknowledges_nothing_after_it(
    restored: Restored,
) -> None:
    """Seqs are handed out again after a restore: a stream's position from before it, sent to
    POST /channel/ack, acknowledges none of the restored store's events (they may be others
    than the client saw) and says so; a bare seq never acknowledges pushed events at all.
    A position given since acknowledges them."""
    herald, agent, kept = restored.herald, restored.agents["cursor"], restored.kept["cursor"]
    old_position = restored.sse_positions["cursor"]
    with herald.client(agent["api_key"]) as client:
        old = client.post("/channel/ack", json={"cursor": old_position})
        assert old.json() == {"acked": 0, "truncated": True}, old.text
        bare = client.post("/channel/ack", json={"cursor": 8})
        assert bare.json() == {"acked": 0}, bare.text
        tool = asyncio.run(_ack_tool(herald, agent["api_key"], old_position))
        assert tool["structuredContent"] == {"acked": 0, "truncated": True}, tool
        with herald.client(herald.admin_key) as admin:
            statuses = {admin.get(f"/v1/events/{i}").json()["status"] for i in kept}
        assert statuses == {"pending"}
        sse = SSEReader(herald.url, agent["api_key"], after=0)
        assert [sse.next() is not None for _ in kept] == [True] * len(kept)
        new_position, _ = sse.last_id, sse.close()
        acked = client.post("/channel/ack", json={"cursor": new_position})
        assert acked.json() == {"acked": len(kept)}, acked.text


def test_a_feed_id_given_before_a_restore_resumes_from_the_oldest_with_a_gap(
    restored: Restored,
) -> None:
    """The journal's places are handed out again after a restore (on SQLite; on PostgreSQL,
    on a server whose transaction ids are behind the old one's): an id of the admin's feed
    from before it is no place in the restored store, even once new items pass it. The feed
    says so with a gap item and goes on from the oldest item kept, passing over none."""
    herald, handle = restored.herald, restored.agents["feed"]["handle"]
    resumed = SSEReader(
        herald.url, herald.admin_key or "", path="/v1/stream", last_event_id=restored.feed_id
    )
    gap = resumed.next()
    assert gap is not None and gap.event == "gap", gap
    assert gap.data["after"] == restored.feed_id and "another history" in gap.data["message"]
    frames = [_published(resumed, handle) for _ in restored.kept["feed"]]
    resumed.close()
    assert [frame.data["event"]["id"] for frame in frames] == restored.kept["feed"]


async def _ack_tool(herald: HeraldProcess, key: str, cursor: str) -> dict[str, Any]:
    """The result of the MCP ``ack`` tool called with ``cursor`` (2026-07-28 era)."""
    async with agent_http(herald, key) as http:
        params = {"_meta": meta(), "name": "ack", "arguments": {"cursor": cursor}}
        headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "ack"}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        answer = mcp_answer(await http.post("/mcp", json=body, headers=headers))
    assert "result" in answer, answer
    return dict(answer["result"])


def _published(feed: SSEReader, handle: str) -> Frame:
    """The feed's next ``published`` item for the agent ``handle``."""
    while True:
        frame = feed.next()
        assert frame is not None, "the feed ended"
        if frame.event == "published" and frame.data["agent"]["handle"] == handle:
            return frame
