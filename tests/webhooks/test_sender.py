"""The sender against a real receiver: connections kept alive, and kept apart per endpoint.
What it keeps for a while (a host's checked addresses, an endpoint's connections) is kept by
the clock it is given."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import trustme

import herald
from herald.addresses import AddressPolicy
from herald.models import Agent, Endpoint, Event, EventStatus, Kind
from herald.testing import ManualClock
from herald.webhooks.sender import (
    ADDRESS_CHECK_TTL_S,
    IDLE_CLIENT_S,
    MAX_ANSWER_BYTES,
    Sender,
    SendOutcome,
)
from tests.webhooks.receiver import Page, Receiver

pytestmark = pytest.mark.anyio

LOOPBACK = AddressPolicy(allow_loopback=True)


def endpoint(name: str, url: str) -> Endpoint:
    return Endpoint(f"end_{name}", f"agt_{name}", Kind.WEBHOOK, url, "whsec_" + "a" * 32, 0)


def event(n: int) -> Event:
    return Event(f"evt_{n}", "agt_x", n, "t", f"event {n}", "{}", 0, EventStatus.PENDING)


async def test_an_endpoint_reuses_its_connections_and_shares_them_with_no_other() -> None:
    receiver = Receiver()
    sender = Sender("http://hub.test", LOOPBACK, timeout_s=5)
    first, second = endpoint("a", receiver.url + "/a"), endpoint("b", receiver.url + "/b")
    agent = Agent("agt_x", "x", "hash", 0)
    try:
        for n in range(3):
            assert (await sender.send(first, agent, event(n), 0)).ok
        assert (await sender.send(second, agent, event(3), 0)).ok
    finally:
        await sender.close()
        receiver.close()
    connections = [received.connection for received in receiver.requests]
    assert len(set(connections[:3])) == 1  # one connection, kept alive
    assert connections[3] not in connections[:3]  # the other endpoint's own


async def test_an_endpoint_idle_for_two_minutes_of_the_clock_gets_a_new_connection() -> None:
    receiver, clock = Receiver(), ManualClock()
    sender = Sender("http://hub.test", LOOPBACK, timeout_s=5, clock=clock)
    idle, busy = endpoint("a", receiver.url + "/a"), endpoint("b", receiver.url + "/b")
    agent = Agent("agt_x", "x", "hash", 0)
    try:
        assert (await sender.send(idle, agent, event(1), 0)).ok
        clock.advance(IDLE_CLIENT_S + 1)
        assert (await sender.send(busy, agent, event(2), 0)).ok  # and closes the idle one's
        assert (await sender.send(idle, agent, event(3), 0)).ok
    finally:
        await sender.close()
        receiver.close()
    first, _, again = (received.connection for received in receiver.requests)
    assert again != first


class Rebinding:
    """A resolver whose name answers the receiver's address once, then somewhere else: the
    address a DNS-rebinding attacker swaps in between the check and the connection."""

    def __init__(self, first: str, then: str) -> None:
        self.answers = [first, then]
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        return [self.answers[min(len(self.asked), 2) - 1]]


async def test_the_request_goes_to_the_address_that_was_checked() -> None:
    receiver = Receiver()
    rebinding = Rebinding("127.0.0.1", then="169.254.169.254")
    sender = Sender("http://hub.test", LOOPBACK, timeout_s=5, resolver=rebinding)
    hook = endpoint("a", f"http://rebind.test:{receiver.port}/hook")
    try:
        outcome = await sender.send(hook, Agent("agt_x", "x", "hash", 0), event(1), 0)
    finally:
        await sender.close()
        receiver.close()
    assert outcome.ok, outcome.error
    (request,) = receiver.requests
    assert request.path == "/hook"
    assert request.headers["host"] == f"rebind.test:{receiver.port}"
    assert rebinding.asked == ["rebind.test"]  # resolved once: checked, then connected to


async def test_a_get_goes_to_the_checked_address_and_never_to_a_refused_one() -> None:
    receiver = Receiver(pages={"/doc": Page(200, {}, b"{}")})
    checked = Rebinding("127.0.0.1", then="169.254.169.254")
    sender = Sender("http://hub.test", LOOPBACK, timeout_s=5, resolver=checked)
    metadata = Rebinding("169.254.169.254", then="127.0.0.1")
    refusing = Sender("http://hub.test", LOOPBACK, timeout_s=5, resolver=metadata)
    url = f"http://rebind.test:{receiver.port}/doc"
    try:
        fetched, refused = await sender.fetch(url), await refusing.fetch(url)
    finally:
        await sender.close()
        await refusing.close()
        receiver.close()
    assert not isinstance(fetched, str) and (fetched.status_code, fetched.body) == (200, b"{}")
    assert isinstance(refused, str) and refused.startswith("connection_refused: "), refused
    assert receiver.gets == ["/doc"]  # once: the refused address was never called


async def test_a_proxy_named_in_the_environment_is_not_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through a proxy, the request would go where the proxy resolves the name, not to the
    address herald checked; and the receiver is told herald sent it."""
    receiver, proxy = Receiver(), Receiver()
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, proxy.url)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    sender = Sender("http://hub.test", LOOPBACK, timeout_s=5)
    hook = endpoint("a", receiver.url + "/hook")
    try:
        outcome = await sender.send(hook, Agent("agt_x", "x", "hash", 0), event(1), 0)
    finally:
        await sender.close()
        receiver.close()
        proxy.close()
    assert outcome.ok, outcome.error
    assert proxy.requests == []
    (request,) = receiver.requests
    assert request.headers["user-agent"] == f"herald/{herald.__version__}"


async def test_a_hosts_checked_addresses_are_kept_ten_seconds_of_the_clock() -> None:
    receiver, clock = Receiver(), ManualClock()
    resolver = Rebinding("127.0.0.1", then="127.0.0.1")
    sender = Sender("http://hub.test", LOOPBACK, timeout_s=5, resolver=resolver, clock=clock)
    hook = endpoint("a", f"http://hooks.test:{receiver.port}/hook")
    agent = Agent("agt_x", "x", "hash", 0)
    try:
        for n, seconds in enumerate([0, ADDRESS_CHECK_TTL_S - 0.1, 0.2, -60]):
            clock.advance(seconds)
            assert (await sender.send(hook, agent, event(n), 0)).ok
    finally:
        await sender.close()
        receiver.close()
    # Checked once; again once 10 s have passed; again when the clock is set back (an answer
    # kept from "the future" is not kept longer).
    assert resolver.asked == ["hooks.test"] * 3


async def test_a_host_that_resolves_elsewhere_once_its_answer_runs_out_is_sent_there() -> None:
    first, clock = Receiver(), ManualClock()
    second = Receiver(host="127.0.0.2", bind_port=first.port)
    resolver = Rebinding("127.0.0.1", then="127.0.0.2")
    sender = Sender("http://hub.test", LOOPBACK, timeout_s=5, resolver=resolver, clock=clock)
    hook = endpoint("a", f"http://hooks.test:{first.port}/hook")
    agent = Agent("agt_x", "x", "hash", 0)
    try:
        assert (await sender.send(hook, agent, event(1), 0)).ok
        clock.advance(ADDRESS_CHECK_TTL_S + 1)
        assert (await sender.send(hook, agent, event(2), 0)).ok
    finally:
        await sender.close()
        first.close()
        second.close()
    assert [request.json["id"] for request in first.requests] == ["evt_1"]
    assert [request.json["id"] for request in second.requests] == ["evt_2"]
    assert second.requests[0].headers["host"] == f"hooks.test:{first.port}"


@pytest.fixture
def certificate_authority(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> trustme.CA:
    """A CA that senders created from now on trust (as they would the system's)."""
    authority = trustme.CA()
    bundle = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    return authority


def tls_receiver(authority: trustme.CA, name: str) -> Receiver:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert(name).configure_cert(context)
    return Receiver(tls=context)


async def test_https_to_a_checked_address_keeps_the_names_sni_and_certificate_check(
    certificate_authority: trustme.CA,
) -> None:
    agent = Agent("agt_x", "x", "hash", 0)
    resolver = Rebinding("127.0.0.1", then="127.0.0.1")
    right, wrong = (
        tls_receiver(certificate_authority, "hooks.test"),
        tls_receiver(certificate_authority, "other.test"),
    )
    sender = Sender("http://hub.test", LOOPBACK, timeout_s=5, resolver=resolver)
    try:
        good = endpoint("a", f"https://hooks.test:{right.port}/hook")
        outcome = await sender.send(good, agent, event(1), 0)
        assert outcome.ok, outcome.error
        (request,) = right.requests
        assert right.server_names == ["hooks.test"]
        assert request.headers["host"] == f"hooks.test:{right.port}"
        # A certificate for another name is refused, as it would be without the pinning.
        bad = endpoint("b", f"https://hooks.test:{wrong.port}/hook")
        refused = await sender.send(bad, agent, event(2), 0)
        assert not refused.ok and "certificate" in (refused.error or "").lower()
        assert wrong.requests == []
    finally:
        await sender.close()
        right.close()
        wrong.close()


async def test_a_webhook_body_is_the_event_as_its_agent_sees_it() -> None:
    receiver = Receiver()
    sender = Sender("http://hub.test", LOOPBACK, timeout_s=5)
    sent = event(7)
    try:
        outcome = await sender.send(
            endpoint("a", receiver.url), Agent("agt_x", "x", "hash", 0), sent, 0
        )
    finally:
        await sender.close()
        receiver.close()
    assert outcome.ok
    (request,) = receiver.requests
    drained_view = sent.to_json()  # what the drain and the stream show
    del drained_view["status"]
    assert request.json == drained_view
    assert Event.from_json(request.json) == sent


Answer = Callable[[asyncio.StreamWriter, bytes], Awaitable[None]]


@contextlib.asynccontextmanager
async def answering(answer: Answer) -> AsyncIterator[str]:
    """A raw HTTP endpoint on loopback that reads each request and leaves its answer to
    ``answer`` (given the writer and the request's body); yields its URL."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"content-length: *(\d+)", head, re.I)[1])  # type: ignore[index]
            await answer(writer, await reader.readexactly(length))
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook"
    finally:
        server.close()


async def endless(writer: asyncio.StreamWriter, _: bytes) -> None:
    """A 200 whose body never ends, as fast as it is taken."""
    writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    chunk = b"x" * 65536
    while True:
        writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        await writer.drain()


async def dripping(writer: asyncio.StreamWriter, _: bytes) -> None:
    """An answer that comes a byte at a time, each well within a read timeout, without end."""
    writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    while True:
        writer.write(b"1\r\nx\r\n")
        await writer.drain()
        await asyncio.sleep(0.05)


def subscription(url: str) -> Endpoint:
    return Endpoint("end_s", "agt_x", Kind.SUBSCRIPTION, url, "whsec_" + "a" * 32, 0)


async def each_way(answer: Answer, timeout_s: float) -> tuple[SendOutcome, SendOutcome, str | None]:
    """A webhook, a subscription's delivery and its verification, each to an endpoint that
    answers with ``answer``; each must end well within the test's bound."""
    sender = Sender("http://hub.test", LOOPBACK, timeout_s=timeout_s)
    try:
        async with answering(answer) as url, asyncio.timeout(20):
            agent = Agent("agt_x", "x", "h", 0)
            sent = await sender.send(endpoint("a", url), agent, event(1), 0)
            signed = await sender.send_signed(subscription(url), "msg_1", {"type": "t"}, 0)
            return sent, signed, await sender.verify(subscription(url), 0)
    finally:
        await sender.close()


async def test_an_answer_without_end_is_read_only_so_far_and_a_2xx_still_delivers() -> None:
    sent, signed, verified = await each_way(endless, timeout_s=5)
    assert sent.ok and signed.ok
    assert verified is not None and verified.startswith("challenge_failed:")


async def test_an_answer_a_byte_at_a_time_runs_out_of_the_whole_timeout() -> None:
    sent, signed, verified = await each_way(dripping, timeout_s=0.5)
    assert (sent.ok, sent.error) == (False, "timed out")
    assert (signed.ok, signed.error) == (False, "timeout: timed out")
    assert verified == "timeout: timed out"


async def test_a_verification_echoed_in_an_answer_over_64_kib_fails() -> None:
    async def padded_echo(writer: asyncio.StreamWriter, body: bytes) -> None:
        challenge = json.loads(body)["challenge"]
        echo = json.dumps({"challenge": challenge, "pad": "x" * MAX_ANSWER_BYTES}).encode()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(echo), echo))
        await writer.drain()

    async def echo(writer: asyncio.StreamWriter, body: bytes) -> None:
        answer = json.dumps({"challenge": json.loads(body)["challenge"]}).encode()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(answer), answer))
        await writer.drain()

    sender = Sender("http://hub.test", LOOPBACK, timeout_s=5)
    try:
        async with answering(padded_echo) as padded, answering(echo) as plain:
            too_long = await sender.verify(subscription(padded), 0)
            verified = await sender.verify(subscription(plain), 0)
    finally:
        await sender.close()
    assert too_long is not None and too_long.startswith("challenge_failed:")
    assert verified is None
