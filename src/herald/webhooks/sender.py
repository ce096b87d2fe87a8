"""One attempt at one endpoint: a Standard Webhooks POST, or an OpenClaw wake or agent hook."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import email.utils
import hmac
import json
import secrets
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pydantic_core
from standardwebhooks import Webhook

import herald
from herald.addresses import (
    Address,
    AddressGuard,
    AddressPolicy,
    AddressRefused,
    Resolver,
    Unresolvable,
    resolve,
)
from herald.config import DEFAULTS
from herald.models import REFUSED_PREFIX, Agent, Endpoint, Event, Kind
from herald.times import Clock

THROTTLED = {429, 502, 503, 504}
MAX_RETRY_AFTER_S = 24 * 3600.0
"""A receiver asking to wait longer than a day is tried again after a day."""
MAX_ERROR_CHARS = 300
ADDRESS_CHECK_TTL_S = 10.0
IDLE_CLIENT_S = 120.0
MAX_KEPT = 10_000
"""Checked hosts, pinned URLs and signers kept at most (then all of a kind are forgotten)."""
MAX_BODY_BYTES = 256 * 1024
"""The largest body sent to an Events webhook subscription (SEP-3415's bound)."""
MAX_ANSWER_BYTES = 64 * 1024
"""The most of an endpoint's answer that is read: its status and headers are what count (and a
verification's short echo); an endpoint sending more, or sending without end, cannot fill
herald's memory."""
SUBSCRIPTION_HEADER = "X-MCP-Subscription-Id"
USER_AGENT = f"herald/{herald.__version__}"
FINAL_STATUSES = {410, 413}
"""Answers that end one delivery to a subscription, and not the subscription (SEP-3415)."""


@dataclass(frozen=True)
class Answer:
    """An endpoint's answer: its status, its headers and at most ``MAX_ANSWER_BYTES`` of its
    body (``cut``: there was more, not read)."""

    status_code: int
    headers: httpx2.Headers
    body: bytes
    cut: bool

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


@dataclass(frozen=True)
class _Target:
    """Where a URL's requests go while its host's checked addresses are kept: the URL pinned to
    each address, in turn, and what keeps the host's name (the Host header; for HTTPS the SNI,
    which the certificate is checked against). Built once per URL and answer: pinning a URL
    parses it again, which costs more than the rest of a request's own work."""

    pinned: tuple[httpx2.URL, ...]
    headers: dict[str, str]
    extensions: dict[str, Any]
    """The request's: the SNI, and the timeouts of each step (connect, write, read)."""

    @staticmethod
    def of(url: str, addresses: list[Address], timeouts: dict[str, Any]) -> _Target:
        target = httpx2.URL(url)
        # Uncompressed: what is read of the answer is bounded as it comes over the wire.
        headers = {
            "host": target.netloc.decode("ascii"),
            "accept-encoding": "identity",
            "user-agent": USER_AGENT,
        }
        if target.username or target.password:
            # Credentials in the URL are sent as Basic auth, as an HTTP client would.
            pair = f"{target.username}:{target.password}".encode()
            headers["authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        extensions: dict[str, Any] = {"timeout": timeouts}
        if target.scheme == "https":
            extensions["sni_hostname"] = target.raw_host.decode("ascii")
        pinned = tuple(target.copy_with(host=str(address)) for address in addresses)
        return _Target(pinned, headers, extensions)


@dataclass(frozen=True)
class SendOutcome:
    """What came of one request to an endpoint (the worker turns it into the delivery's next
    step)."""

    ok: bool
    error: str | None = None
    status: int | None = None
    retry_after_s: float | None = None
    disable: bool = False
    """The endpoint refuses for good (410 Gone, a forbidden address): stop sending to it."""
    refused: bool = False
    """Its address is not allowed: the endpoint is disabled until ``--webhook-allow`` allows
    it, and the delivery waits for that (nothing was sent)."""
    final: bool = False
    """No more tries for this delivery; the endpoint stays (a subscription's 410 or 413, a body
    over ``MAX_BODY_BYTES``)."""


class Sender:
    """Sends one event to one endpoint and says what came of it; never raises.

    The endpoint's host is resolved and every address checked against the policy; the request
    then goes to a checked address (the Host header, TLS SNI and certificate check keep the
    host's name), so that a name resolving elsewhere by the time of connecting (DNS rebinding)
    reaches nothing unchecked.

    ``clock`` (seconds, like ``time.time``) times how long a host's checked addresses and an
    idle endpoint's connections are kept: give it the hub's clock, so that a test moving that
    clock moves these too."""

    def __init__(
        self,
        hub_url: str,
        policy: AddressPolicy,
        timeout_s: float = DEFAULTS.webhooks.timeout_s,
        *,
        resolver: Resolver = resolve,
        clock: Clock = time.time,
    ) -> None:
        self.hub_url = hub_url.rstrip("/")
        self.guard = AddressGuard(policy, resolver)
        self.timeout_s = timeout_s
        self.clock = clock
        self._clients = _Clients(timeout_s, clock)
        self._checked: dict[str, tuple[list[Address] | str, float]] = {}
        self._targets: dict[str, tuple[list[Address], _Target]] = {}
        """Each URL's target, with the checked answer it was built from."""
        self._signers: dict[str, Webhook] = {}
        """A ``Webhook`` per secret: each decodes its secret once, not once per request."""

    @property
    def policy(self) -> AddressPolicy:
        return self.guard.policy

    async def close(self) -> None:
        await self._clients.close()

    async def _addresses(self, url: str) -> list[Address]:
        """The URL's checked addresses; a host's answer is kept for a few seconds (connections
        are pooled anyway, and resolving costs more than the request).

        Raises:
            AddressRefused: an address is not allowed. Unresolvable: not now.
        """
        host = urlsplit(url).netloc
        now = self.clock()
        cached = self._checked.get(host)
        # An answer kept "longer" than the TTL is one from before the clock was set back.
        if cached is not None and 0 < cached[1] - now <= ADDRESS_CHECK_TTL_S:
            if isinstance(cached[0], str):
                raise AddressRefused(cached[0])
            return cached[0]
        try:
            answer: list[Address] | str = await self.guard.addresses(url)
        except AddressRefused as exc:
            answer = exc.message
        if len(self._checked) > MAX_KEPT:
            self._checked.clear()
        self._checked[host] = (answer, now + ADDRESS_CHECK_TTL_S)
        if isinstance(answer, str):
            raise AddressRefused(answer)
        return answer

    async def _target(self, url: str) -> _Target:
        """Where the URL's requests go (see ``_addresses``, which raises the same)."""
        addresses = await self._addresses(url)
        kept = self._targets.get(url)
        if kept is not None and kept[0] is addresses:  # the same answer, still kept
            return kept[1]
        if len(self._targets) > MAX_KEPT:
            self._targets.clear()
        target = _Target.of(url, addresses, self._clients.timeouts)
        self._targets[url] = (addresses, target)
        return target

    def _signed(
        self, endpoint: Endpoint, message_id: str, body: bytes, now_ms: int
    ) -> dict[str, str]:
        """The headers of a Standard Webhooks message: its id, time and the body's signature by
        each secret that signs now (two during a rotation)."""
        moment = datetime.datetime.fromtimestamp(now_ms / 1000, tz=datetime.UTC)
        signatures = []
        for secret in endpoint.signing_secrets(now_ms):
            signer = self._signers.get(secret)
            if signer is None:
                if len(self._signers) > MAX_KEPT:
                    self._signers.clear()
                signer = self._signers[secret] = Webhook(secret)
            signatures.append(signer.sign(message_id, moment, body))
        return {
            "content-type": "application/json",
            "webhook-id": message_id,
            "webhook-timestamp": str(int(moment.timestamp())),
            "webhook-signature": " ".join(signatures),
        }

    async def send(
        self, endpoint: Endpoint, agent: Agent, event: Event, now_ms: int
    ) -> SendOutcome:
        """Send ``event`` to ``endpoint``; ``now_ms`` is the hub's time, that the webhook is
        signed with and that a ``Retry-After`` date is counted from."""
        if endpoint.kind is Kind.WEBHOOK:
            url, body, headers = self._webhook(endpoint, event, now_ms)
        else:
            url, body, headers = self._openclaw(endpoint, agent, event)
        try:
            target = await self._target(url)
        except AddressRefused as exc:
            return SendOutcome(False, REFUSED_PREFIX + exc.message, disable=True, refused=True)
        except Unresolvable as exc:
            return SendOutcome(False, exc.message)  # DNS may be back by the next try
        try:
            response = await self._request("POST", endpoint.id, target, body, headers)
        except (httpx2.TimeoutException, TimeoutError):
            return SendOutcome(False, "timed out")
        except httpx2.HTTPError as exc:
            return SendOutcome(False, f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS])
        status = response.status_code
        if 200 <= status < 300:
            return SendOutcome(True, status=status)
        error = f"HTTP {status}: {response.text[:200]}".strip()
        if status == 410:
            return SendOutcome(False, error, status, disable=True)
        retry_after = _retry_after(response, now_ms) if status in THROTTLED else None
        return SendOutcome(False, error, status, retry_after_s=retry_after)

    async def send_signed(
        self, endpoint: Endpoint, message_id: str, payload: dict[str, Any], now_ms: int
    ) -> SendOutcome:
        """POST ``payload`` to an Events webhook subscription, signed (Standard Webhooks) as
        ``message_id`` at ``now_ms`` and tagged with its id. Each error starts with the kind
        SEP-3415 reports (``timeout``, ``http_5xx``...), a colon and the detail (see
        ``failure_kind``)."""
        body = pydantic_core.to_json(payload)  # compact UTF-8 JSON, in one pass
        if len(body) > MAX_BODY_BYTES:
            return SendOutcome(
                False,
                f"too_large: the body is {len(body)} bytes, over the {MAX_BODY_BYTES} a"
                " subscription is sent: not sent",
                final=True,
            )
        answer = await self._exchange(endpoint, message_id, body, now_ms)
        if isinstance(answer, SendOutcome):
            return answer
        status = answer.status_code
        if 200 <= status < 300:
            return SendOutcome(True, status=status)
        error = f"{_status_kind(status)}: HTTP {status}: {answer.text[:200]}".strip()
        if status in FINAL_STATUSES:
            return SendOutcome(False, error, status, final=True)
        retry_after = _retry_after(answer, now_ms) if status in THROTTLED else None
        return SendOutcome(False, error, status, retry_after_s=retry_after)

    async def verify(self, endpoint: Endpoint, now_ms: int) -> str | None:
        """Ask an Events webhook subscription's URL to confirm it wants deliveries: a signed
        ``verification`` with a single-use challenge, which a 2xx answer must echo. Returns
        None if it did, else the failure: its SEP-3415 kind, a colon and the detail."""
        challenge = secrets.token_urlsafe(24)
        payload = {"type": "verification", "challenge": challenge}
        body = json.dumps(payload, separators=(",", ":")).encode()
        message_id = f"msg_verification_{secrets.token_hex(12)}"
        answer = await self._exchange(endpoint, message_id, body, now_ms)
        if isinstance(answer, SendOutcome):
            return answer.error
        status = answer.status_code
        if not 200 <= status < 300:
            return f"{_status_kind(status)}: the endpoint answered HTTP {status}"
        try:
            echoed = None if answer.cut else json.loads(answer.body).get("challenge")
        except (ValueError, AttributeError, RecursionError):
            echoed = None
        if not isinstance(echoed, str) or not hmac.compare_digest(
            echoed.encode(), challenge.encode()
        ):
            return (
                'challenge_failed: the endpoint must answer {"challenge": "<the challenge it'
                ' was sent>"}'
            )
        return None

    async def _exchange(
        self, endpoint: Endpoint, message_id: str, body: bytes, now_ms: int
    ) -> Answer | SendOutcome:
        """One signed POST to a subscription's URL: its answer, or what kept it from coming."""
        headers = self._signed(endpoint, message_id, body, now_ms)
        headers[SUBSCRIPTION_HEADER] = endpoint.id
        try:
            target = await self._target(endpoint.url)
        except AddressRefused as exc:
            # Kept as the endpoint's disabled_reason, by which it is enabled again later.
            return SendOutcome(False, REFUSED_PREFIX + exc.message, disable=True, refused=True)
        except Unresolvable as exc:
            return SendOutcome(False, f"connection_refused: {exc.message}")
        try:
            return await self._request("POST", endpoint.id, target, body, headers)
        except (httpx2.TimeoutException, TimeoutError):
            return SendOutcome(False, "timeout: timed out")
        except httpx2.HTTPError as exc:
            kind = "tls_error" if _is_tls(exc) else "connection_refused"
            return SendOutcome(False, f"{kind}: {type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS])

    async def fetch(self, url: str) -> Answer | str:
        """GET ``url`` as a subscription's URL is POSTed to: its host's addresses checked and
        pinned, no redirect followed, at most ``MAX_ANSWER_BYTES`` read, all within
        ``timeout_s``. Returns the answer (whatever its status), or what kept it from coming:
        its SEP-3415 kind, a colon and the detail (as ``send_signed``'s errors)."""
        try:
            target = await self._target(url)
        except (AddressRefused, Unresolvable) as exc:
            return f"connection_refused: {exc.message}"
        headers = {"accept": "application/json"}
        try:
            return await self._request("GET", "GET " + url, target, None, headers)
        except (httpx2.TimeoutException, TimeoutError):
            return "timeout: timed out"
        except httpx2.HTTPError as exc:
            kind = "tls_error" if _is_tls(exc) else "connection_refused"
            return f"{kind}: {type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]

    async def _request(
        self,
        method: str,
        client_key: str,
        target: _Target,
        body: bytes | None,
        headers: dict[str, str],
    ) -> Answer:
        """Send to the checked addresses in turn, until one takes the connection; the whole
        exchange, answer included, within ``timeout_s`` (httpx's timeouts are per read: an
        endpoint answering a byte at a time would hold the request for ever). ``client_key``
        names the HTTP client whose connections it uses (an endpoint's id).

        Raises:
            httpx2.HTTPError: the last address failed. TimeoutError: ``timeout_s`` ran out.
        """
        headers = {**headers, **target.headers}
        extensions = target.extensions
        # Taken and given back without a context manager of generators: it is per request.
        client = self._clients.take(client_key)
        try:
            async with asyncio.timeout(self.timeout_s):
                pool = client.http
                for pinned in target.pinned[:-1]:
                    with contextlib.suppress(httpx2.ConnectError):
                        return await _answer(pool, method, pinned, body, headers, extensions)
                return await _answer(pool, method, target.pinned[-1], body, headers, extensions)
        finally:
            await self._clients.give_back(client)

    def _webhook(
        self, endpoint: Endpoint, event: Event, now_ms: int
    ) -> tuple[str, bytes, dict[str, str]]:
        # Compact UTF-8 JSON, encoded in one pass (signed and sent as these bytes).
        body = pydantic_core.to_json(event.to_agent_json())
        return endpoint.url, body, self._signed(endpoint, event.id, body, now_ms)

    def _openclaw(
        self, endpoint: Endpoint, agent: Agent, event: Event
    ) -> tuple[str, bytes, dict[str, str]]:
        text = (
            f"herald: new event for @{agent.handle}: [{event.type}] {event.text[:200]} "
            f"(seq {event.seq}). Drain your events with POST {self.hub_url}/channel/heartbeat "
            '{"cursor": <your last cursor>} and your herald key; sending the cursor back'
            " acknowledges what you got."
        )
        headers = {"authorization": f"Bearer {endpoint.secret}", "content-type": "application/json"}
        base = endpoint.url.rstrip("/")
        if endpoint.mode == "agent":
            headers["idempotency-key"] = event.id
            body = {"message": text, "name": "herald", "wakeMode": "now"}
            return f"{base}/hooks/agent", json.dumps(body).encode(), headers
        return f"{base}/hooks/wake", json.dumps({"text": text, "mode": "now"}).encode(), headers


async def _answer(
    pool: httpx2.AsyncHTTPTransport,
    method: str,
    url: httpx2.URL,
    body: bytes | None,
    headers: dict[str, str],
    extensions: dict[str, Any],
) -> Answer:
    """Send, and read at most ``MAX_ANSWER_BYTES`` of the answer (a connection left with more
    unread is closed, not reused).

    Sent by the transport itself: what a client adds to each request (its default headers,
    cookies, auth, redirects, event hooks) is nothing a webhook uses, and cost about as much as
    the rest of herald's work for one delivery."""
    request = httpx2.Request(method, url, content=body, headers=headers, extensions=extensions)
    response = await pool.handle_async_request(request)
    try:
        read = bytearray()
        async for chunk in response.aiter_raw():
            read += chunk
            if len(read) > MAX_ANSWER_BYTES:
                return Answer(
                    response.status_code, response.headers, bytes(read[:MAX_ANSWER_BYTES]), True
                )
        return Answer(response.status_code, response.headers, bytes(read), False)
    finally:
        await response.aclose()


@dataclass
class _Client:
    http: httpx2.AsyncHTTPTransport
    requests: int = 0
    used_at: float = 0.0


class _Clients:
    """One connection pool per endpoint, closed once it has been idle a while.

    An endpoint's connections stay its own: each request checks only the few idle connections
    of its endpoint's pool (a pool shared by all endpoints checks every one of them, on every
    request), and a hanging endpoint holds only its own. Connections are reused across
    requests, up to as many as the worker sends to one endpoint at once. Redirects are never
    followed (a transport does not), and no proxy is taken from the environment: a request
    goes to the address that was checked."""

    def __init__(self, timeout_s: float, clock: Clock) -> None:
        self.timeouts = httpx2.Timeout(timeout_s).as_dict()
        """Each request's timeouts (connect, write, read, pool), as its extensions carry them."""
        self._ssl = httpx2.create_ssl_context()  # shared: building one costs tens of ms
        self._clients: dict[str, _Client] = {}
        self._clock = clock
        self._swept_at = clock()

    def take(self, endpoint_id: str) -> _Client:
        """The endpoint's pool, for one request: ``give_back`` it when the request is done."""
        client = self._clients.get(endpoint_id)
        if client is None:
            client = self._clients[endpoint_id] = _Client(
                httpx2.AsyncHTTPTransport(verify=self._ssl)
            )
        client.requests += 1
        return client

    async def give_back(self, client: _Client) -> None:
        client.requests -= 1
        client.used_at = self._clock()
        # A clock set back sweeps too (and counts the clients it left behind as idle): waiting
        # for it to catch up would keep idle connections open for as long.
        if not 0 <= client.used_at - self._swept_at <= IDLE_CLIENT_S:
            await self._sweep(client.used_at)

    async def _sweep(self, now: float) -> None:
        self._swept_at = now
        idle = [
            key
            for key, client in self._clients.items()
            if not client.requests and not now - IDLE_CLIENT_S <= client.used_at <= now
        ]
        for key in idle:
            await self._clients.pop(key).http.aclose()

    async def close(self) -> None:
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.http.aclose()


FAILURE_KINDS = (
    "connection_refused",
    "timeout",
    "tls_error",
    "http_4xx",
    "http_5xx",
    "challenge_failed",
)
"""How SEP-3415 names what went wrong with a subscription's endpoint."""


def failure_kind(error: str | None) -> str | None:
    """The SEP-3415 kind of an error ``send_signed`` or ``verify`` gave (an address refused
    counts as a connection refused; a body too large, as a 4xx); None for no error."""
    if error is None:
        return None
    kind = error.split(":", 1)[0]
    if kind in FAILURE_KINDS:
        return kind
    return "http_4xx" if kind == "too_large" else "connection_refused"


def _status_kind(status: int) -> str:
    return "http_5xx" if status >= 500 else "http_4xx" if status >= 400 else "challenge_failed"


def _is_tls(exc: BaseException) -> bool:
    """Whether a failed request failed in its TLS handshake (the certificate, say)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError) or "SSL" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _retry_after(response: Answer, now_ms: int) -> float | None:
    """The wait an answer asks for, in seconds, at most ``MAX_RETRY_AFTER_S``; None if it asks
    none or says it in a form HTTP does not know (non-ASCII digits, say). A date is counted
    from ``now_ms``, the hub's time, which the retry is scheduled in."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.isascii() and value.isdigit():
        return min(float(value), MAX_RETRY_AFTER_S)  # float: a long one is inf, not an error
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return min(max(moment.timestamp() - now_ms / 1000, 0.0), MAX_RETRY_AFTER_S)
