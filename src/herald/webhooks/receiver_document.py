"""SEP-3415's receiver-published document: an origin that serves
``/.well-known/mcp-webhook-receiver.json`` as ``{"receivers": ["/hooks/"]}`` consents to MCP
webhook deliveries at every path under those prefixes, so a callback URL it covers is verified
without a challenge (control of the origin stands in for the echo).

The document is fetched the way deliveries are sent (``Sender.fetch``: the host's addresses
checked and pinned, no redirect followed, at most 64 KiB read, within the webhook timeout) and
taken only whole and well formed: a redirect, a body cut short, invalid JSON or another shape
covers nothing. It is fetched once per (agent, URL) verified, never cached: the verification it
gives is kept with the subscription, not the document.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit, urlunsplit

from herald.endpoint_checks import path_under
from herald.webhooks.sender import MAX_ANSWER_BYTES, Sender

PATH = "/.well-known/mcp-webhook-receiver.json"
SHOWN_PREFIXES = 3
"""How many of a document's prefixes a refusal shows (the document is the receiver's: a long
one is not repeated in full)."""


def document_url(callback: str) -> str:
    """Where the document of ``callback``'s origin is (same scheme, host and port)."""
    parts = urlsplit(callback)
    return urlunsplit((parts.scheme, parts.netloc, PATH, "", ""))


async def uncovered(sender: Sender, callback: str) -> str | None:
    """None if ``callback``'s origin publishes a document that covers its path; otherwise why
    not, as words that follow "the origin's /.well-known/mcp-webhook-receiver.json"."""
    answer = await sender.fetch(document_url(callback))
    if isinstance(answer, str):
        return f"could not be fetched ({answer})"
    status = answer.status_code
    if 300 <= status < 400:
        return f"answered HTTP {status}, a redirect (herald follows none: serve it in place)"
    if not 200 <= status < 300:
        return f"is not published (HTTP {status})"
    if answer.cut:
        return f"is over {MAX_ANSWER_BYTES} bytes (herald reads no more)"
    try:
        document = json.loads(answer.body)
    except (ValueError, RecursionError):
        return "is not JSON"
    prefixes = document.get("receivers") if isinstance(document, dict) else None
    if not isinstance(prefixes, list) or not all(
        isinstance(prefix, str) and prefix.startswith("/") for prefix in prefixes
    ):
        return 'is not {"receivers": [path prefixes, each starting with /]}'
    path = urlsplit(callback).path or "/"
    if any(path_under(path, prefix) for prefix in prefixes):
        return None
    shown = ", ".join(repr(prefix[:100]) for prefix in prefixes[:SHOWN_PREFIXES])
    more = f" and {len(prefixes) - SHOWN_PREFIXES} more" if len(prefixes) > SHOWN_PREFIXES else ""
    listed = f"lists {shown}{more}" if prefixes else "lists no receivers"
    return f"{listed}: none covers the path {path[:200]!r} (one with . or .. segments never is)"
