"""How an Events webhook subscription's endpoint is verified before anything is delivered to it.

SEP-3415 takes any one of its ways; herald tries them cheapest first: a callback URL under a
prefix the operator allows (``herald serve --subscription-allow``), then the document its origin
publishes (``receiver_document``), then the signed challenge the endpoint must echo
(``Sender.verify``). The allowlist waives verification only: where a URL may point is still the
address policy's (``--webhook-allow``), checked before and as each request is sent.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from herald.endpoint_checks import under_prefix
from herald.errors import CallbackEndpointError
from herald.models import Endpoint
from herald.webhooks import receiver_document
from herald.webhooks.sender import Sender, failure_kind


class Way(enum.StrEnum):
    """How an endpoint was verified."""

    ALLOWLIST = "allowlist"
    RECEIVER_DOCUMENT = "receiver document"
    CHALLENGE = "challenge"


def allowed(url: str, prefixes: Sequence[str]) -> bool:
    """Whether ``url`` is under one of the operator's ``prefixes``."""
    return any(under_prefix(url, prefix) for prefix in prefixes)


async def verify(sender: Sender, endpoint: Endpoint, allow: Sequence[str], now_ms: int) -> Way:
    """Verify ``endpoint``'s URL for its subscription (the challenge is signed with its secret
    at ``now_ms``); ``allow`` are the operator's prefixes.

    Raises:
        CallbackEndpointError: no way verified it; the message says why each failed, ``reason``
            is the challenge's SEP-3415 kind.
    """
    if allowed(endpoint.url, allow):
        return Way.ALLOWLIST
    why_not = await receiver_document.uncovered(sender, endpoint.url)
    if why_not is None:
        return Way.RECEIVER_DOCUMENT
    failure = await sender.verify(endpoint, now_ms)
    if failure is None:
        return Way.CHALLENGE
    path = receiver_document.PATH
    raise CallbackEndpointError(
        f"params.delivery.url did not pass verification: the signed challenge failed ({failure}),"
        f" and the origin's {path} {why_not}. Answer the signed"
        ' {"type":"verification","challenge":...} POST with 2xx and {"challenge": <the same'
        f' challenge>}}, or publish {path} at the URL\'s origin as {{"receivers": [<a path'
        " prefix of the URL>]}",
        failure_kind(failure) or "challenge_failed",
    )
