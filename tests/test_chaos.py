"""Chaos: a hub killed with SIGKILL under concurrent publishes, two drainers sharing an agent,
signed webhooks to another and clients whose request bodies stop or trickle in, then restarted
on the same store. Every acknowledged publish reaches
its agent at least once, and an event is acknowledged only by a consumer it was handed to.
And a store restored from a backup taken under load: clients resuming from positions given
before the restore (SSE, MCP events/poll) miss none of the restored store's events.

Publishers and consumers run in threads of their own, as separate clients would. Every wait is
bounded, and what is asserted does not depend on how fast the machine is. The SQLite and the
PostgreSQL runs go side by side: most of each is waiting (for a restart, for leases to run out,
and for the restarted hub to see that the killed one is gone and free its webhook claims)."""

from __future__ import annotations

import queue
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from tests.backends import BACKENDS
from tests.herald_process import ADMIN_KEY, HeraldProcess
from tests.http.hostile import slow_body
from tests.http.test_mcp import MCP_HEADERS
from tests.http.test_mcp_events import MODERN, meta
from tests.http.test_mcp_events import answer as mcp_answer
from tests.sse import Frame, SSEReader
from tests.test_backup import restorable_store
from tests.waiting import wait_until
from tests.webhooks.receiver import Received, Receiver

DRAINED, HOOKED = "drained", "hooked"
LEASE_S = 1
PUBLISHERS = 4
STALL_AFTER = 50
"""Acknowledged publishes before one consumer stalls for longer than its lease."""
KILL_AFTER = 300
MORE_AFTER_RESTART = 200
BATCH = 10
RETRY_S = 0.05
WAIT_S = 90
"""Bounds every wait. The longest is for webhooks the killed hub had claimed: on PostgreSQL the
restarted hub frees them once the killed one has been gone a few seconds; a SQLite hub frees
them when it restarts."""
SLOW_BODY = b'{"cursor": 0' + b" " * 4096 + b"}"
"""A heartbeat body that a slow client never gets to its end."""
SERVE_ARGS = (
    "--lease", str(LEASE_S),
    "--body-idle-timeout", "2",
    "--body-timeout", "4",
    "--webhook-allow", "loopback",
    "--webhook-timeout", "1",
    "--webhook-schedule", "0,1,1,1,1,1,1,1,1,1",
)  # fmt: skip


@dataclass
class Ledger:
    """What the clients were told, written from their threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acknowledged: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    """Event ids per agent handle, from 202 (or 200 for a publish sent again) answers."""
    handed: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    """Event ids per consumer, from heartbeat answers."""
    cursors_sent: dict[str, list[tuple[float, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    """(when, cursor) per consumer, for each heartbeat answered."""
    problems: list[str] = field(default_factory=list)
    """Answers no client should get."""
    aborted: threading.Event = field(default_factory=threading.Event)
    """Set when the run ends, early or not: every client stops."""
    slow_bodies_ended: int = 0
    """Slow bodies herald ended with 408."""

    def published(self) -> int:
        with self.lock:
            return sum(len(ids) for ids in self.acknowledged.values())

    def all_handed(self) -> set[str]:
        with self.lock:
            return set().union(*self.handed.values())

    def problem(self, what: str) -> None:
        with self.lock:
            self.problems.append(what)


def post(client: httpx.Client, url: str, body: dict[str, Any]) -> httpx.Response | None:
    """The answer, or None while the hub is down or its store is (try again)."""
    try:
        response = client.post(url, json=body)
    except httpx.TransportError:
        return None
    return None if response.status_code == 503 else response


def publish(
    url: str,
    writer: int,
    ledger: Ledger,
    stop: threading.Event,
    to_agents: tuple[str, str] = (DRAINED, HOOKED),
) -> None:
    """Publish to both agents until told to stop. A publish that got no answer is sent again
    with the same dedupe key, so an event stored just before the kill is acknowledged then."""
    n = 0
    with httpx.Client(headers={"authorization": f"Bearer {ADMIN_KEY}"}, timeout=10) as client:
        while not stop.is_set() and not ledger.aborted.is_set():
            to, text = to_agents[n % 2], f"w{writer}-{n}"
            body = {"to": to, "type": "chaos", "text": text, "dedupe_key": text}
            answer = post(client, f"{url}/v1/events", body)
            if answer is None:
                time.sleep(RETRY_S)  # a back-off while the hub restarts
                continue
            if answer.status_code not in (200, 202):
                ledger.problem(f"publish {text}: {answer.status_code} {answer.text}")
                return
            with ledger.lock:
                ledger.acknowledged[to].add(answer.json()["id"])
            n += 1


@dataclass
class Consumer:
    """A drainer of the DRAINED agent: heartbeats with its cursor, under its own name."""

    name: str
    url: str
    key: str
    ledger: Ledger
    stall_once: bool = False
    stalled: threading.Event = field(default_factory=threading.Event)

    def run(self, finish: threading.Event) -> None:
        """Drain until ``finish`` is set and a heartbeat finds nothing more for this consumer."""
        cursor = 0
        with httpx.Client(headers={"authorization": f"Bearer {self.key}"}, timeout=10) as client:
            while not self.ledger.aborted.is_set():
                sent_at = time.monotonic()
                body = {"cursor": cursor, "consumer": self.name, "limit": BATCH}
                answer = post(client, f"{self.url}/channel/heartbeat", body)
                if answer is None:
                    time.sleep(RETRY_S)
                    continue
                if answer.status_code != 200:
                    self.ledger.problem(
                        f"{self.name} heartbeat: {answer.status_code} {answer.text}"
                    )
                    return
                events = answer.json()["events"]
                with self.ledger.lock:
                    self.ledger.cursors_sent[self.name].append((sent_at, cursor))
                    self.ledger.handed[self.name].update(e["id"] for e in events)
                cursor = answer.json()["cursor"]
                if not events and finish.is_set():
                    return
                if not events:
                    time.sleep(RETRY_S)  # idle: poll again soon
                elif self.stall_once and self.ledger.published() >= STALL_AFTER:
                    self.stall_once = False
                    self.outlast_the_lease(events[-1]["seq"], time.monotonic() + LEASE_S)
                    self.stalled.set()

    def outlast_the_lease(self, holding: int, expired_at: float) -> None:
        """Stop (a slow step, a GC pause) until the events held run out of lease and another
        consumer sent a cursor past them: what was handed to this one must not count as
        delivered by that cursor."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and not self.ledger.aborted.is_set():
            with self.ledger.lock:
                others = [
                    sent for name, sent in self.ledger.cursors_sent.items() if name != self.name
                ]
            if any(at > expired_at + 0.1 and c > holding for sent in others for at, c in sent):
                return
            time.sleep(RETRY_S)
        self.ledger.problem(f"{self.name} stalled: no other consumer went past seq {holding}")


def send_slow_bodies(url: str, key: str, ledger: Ledger, trickle_s: float | None) -> None:
    """Heartbeats with a valid key whose bodies stop half way (``trickle_s`` None) or trickle
    in, one after another until the run ends: each must be ended with 408 (or by the kill)."""
    while not ledger.aborted.is_set():
        try:
            answer = slow_body(
                url, "/channel/heartbeat", key, SLOW_BODY, trickle_s=trickle_s, wait_s=WAIT_S
            )
        except AssertionError as exc:
            ledger.problem(str(exc))
            return
        except OSError:  # the hub is down: killed, or not yet restarted
            time.sleep(RETRY_S)
            continue
        if answer.startswith(b"HTTP/1.1 408 ") and b'"code":"body_timeout"' in answer:
            with ledger.lock:
                ledger.slow_bodies_ended += 1
        elif answer:
            ledger.problem(f"a slow body was answered {answer[:200]!r}")
            return


def whole_requests(receiver: Receiver) -> list[Received]:
    """The requests that reached the receiver whole. One cut off by the kill is no delivery:
    its event must come again."""
    return [
        request
        for request in list(receiver.requests)
        if len(request.body) == int(request.headers.get("content-length", -1))
    ]


def webhooks_received(receiver: Receiver) -> set[str]:
    return {request.headers["webhook-id"] for request in whole_requests(receiver)}


def unverified_webhooks(receiver: Receiver, secret: str) -> list[str]:
    failures = []
    for request in whole_requests(receiver):
        try:
            Webhook(secret).verify(request.body, request.headers)
        except Exception as exc:  # the library's errors have no common base worth naming
            failures.append(f"{request.headers['webhook-id']}: {exc}")
    return failures


def acks_without_a_lease(
    event: dict[str, Any], cursors_sent: dict[str, list[tuple[float, int]]]
) -> list[str]:
    """Acknowledgements of the event by a consumer it had not been leased to before, or by one
    that never sent a cursor as far as the event."""
    attempts = event["attempts"]
    leases = [(a["session"], a["at"]) for a in attempts if a["outcome"] == "leased"]
    return [
        f"{event['id']} acknowledged by {ack['session']}, leased to {leases}"
        for ack in attempts
        if ack["mechanism"] == "ack"
        and (
            not any(who == ack["session"] and at <= ack["at"] for who, at in leases)
            or max((c for _, c in cursors_sent[ack["session"]]), default=0) < event["seq"]
        )
    ]


def check_drained(admin: httpx.Client, ledger: Ledger) -> None:
    """Every acknowledged publish to DRAINED was handed out and ends delivered, and each was
    acknowledged only by a consumer it was leased to."""
    acknowledged = ledger.acknowledged[DRAINED]
    lost = acknowledged - ledger.all_handed()
    assert not lost, f"{len(lost)} acknowledged publishes never handed out, e.g. {sorted(lost)[:3]}"
    stuck, wrong = [], []
    for event_id in sorted(acknowledged | ledger.all_handed()):
        event = admin.get(f"/v1/events/{event_id}").json()
        if event_id in acknowledged and event["status"] != "delivered":
            stuck.append(f"{event_id}: {event['status']}")
        wrong += acks_without_a_lease(event, ledger.cursors_sent)
    assert not stuck, f"{len(stuck)} drained to the end but not delivered, e.g. {stuck[:3]}"
    assert not wrong, f"{len(wrong)} acknowledged by a cursor that did not hand them out: " + (
        "; ".join(wrong[:3])
    )


def run_chaos(store_url: str) -> None:
    """Publish, drain and deliver by webhook; SIGKILL the hub under that load; restart it on the
    same store; let everything drain; then check what each client saw against the store."""
    receiver, ledger = Receiver(), Ledger()
    # The killed hub resets the connections it had open to the receiver: expected, not worth
    # a traceback (its requests cut short are left out below).
    receiver.server.handle_error = lambda request, client_address: None
    stop, finish = threading.Event(), threading.Event()
    started: list[HeraldProcess] = []
    try:
        herald = HeraldProcess(store_url, extra_args=SERVE_ARGS)
        started.append(herald)
        with herald.client(ADMIN_KEY) as admin:
            drained_key = admin.post("/v1/agents", json={"handle": DRAINED}).json()["api_key"]
            hooked = admin.post("/v1/agents", json={"handle": HOOKED}).json()
            hook = admin.put(f"/v1/agents/{hooked['id']}/webhook", json={"url": receiver.url})
            secret = hook.json()["secret"]
        consumers = [
            Consumer("c1", herald.url, drained_key, ledger, stall_once=True),
            Consumer("c2", herald.url, drained_key, ledger),
        ]
        publishers = [
            threading.Thread(target=publish, args=(herald.url, w, ledger, stop), daemon=True)
            for w in range(PUBLISHERS)
        ]
        drainers = [threading.Thread(target=c.run, args=(finish,), daemon=True) for c in consumers]
        slow = [
            threading.Thread(
                target=send_slow_bodies, args=(herald.url, drained_key, ledger, pace), daemon=True
            )
            for pace in (None, 0.2)  # a body that stops, and one that trickles in
        ]
        for thread in publishers + drainers + slow:
            thread.start()

        wait_until(lambda: ledger.published() >= KILL_AFTER, "publishes before the kill", WAIT_S)
        wait_until(consumers[0].stalled.is_set, "the stalled consumer to come back", WAIT_S)
        herald.kill()
        published = ledger.published()
        port = int(herald.url.rsplit(":", 1)[1])
        herald = HeraldProcess(store_url, extra_args=SERVE_ARGS, port=port)
        started.append(herald)
        wait_until(
            lambda: ledger.published() >= published + MORE_AFTER_RESTART,
            "publishes after the restart",
            WAIT_S,
        )
        stop.set()
        for thread in publishers:
            thread.join(timeout=WAIT_S)
        wait_until(
            lambda: ledger.acknowledged[DRAINED] <= ledger.all_handed() or bool(ledger.problems),
            "the consumers to be handed every acknowledged publish",
            WAIT_S,
        )
        wait_until(
            lambda: ledger.acknowledged[HOOKED] <= webhooks_received(receiver),
            "the webhook receiver to get every acknowledged publish",
            WAIT_S,
        )
        finish.set()
        for thread in drainers:
            thread.join(timeout=WAIT_S)
        assert not any(thread.is_alive() for thread in publishers + drainers)

        assert not ledger.problems, ledger.problems
        assert ledger.slow_bodies_ended, "no slow body was ended by its deadline"
        assert not unverified_webhooks(receiver, secret)
        with herald.client(ADMIN_KEY) as admin:
            check_drained(admin, ledger)
    finally:
        ledger.aborted.set()
        for process in started:
            process.stop()
        receiver.close()


def test_a_sigkill_under_load_loses_nothing_and_no_cursor_acks_what_it_was_not_handed(
    tmp_path: Path, postgres_database_url: str
) -> None:
    stores = {"sqlite": f"sqlite:///{tmp_path / 'herald.db'}", "postgres": postgres_database_url}
    with ThreadPoolExecutor(len(stores)) as pool:
        runs = {backend: pool.submit(run_chaos, url) for backend, url in stores.items()}
    failures = []
    for backend, run in runs.items():
        try:
            run.result()
        except AssertionError as exc:
            failures.append(f"{backend}: {str(exc).splitlines()[0]}")
    assert not failures, "\n".join(failures)


FOLLOWED, POLLED = "followed", "polled"
"""The agents of the restore run: one followed over SSE, one polled with MCP events/poll."""
AFTER_THE_BACKUP = 60
"""Acknowledged publishes between the backup and the kill: the clients' positions pass the
backup's newest seqs by about half as many per agent, which the restored store hands out again."""


@dataclass
class Follower:
    """Follows the FOLLOWED agent's SSE stream, reconnecting from its last id, as a browser's
    EventSource does: every frame it reads, in order."""

    url: str
    key: str
    ledger: Ledger
    frames: list[Frame] = field(default_factory=list)

    def run(self) -> None:
        last: str | None = None
        while not self.ledger.aborted.is_set():
            try:
                reader = SSEReader(self.url, self.key, last_event_id=last)
                while (frame := reader.next()) is not None:
                    with self.ledger.lock:
                        self.frames.append(frame)
                    last = frame.raw_id or last
            except (httpx.HTTPError, queue.Empty):
                pass
            time.sleep(RETRY_S)

    def after_the_notice(self) -> set[str] | None:
        """The ids of the events read since history was announced lost, if it was."""
        with self.ledger.lock:
            frames = list(self.frames)
        notices = [i for i, f in enumerate(frames) if f.event == "truncated"]
        if not notices:
            return None
        return {f.data["id"] for f in frames[notices[0] :] if f.event == "message"}


@dataclass
class Poller:
    """Polls the POLLED agent with MCP events/poll on the 2026-07-28 era, its cursor from each
    answer, as a client keeps it across restarts."""

    url: str
    key: str
    ledger: Ledger
    handed: set[str] = field(default_factory=set)
    truncated_after: list[int] = field(default_factory=list)
    """How many answers came before each answer that said ``truncated``."""

    def run(self, finish: threading.Event) -> None:
        cursor, answers = None, 0
        headers = {
            **MCP_HEADERS,
            "authorization": f"Bearer {self.key}",
            "mcp-protocol-version": MODERN,
            "mcp-method": "events/poll",
        }
        with httpx.Client(headers=headers, timeout=10) as client:
            while not self.ledger.aborted.is_set():
                params = {"_meta": meta(), "name": "herald.event", "cursor": cursor}
                body = {"jsonrpc": "2.0", "id": 1, "method": "events/poll", "params": params}
                answer = post(client, f"{self.url}/mcp", body)
                if answer is None:
                    time.sleep(RETRY_S)
                    continue
                said = mcp_answer(answer)
                if "result" not in said:  # refused (the hub restarting): the same cursor again
                    time.sleep(RETRY_S)
                    continue
                result, answers = said["result"], answers + 1
                with self.ledger.lock:
                    self.handed.update(e["eventId"] for e in result["events"])
                    if result["truncated"]:
                        self.truncated_after.append(answers)
                cursor = result["cursor"]
                if not result["events"] and finish.is_set() and cursor is not None:
                    return
                if not result["events"]:
                    time.sleep(RETRY_S)


def run_restore_chaos(backend: str, directory: Path) -> None:
    """Publish to an agent followed over SSE and to one polled over MCP; back the store up under
    that load; publish on until both clients are past the backup; SIGKILL the hub, restore the
    backup, restart on the same port and publish on. Every event of the restored store reaches
    the follower after the announcement that history was lost, and is handed to the poller
    and ends delivered: no position from before the restore made either skip one."""
    ledger, stop, finish = Ledger(), threading.Event(), threading.Event()
    started: list[HeraldProcess] = []
    directory.mkdir()
    with restorable_store(backend, directory) as (url, back_up):
        try:
            herald = HeraldProcess(url)
            started.append(herald)
            with herald.client(ADMIN_KEY) as admin:
                keys = {
                    handle: admin.post("/v1/agents", json={"handle": handle}).json()["api_key"]
                    for handle in (FOLLOWED, POLLED)
                }
            follower = Follower(herald.url, keys[FOLLOWED], ledger)
            poller = Poller(herald.url, keys[POLLED], ledger)
            threads = [
                threading.Thread(
                    target=publish, args=(herald.url, w, ledger, stop, (FOLLOWED, POLLED))
                )
                for w in range(2)
            ]
            readers = [
                threading.Thread(target=follower.run),
                threading.Thread(target=poller.run, args=(finish,)),
            ]
            for thread in threads + readers:
                thread.daemon = True
                thread.start()
            wait_until(
                lambda: ledger.published() >= AFTER_THE_BACKUP,
                "publishes before the backup",
                WAIT_S,
            )
            put_back = back_up()
            backed_up = ledger.published()
            wait_until(
                lambda: ledger.published() >= backed_up + AFTER_THE_BACKUP,
                "publishes after the backup",
                WAIT_S,
            )
            wait_until(
                lambda: len(follower.frames) >= (backed_up + AFTER_THE_BACKUP) // 2 - 5,
                "the follower to pass the backup",
                WAIT_S,
            )
            herald.kill()
            published = ledger.published()
            port = int(herald.url.rsplit(":", 1)[1])
            herald = HeraldProcess(put_back(), port=port)
            started.append(herald)
            # Enough for the restored store's seqs to pass every position given before.
            wait_until(
                lambda: ledger.published() >= published + 2 * AFTER_THE_BACKUP,
                "publishes after the restore",
                WAIT_S,
            )
            stop.set()
            for thread in threads:
                thread.join(timeout=WAIT_S)
            with herald.client(ADMIN_KEY) as admin:
                kept = {
                    handle: {
                        event_id
                        for event_id in ledger.acknowledged[handle]
                        if admin.get(f"/v1/events/{event_id}").status_code == 200
                    }
                    for handle in (FOLLOWED, POLLED)
                }
            wait_until(
                lambda: kept[FOLLOWED] <= (follower.after_the_notice() or set()),
                "the follower to get every event of the restored store after the notice",
                WAIT_S,
            )
            wait_until(
                lambda: kept[POLLED] <= poller.handed or bool(ledger.problems),
                "the poller to be handed every event",
                WAIT_S,
            )
            finish.set()
            readers[1].join(timeout=WAIT_S)
            assert not ledger.problems, ledger.problems
            assert poller.truncated_after, "no answer to the poller said history was lost"
            with herald.client(ADMIN_KEY) as admin:
                statuses = {admin.get(f"/v1/events/{e}").json()["status"] for e in kept[POLLED]}
            assert statuses == {"delivered"}, statuses
        finally:
            ledger.aborted.set()
            for process in started:
                process.stop()


@pytest.mark.postgres  # runs on each backend at once, in one test
def test_a_restore_under_load_makes_no_client_skip_an_event(tmp_path: Path) -> None:
    with ThreadPoolExecutor(len(BACKENDS)) as pool:
        runs = {
            backend: pool.submit(run_restore_chaos, backend, tmp_path / backend)
            for backend in BACKENDS
        }
    failures = []
    for backend, run in runs.items():
        try:
            run.result()
        except AssertionError as exc:
            failures.append(f"{backend}: {str(exc).splitlines()[0]}")
    assert not failures, "\n".join(failures)
