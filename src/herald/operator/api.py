"""The admin's side of a hub's HTTP API, for the operator's commands: one call, one answer, or
an ``OperatorError`` that says in one line what went wrong."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx2

from herald.errors import HeraldError
from herald.sse import ServerSentEvent, SSEDecoder

DEFAULT_URL = "http://127.0.0.1:8787"
BUSY = {429, 503}
BUSY_RETRIES = 20
"""How many times a call the hub answered 429 or 503 is made, waiting as it says in between."""
MAX_WAIT_S = 30.0


STREAM_READ_TIMEOUT_S = 60.0
"""A stream that says nothing for this long (the hub sends a keepalive every 15 s) is lost."""
MAX_STREAM_EVENT_CHARS = 1024 * 1024
"""Far over any item of the admin's feed."""


class OperatorError(HeraldError):
    """A command could not do what it was asked: the hub refused, or could not be reached."""


class HubRefused(OperatorError):
    """The hub answered a call with an error: ``status`` and the hub's own ``reason``."""

    def __init__(self, call: str, status: int, reason: str) -> None:
        super().__init__(f"{call}: {status} {reason}")
        self.status = status
        self.reason = reason


class StreamLost(OperatorError):
    """A stream could not be had or broke off, for a reason that may pass (the hub restarting,
    a network cut): following it again from its last id may work."""


class AdminApi:
    """Calls a hub with a key (the admin key, or a publisher key for ``send``)."""

    def __init__(self, url: str, key: str | None, *, timeout_s: float = 30.0) -> None:
        if not key:
            raise OperatorError(
                "no key: set HERALD_ADMIN_KEY (the key `herald serve` printed) or pass --key"
            )
        self.url = url.rstrip("/")
        self._http = httpx2.Client(
            base_url=self.url,
            headers={"authorization": f"Bearer {key}"},
            timeout=httpx2.Timeout(timeout_s),
        )

    def close(self) -> None:
        self._http.close()

    def get(self, path: str, **params: Any) -> Any:
        query = {name: value for name, value in params.items() if value is not None}
        return self.call("GET", path, params=query)

    def post(self, path: str, body: Any = None) -> Any:
        return self.call("POST", path, body=body)

    def put(self, path: str, body: Any) -> Any:
        return self.call("PUT", path, body=body)

    def delete(self, path: str) -> Any:
        return self.call("DELETE", path)

    def call(
        self, method: str, path: str, *, body: Any = None, params: dict[str, Any] | None = None
    ) -> Any:
        """The answer's JSON (None for an empty one).

        Raises:
            OperatorError: the hub could not be reached, or answered with an error (its
                message, which says what to change).
        """
        answer = self._request(method, path, json=body, params=params)
        return answer.json() if answer.content else None

    def post_body(self, path: str, body: bytes) -> bytes:
        """POST a body already JSON; returns the answer as it came (``send --file`` reads only
        what it needs of it).

        Raises:
            OperatorError: as ``call``.
        """
        headers = {"content-type": "application/json"}
        answer = self._request("POST", path, content=body, headers=headers)
        return answer.content

    def _request(self, method: str, path: str, **request: Any) -> httpx2.Response:
        for _ in range(BUSY_RETRIES):
            try:
                answer = self._http.request(method, path, **request)
            except httpx2.HTTPError as exc:
                raise OperatorError(f"cannot reach the hub at {self.url}: {exc}") from exc
            if answer.status_code not in BUSY:
                break
            # The hub asks to slow down (a publish rate limit, a full connection table).
            time.sleep(min(_retry_after(answer), MAX_WAIT_S))
        if answer.status_code >= 400:
            raise HubRefused(f"{method} {path}", answer.status_code, _error_message(answer))
        return answer

    def stream(
        self,
        path: str,
        params: dict[str, Any],
        last_event_id: str | None,
        opened: Callable[[], None] = lambda: None,
    ) -> Iterator[ServerSentEvent]:
        """The events of a Server-Sent Events stream as they come, from after
        ``last_event_id`` (None: where the hub starts it), until the hub ends it; ``opened``
        is called once the hub has answered, before any event.

        Raises:
            StreamLost: the hub could not be reached, failed, or the connection broke.
            OperatorError: the hub refused the request (its message says why).
        """
        headers = {"accept": "text/event-stream"}
        if last_event_id is not None:
            headers["last-event-id"] = last_event_id
        query = {name: value for name, value in params.items() if value is not None}
        timeout = httpx2.Timeout(30.0, read=STREAM_READ_TIMEOUT_S)
        try:
            with self._http.stream(
                "GET", path, params=query, headers=headers, timeout=timeout
            ) as answer:
                if answer.status_code >= 400:
                    answer.read()
                    failure = f"GET {path}: {answer.status_code} {_error_message(answer)}"
                    if answer.status_code in BUSY or answer.status_code >= 500:
                        raise StreamLost(failure)
                    raise OperatorError(failure)
                opened()
                decoder = SSEDecoder(max_event_chars=MAX_STREAM_EVENT_CHARS)
                for chunk in answer.iter_bytes():
                    yield from decoder.feed(chunk)
        except httpx2.HTTPError as exc:
            raise StreamLost(f"the stream from {self.url} broke: {exc}") from exc


def _retry_after(answer: httpx2.Response) -> float:
    try:
        return max(float(answer.headers.get("retry-after", "1")), 0.1)
    except ValueError:
        return 1.0


def _error_message(answer: httpx2.Response) -> str:
    try:
        message = answer.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return answer.text[:200] or answer.reason_phrase
    return str(message)
