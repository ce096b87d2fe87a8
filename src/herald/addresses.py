"""A webhook URL is user input: where it points is checked after DNS resolution, so that herald
cannot be made to call its own machine, a private network or a cloud's metadata service.

Every address a name resolves to is classified, IPv4 embedded in IPv6 (mapped, translated, NAT64,
6to4, compatible) as the IPv4 address it reaches. The tables follow IANA's IPv4 and IPv6
special-purpose address registries."""

from __future__ import annotations

import asyncio
import enum
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import SplitResult, urlsplit

from herald.errors import HeraldError, InvalidInput

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""``(host, port)`` to the addresses the host resolves to, as text; raises OSError if it does
not resolve."""

RESOLVE_TIMEOUT_S = 5.0


class AddressClass(enum.StrEnum):
    PUBLIC = "public"
    LOOPBACK = "loopback"
    PRIVATE = "private"
    LINK_LOCAL = "link-local"
    METADATA = "metadata"
    NOT_UNICAST = "multicast or broadcast"


DESCRIPTIONS = {
    AddressClass.LOOPBACK: "a loopback address",
    AddressClass.PRIVATE: "a private address",
    AddressClass.LINK_LOCAL: "a link-local address, never allowed",
    AddressClass.METADATA: "a cloud metadata address, never allowed",
    AddressClass.NOT_UNICAST: "a multicast or broadcast address, never allowed",
}
ALLOWABLE = (AddressClass.LOOPBACK, AddressClass.PRIVATE)
"""The classes ``herald serve --webhook-allow`` may name."""

METADATA = frozenset(
    ipaddress.ip_address(text)
    for text in (
        "169.254.169.254",  # AWS, GCP, Azure, OCI, DigitalOcean, Hetzner...
        "fd00:ec2::254",  # AWS over IPv6
        "100.100.100.200",  # Alibaba Cloud, in the shared address space
    )
)


def _networks(*texts: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(text) for text in texts)


# Checked in this order; what none of them holds is public.
TABLE = (
    (
        AddressClass.LOOPBACK,
        # The unspecified addresses connect to the local host.
        _networks("127.0.0.0/8", "0.0.0.0/32", "::1/128", "::/128"),
    ),
    (AddressClass.LINK_LOCAL, _networks("169.254.0.0/16", "fe80::/10")),
    (AddressClass.NOT_UNICAST, _networks("224.0.0.0/4", "255.255.255.255/32", "ff00::/8")),
    (
        AddressClass.PRIVATE,
        _networks(
            "0.0.0.0/8",  # "this network"
            "10.0.0.0/8",
            "100.64.0.0/10",  # shared address space (carrier-grade NAT, cloud internals)
            "172.16.0.0/12",
            "192.0.0.0/24",  # IETF protocol assignments
            "192.0.2.0/24",  # documentation
            "192.168.0.0/16",
            "198.18.0.0/15",  # benchmarking
            "198.51.100.0/24",  # documentation
            "203.0.113.0/24",  # documentation
            "240.0.0.0/4",  # reserved, used as private space by some networks
            "::/8",  # reserved (what embeds IPv4 in it is unwrapped first)
            "64:ff9b:1::/48",  # local-use IPv4/IPv6 translation
            "100::/64",  # discard-only
            "2001::/23",  # IETF protocol assignments, Teredo included
            "2001:db8::/32",  # documentation
            "3fff::/20",  # documentation
            "5f00::/16",  # segment routing
            "fc00::/7",  # unique local
            "fec0::/10",  # site-local, deprecated
        ),
    ),
)

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address reaches: IPv4-mapped, IPv4-translated, NAT64 (the
    well-known prefix), 6to4, or the deprecated IPv4-compatible form. None for any other."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    low = int(address) & 0xFFFF_FFFF
    if address in _NAT64 or address in _TRANSLATED:
        return ipaddress.IPv4Address(low)
    if address in _COMPATIBLE and int(address) > 1:  # not :: or ::1
        return ipaddress.IPv4Address(low)
    return None


def classify(address: Address) -> AddressClass:
    """The class of what connecting to ``address`` reaches."""
    if address in METADATA:
        return AddressClass.METADATA
    if isinstance(address, ipaddress.IPv6Address) and int(address) > 1:
        reached = embedded_ipv4(address)
        if reached is not None:
            return classify(reached)
    for address_class, networks in TABLE:
        if any(address in network for network in networks):
            return address_class
    return AddressClass.PUBLIC


class AddressRefused(InvalidInput):
    """The URL resolves to an address herald may not call; the message says which, and the
    ``herald serve --webhook-allow`` class that would allow it, if any."""

    code = "address_refused"


class Unresolvable(HeraldError):
    """The URL's host does not resolve now (DNS may be down): not a refusal, try again later."""

    code = "unresolvable"
    http_status = 422


@dataclass(frozen=True)
class AddressPolicy:
    """What the operator allows beyond public addresses (tests allow loopback explicitly)."""

    allow_loopback: bool = False
    allow_private: bool = False

    @staticmethod
    def parse(text: str) -> AddressPolicy:
        """``""``, ``"loopback"``, ``"private"`` or ``"loopback,private"``.

        Raises:
            InvalidInput: an unknown class.
        """
        words = {word.strip() for word in text.split(",") if word.strip()}
        unknown = words - set(ALLOWABLE)
        if unknown:
            raise InvalidInput(
                f"unknown address class(es) {sorted(unknown)}: use loopback, private"
            )
        return AddressPolicy("loopback" in words, "private" in words)

    def __str__(self) -> str:
        """The policy as ``parse`` reads it: ``""``, ``"loopback"``, ``"loopback,private"``."""
        allowed = [("loopback", self.allow_loopback), ("private", self.allow_private)]
        return ",".join(name for name, allows in allowed if allows)

    def allows(self, address_class: AddressClass) -> bool:
        return (
            address_class is AddressClass.PUBLIC
            or (address_class is AddressClass.LOOPBACK and self.allow_loopback)
            or (address_class is AddressClass.PRIVATE and self.allow_private)
        )


async def resolve(host: str, port: int) -> list[str]:
    """The system resolver (``getaddrinfo``). Raises: OSError: the host does not resolve."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class AddressGuard:
    """The policy, and the resolver it is checked with (the system's, or a test's)."""

    policy: AddressPolicy = field(default_factory=AddressPolicy)
    resolver: Resolver = resolve
    timeout_s: float = RESOLVE_TIMEOUT_S

    async def addresses(self, url: str) -> list[Address]:
        """Resolve the URL's host and return its addresses, every one of them allowed: the
        addresses to connect to, so that what is reached is what was checked.

        Raises:
            AddressRefused: an address is not allowed; the message names it and why.
            Unresolvable: the host does not resolve now.
        """
        parts = urlsplit(url)
        host = parts.hostname or ""
        literal = _literal(host)
        found = [literal] if literal is not None else await self._resolve(host, _port(parts))
        for address in found:
            address_class = classify(address)
            if not self.policy.allows(address_class):
                raise AddressRefused(_refusal(host, address, address_class))
        return found

    async def admit(self, url: str) -> str | None:
        """Check a URL as it is set: refused if it resolves to an address the policy refuses.
        A host that does not resolve now is accepted (DNS may be down: each delivery checks
        again, and a failure is retried); the answer is then a warning saying so.

        Raises:
            AddressRefused: an address is not allowed.
        """
        try:
            await self.addresses(url)
        except Unresolvable as exc:
            return (
                f"{exc.message}; it is accepted, and checked again before each delivery"
                " (one that cannot resolve is retried on the schedule)"
            )
        return None

    async def _resolve(self, host: str, port: int) -> list[Address]:
        try:
            async with asyncio.timeout(self.timeout_s):
                texts = await self.resolver(host, port)
            found = [ipaddress.ip_address(text) for text in texts]
        except TimeoutError as exc:
            raise Unresolvable(f"{host} did not resolve within {self.timeout_s:g} s") from exc
        except (OSError, UnicodeError, ValueError) as exc:
            raise Unresolvable(f"{host} does not resolve: {exc}") from exc
        if not found:
            raise Unresolvable(f"{host} does not resolve to any address")
        return found


async def check(url: str, policy: AddressPolicy, resolver: Resolver = resolve) -> list[Address]:
    """``AddressGuard(policy, resolver).addresses(url)``.

    Raises:
        AddressRefused: an address is not allowed. Unresolvable: the host does not resolve.
    """
    return await AddressGuard(policy, resolver).addresses(url)


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _port(parts: SplitResult) -> int:
    try:
        port = parts.port
    except ValueError:  # out of range: refused as the URL is set
        port = None
    return port or (443 if parts.scheme == "https" else 80)


def _refusal(host: str, address: Address, address_class: AddressClass) -> str:
    reached = (
        embedded_ipv4(address)
        if isinstance(address, ipaddress.IPv6Address) and int(address) > 1
        else None
    )
    literal = _literal(host) is not None
    shown = host if literal else str(address)
    if reached is not None:
        shown += f" (IPv4 {reached})"
    where = f"{shown} is" if literal else f"{host} resolves to {shown},"
    if address_class in ALLOWABLE:
        return (
            f"{where} {DESCRIPTIONS[address_class]};"
            f" herald serve --webhook-allow {address_class.value} allows it"
        )
    return f"{where} {DESCRIPTIONS[address_class]}"
