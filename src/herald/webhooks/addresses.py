"""A webhook URL is user input: where it points is checked after DNS resolution, so that herald
cannot be made to call its own machine, a private network or a cloud's metadata service."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from herald.errors import InvalidInput

METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}


class AddressRefused(Exception):
    """The URL resolves to an address herald may not call."""


@dataclass(frozen=True)
class AddressPolicy:
    """What the operator allows beyond public addresses (tests allow loopback explicitly)."""

    allow_loopback: bool = False
    allow_private: bool = False

    @staticmethod
    def parse(text: str) -> AddressPolicy:
        """``""``, ``"loopback"``, ``"private"`` or ``"loopback,private"``."""
        words = {word.strip() for word in text.split(",") if word.strip()}
        unknown = words - {"loopback", "private"}
        if unknown:
            raise InvalidInput(
                f"unknown address class(es) {sorted(unknown)}: use loopback, private"
            )
        return AddressPolicy("loopback" in words, "private" in words)


async def check(url: str, policy: AddressPolicy) -> None:
    """Resolve the URL's host and refuse it unless every address it resolves to is allowed.

    Raises:
        AddressRefused: naming the address and why.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise AddressRefused(f"{host} does not resolve: {exc}") from exc
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        reason = _refusal(address, policy)
        if reason:
            raise AddressRefused(f"{host} resolves to {address}, {reason}")


def _refusal(address: ipaddress.IPv4Address | ipaddress.IPv6Address, policy: AddressPolicy) -> str:
    if address in METADATA:
        return "a cloud metadata address"
    if address.is_loopback:
        return "" if policy.allow_loopback else "a loopback address (allow it with loopback)"
    if address.is_link_local:
        return "a link-local address"
    if address.is_private or address.is_reserved or address.is_unspecified or address.is_multicast:
        return "" if policy.allow_private else "a private address (allow it with private)"
    return ""
