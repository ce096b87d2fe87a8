"""What an endpoint's settings must be: its URL, its signing secret, the retry schedule."""

from __future__ import annotations

import base64
import re
import secrets
from typing import Any
from urllib.parse import SplitResult, quote, unquote, urlsplit

import httpx2

from herald.errors import InvalidInput

SECRET_PREFIX = "whsec_"
_HOST = re.compile(r"[A-Za-z0-9_.-]+|[0-9A-Fa-f:.]+")
"""A host name (IDNA-encoded), an IPv4 address or an IPv6 one (without its brackets)."""

# RFC 3986's characters, part by part: unreserved and sub-delims everywhere, and what each part
# adds; any other byte is written percent-encoded (%XX). A URL kept as given with a space, a quote
# or <> in it is not one every client sends alike, nor one a log line or a page shows safely.
_UNRESERVED_AND_SUB_DELIMS = (
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;="
)
_PARTS = (
    ("user information", frozenset(_UNRESERVED_AND_SUB_DELIMS + ":")),
    ("path", frozenset(_UNRESERVED_AND_SUB_DELIMS + ":@/")),
    ("query", frozenset(_UNRESERVED_AND_SUB_DELIMS + ":@/?")),
    ("fragment", frozenset(_UNRESERVED_AND_SUB_DELIMS + ":@/?")),
)
_PERCENT_ENCODED = re.compile(r"%[0-9A-Fa-f]{2}")
_RFC3986_PARTS = re.compile(r"(([^:/?#]+):)?(//([^/?#]*))?([^?#]*)(\?([^#]*))?(#(.*))?", re.DOTALL)
"""RFC 3986's own expression (its appendix B) for splitting a URL into its parts, which keeps
every character (``urlsplit`` drops tabs and line feeds)."""


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def check_secret(secret: Any) -> str:
    """Raises: InvalidInput unless ``whsec_`` + base64 of at least 24 bytes."""
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        raise InvalidInput("a webhook secret starts with whsec_ followed by base64")
    try:
        raw = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except ValueError as exc:
        raise InvalidInput("a webhook secret is whsec_ followed by base64") from exc
    if len(raw) < 24:
        raise InvalidInput("a webhook secret needs at least 24 random bytes (32 is usual)")
    return secret


SUBSCRIPTION_SECRET_BYTES = (24, 64)
"""How many random bytes an MCP Events subscription's secret holds, at least and at most."""


def check_subscription_secret(secret: Any, name: str) -> str:
    """An MCP Events webhook subscription's secret, as SEP-3415 has the client make it.

    Raises:
        InvalidInput: unless ``whsec_`` + standard base64 of 24-64 bytes; the message begins
            with ``name``.
    """
    low, high = SUBSCRIPTION_SECRET_BYTES
    says = f"must be whsec_ followed by the standard base64 of {low}-{high} random bytes"
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        raise InvalidInput(f"{name} {says}")
    try:
        raw = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except ValueError as exc:
        raise InvalidInput(f"{name} {says}: what follows whsec_ is not base64") from exc
    if not low <= len(raw) <= high:
        raise InvalidInput(f"{name} {says}, not {len(raw)}")
    return secret


def check_url(url: Any, name: str) -> str:
    """Raises: InvalidInput unless an absolute http(s) URL, valid by RFC 3986 (the message
    names the first character that is not, and its part), with a valid host and port (where the
    host points is checked by ``herald.addresses``)."""
    if not isinstance(url, str) or len(url) > 2048:
        raise InvalidInput(f"{name} must be an http or https URL of at most 2048 characters")
    _check_characters(url, name)
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise InvalidInput(f"{name} {url!r} must be an absolute http or https URL")
    try:
        httpx2.URL(url)
        parts.port  # noqa: B018 (it raises on a port out of range)
        host = parts.hostname.encode("idna").decode("ascii")
    except (httpx2.InvalidURL, ValueError, UnicodeError) as exc:
        raise InvalidInput(f"{name} {url!r} is not a URL herald can call: {exc}") from exc
    if not _HOST.fullmatch(host):
        raise InvalidInput(f"{name} {url!r} needs a host name of letters, digits, - and .")
    return url


def check_url_prefix(prefix: Any, name: str) -> str:
    """A prefix of callback URLs (``https://hooks.example.com/mcp/``): an absolute http(s) URL
    as ``check_url`` takes, without credentials, a query or a fragment (it is matched against
    a URL's origin and path, see ``under_prefix``).

    Raises:
        InvalidInput: naming ``name`` and what to write instead.
    """
    check_url(prefix, name)
    parts = urlsplit(prefix)
    if "@" in parts.netloc or "?" in prefix or "#" in prefix:
        raise InvalidInput(
            f"{name} {prefix!r} must be an origin and a path, such as"
            " https://hooks.example.com/mcp/, without credentials, a query or a fragment"
        )
    return str(prefix)


def under_prefix(url: str, prefix: str) -> bool:
    """Whether ``url`` is under ``prefix`` (one ``check_url_prefix`` took): the same scheme, host
    and port, and a path that ``path_under`` the prefix's (end the prefix with / to take one
    folder only: ``/mcp`` is a prefix of ``/mcp-other`` too)."""
    parts, base = urlsplit(url), urlsplit(prefix)
    return _origin(parts) == _origin(base) and path_under(parts.path, base.path)


def path_under(path: str, prefix: str) -> bool:
    """Whether the URL path ``path`` starts with ``prefix`` (an empty path is ``/``), compared
    as written: a path with a ``.`` or ``..`` segment (percent-encoded or not) is under none,
    since the server it reaches may resolve it to somewhere else."""
    path, prefix = path or "/", prefix or "/"
    segments = unquote(path).split("/")
    return "." not in segments and ".." not in segments and path.startswith(prefix)


def _origin(parts: SplitResult) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port or default


def _check_characters(url: str, name: str) -> None:
    """Raises: InvalidInput at the first character RFC 3986 does not allow where it is."""
    parts = _RFC3986_PARTS.fullmatch(url)
    assert parts is not None  # the expression matches any text
    authority, path, query, fragment = parts.group(4, 5, 7, 9)
    user_information, _, host = (authority or "").rpartition("@")
    if not host.isascii():
        raise InvalidInput(
            f"{name} {url!r} is not a valid URL (RFC 3986): its host holds characters outside"
            " ASCII; write the name in its ASCII form (xn--..., as IDNA makes it)"
        )
    texts = (user_information, path, query, fragment)
    for (part, allowed), text in zip(_PARTS, texts, strict=True):
        fault = _first_fault(text or "", allowed)
        if fault is not None:
            raise InvalidInput(f"{name} {url!r} is not a valid URL (RFC 3986): its {part} {fault}")


def _first_fault(text: str, allowed: frozenset[str]) -> str | None:
    index = 0
    while index < len(text):
        char = text[index]
        if char == "%":
            if not _PERCENT_ENCODED.match(text, index):
                return "holds a % not followed by two hex digits; write a % as %25"
            index += 3
        elif char not in allowed:
            encoded = quote(char, safe="", errors="surrogatepass")
            return f"holds {char!r}; percent-encode it (as {encoded})"
        else:
            index += 1
    return None


def parse_schedule(text: str) -> tuple[int, ...]:
    """A retry schedule written as seconds, comma-separated (``0,5,300``).

    Raises:
        InvalidInput: not a list of whole seconds, or empty.
    """
    try:
        schedule = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise InvalidInput(f"a retry schedule is whole seconds with commas, not {text!r}") from exc
    if not schedule or any(delay < 0 for delay in schedule):
        raise InvalidInput("a retry schedule needs at least one delay, none negative")
    return schedule
