"""Web origins as ``herald serve --cors-origin`` names them: written as a browser sends its
``Origin`` header (scheme, host and port, nothing else), so that one is compared with the other
as text."""

from __future__ import annotations

from urllib.parse import urlsplit

from herald.errors import InvalidInput

DEFAULT_PORTS = {"http": 80, "https": 443}
EXAMPLE = "such as https://app.example.com or http://localhost:5173"


def check_origin(origin: object, name: str) -> str:
    """``origin`` if it is one as browsers write it: ``http`` or ``https``, a lower-case host
    (IDNA-encoded: ``xn--...``), a port only when not the scheme's default, and no path.

    Raises:
        InvalidInput: naming ``name`` and, where it can tell, the origin to write instead.
    """
    if not isinstance(origin, str):
        raise InvalidInput(f"{name} must be a string {EXAMPLE}, not {origin!r}")
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError as exc:
        raise InvalidInput(f"{name} {origin!r} is not an origin {EXAMPLE}") from exc
    host = parts.hostname or ""
    if (
        parts.scheme.lower() not in DEFAULT_PORTS
        or not host
        or not host.isascii()
        or parts.username is not None
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or any(char.isspace() for char in origin)
    ):
        raise InvalidInput(
            f"{name} {origin!r} is not an origin {EXAMPLE}: an http or https scheme and a host"
            " (IDNA-encoded, xn--...), a port if need be, and nothing after them"
        )
    scheme = parts.scheme.lower()
    written = f"{scheme}://{f'[{host}]' if ':' in host else host}"
    if port is not None and port != DEFAULT_PORTS[scheme]:
        written += f":{port}"
    if written != origin:
        raise InvalidInput(f"{name} {origin!r} must be written as a browser sends it: {written!r}")
    return origin
