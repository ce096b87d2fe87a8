"""Where a webhook may point, checked after DNS resolution."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

import pytest

from herald.addresses import (
    AddressClass,
    AddressGuard,
    AddressPolicy,
    AddressRefused,
    Resolver,
    Unresolvable,
    check,
    classify,
)
from herald.errors import InvalidInput

pytestmark = pytest.mark.anyio

LOOPBACK = AddressPolicy(allow_loopback=True)
PRIVATE = AddressPolicy(allow_private=True)
BOTH = AddressPolicy(allow_loopback=True, allow_private=True)


@pytest.mark.parametrize(
    ("url", "policy", "refused"),
    [
        ("http://127.0.0.1:8080/h", AddressPolicy(), "loopback"),
        ("http://localhost/h", AddressPolicy(), "loopback"),
        ("http://[::1]/h", AddressPolicy(), "loopback"),
        ("http://10.1.2.3/h", AddressPolicy(), "private"),
        ("http://192.168.0.10/h", LOOPBACK, "private"),
        ("http://169.254.169.254/latest/meta-data", PRIVATE, "metadata"),
        ("http://169.254.10.10/h", PRIVATE, "link-local"),
        # What connects to the local host is loopback, however it is written.
        ("http://0.0.0.0/h", PRIVATE, "loopback"),
        ("http://[::]/h", PRIVATE, "loopback"),
        ("http://[::ffff:127.0.0.1]/h", PRIVATE, "loopback"),
        ("http://[::ffff:0:127.0.0.1]/h", PRIVATE, "loopback"),  # IPv4-translated
        ("http://[64:ff9b::127.0.0.1]/h", PRIVATE, "loopback"),  # NAT64
        ("http://[2002:7f00:1::1]/h", PRIVATE, "loopback"),  # 6to4
        ("http://[::127.0.0.1]/h", PRIVATE, "loopback"),  # IPv4-compatible
        # Metadata, in any form, is never allowed.
        ("http://[::ffff:169.254.169.254]/h", BOTH, "metadata"),
        ("http://[64:ff9b::169.254.169.254]/h", BOTH, "metadata"),
        ("http://[2002:a9fe:a9fe::1]/h", BOTH, "metadata"),
        ("http://100.100.100.200/latest/meta-data", AddressPolicy(), "metadata"),
        ("http://100.100.100.200/latest/meta-data", BOTH, "metadata"),
        ("http://[fd00:ec2::254]/h", BOTH, "metadata"),
        ("http://[::ffff:10.0.0.1]/h", LOOPBACK, "private"),
        ("http://100.64.0.1/h", AddressPolicy(), "private"),  # shared address space
        ("http://[fe80::1]/h", BOTH, "link-local"),
        ("http://224.0.0.1/h", BOTH, "multicast"),
        ("http://255.255.255.255/h", BOTH, "broadcast"),
    ],
)
async def test_addresses_herald_may_not_call_are_refused(
    url: str, policy: AddressPolicy, refused: str
) -> None:
    with pytest.raises(AddressRefused, match=refused):
        await check(url, policy)


@pytest.mark.parametrize(
    ("url", "policy"),
    [
        ("http://127.0.0.1:8080/h", LOOPBACK),
        ("http://0.0.0.0/h", LOOPBACK),
        ("http://[::ffff:127.0.0.1]/h", LOOPBACK),
        ("http://10.1.2.3/h", PRIVATE),
        ("http://100.64.0.1/h", PRIVATE),
        ("https://93.184.215.14/h", AddressPolicy()),
        ("https://[::ffff:93.184.215.14]/h", AddressPolicy()),
        ("https://[2606:4700:4700::1111]/h", AddressPolicy()),
    ],
)
async def test_allowed_addresses_pass(url: str, policy: AddressPolicy) -> None:
    await check(url, policy)


# Against IANA's IPv4 and IPv6 special-purpose address registries (and the multicast ones), an
# address from each block, as the class it is given.
REGISTRY = {
    AddressClass.LOOPBACK: ["127.0.0.1", "127.255.255.254", "0.0.0.0", "::1", "::"],
    AddressClass.PRIVATE: [
        "0.1.2.3",
        "10.0.0.1",
        "100.64.0.1",
        "100.127.255.254",
        "172.16.0.1",
        "172.31.255.254",
        "192.0.0.8",
        "192.0.2.1",
        "192.168.1.1",
        "198.18.0.1",
        "198.19.255.254",
        "198.51.100.1",
        "203.0.113.1",
        "240.0.0.1",
        "64:ff9b:1::1",
        "100::1",
        "2001::1",  # Teredo
        "2001:2::1",
        "2001:db8::1",
        "3fff::1",
        "5f00::1",
        "fc00::1",
        "fd12:3456::1",
        "fec0::1",
    ],
    AddressClass.LINK_LOCAL: ["169.254.0.1", "169.254.170.2", "fe80::1", "febf::1"],
    AddressClass.METADATA: ["169.254.169.254", "100.100.100.200", "fd00:ec2::254"],
    AddressClass.NOT_UNICAST: ["224.0.0.1", "239.255.255.250", "255.255.255.255", "ff02::1"],
    AddressClass.PUBLIC: [
        "1.1.1.1",
        "8.8.8.8",
        "100.63.255.255",
        "100.128.0.0",
        "172.15.255.255",
        "172.32.0.1",
        "192.88.99.1",
        "198.20.0.1",
        "223.255.255.254",
        "2606:4700:4700::1111",
        "2001:4860:4860::8888",
        "2a00:1450::1",
    ],
}


@pytest.mark.parametrize(
    ("address", "expected"),
    [(address, cls) for cls, addresses in REGISTRY.items() for address in addresses],
)
def test_each_address_block_has_its_class(address: str, expected: AddressClass) -> None:
    assert classify(ipaddress.ip_address(address)) is expected


def ipv6_forms(ipv4: str) -> list[ipaddress.IPv6Address]:
    """The IPv6 addresses that reach ``ipv4``: mapped, translated, NAT64, 6to4, compatible."""
    value = int(ipaddress.IPv4Address(ipv4))
    forms = [f"::ffff:{ipv4}", f"::ffff:0:{ipv4}", f"64:ff9b::{ipv4}"]
    if value > 1:  # :: and ::1 are IPv6's own
        forms.append(f"::{ipv4}")
    six_to_four = ipaddress.IPv6Address((0x2002 << 112) | (value << 80))
    return [ipaddress.IPv6Address(form) for form in forms] + [six_to_four]


@pytest.mark.parametrize(
    "ipv4", [address for addresses in REGISTRY.values() for address in addresses if "." in address]
)
def test_ipv4_embedded_in_ipv6_has_the_class_of_the_ipv4_it_reaches(ipv4: str) -> None:
    reached = classify(ipaddress.ip_address(ipv4))
    assert {form: classify(form) for form in ipv6_forms(ipv4)} == dict.fromkeys(
        ipv6_forms(ipv4), reached
    )


def resolver_of(answers: dict[str, list[str]]) -> Resolver:
    """A resolver that knows only these names."""

    async def resolve(host: str, port: int) -> Sequence[str]:
        if host not in answers:
            raise OSError(f"{host}: no such name")
        return answers[host]

    return resolve


async def test_every_address_a_name_resolves_to_is_checked() -> None:
    guard = AddressGuard(PRIVATE, resolver_of({"mixed.test": ["10.0.0.5", "127.0.0.1"]}))
    with pytest.raises(AddressRefused) as refused:
        await guard.addresses("https://mixed.test/h")
    assert refused.value.message == (
        "mixed.test resolves to 127.0.0.1, a loopback address;"
        " herald serve --webhook-allow loopback allows it"
    )
    allowed = AddressGuard(BOTH, guard.resolver)
    addresses = await allowed.addresses("https://mixed.test/h")
    assert [str(a) for a in addresses] == ["10.0.0.5", "127.0.0.1"]


async def test_a_name_that_does_not_resolve_is_not_a_refusal() -> None:
    guard = AddressGuard(AddressPolicy(), resolver_of({}))
    with pytest.raises(Unresolvable, match="does not resolve"):
        await guard.addresses("https://gone.test/h")
    warning = await guard.admit("https://gone.test/h")
    assert warning is not None and "checked again before each delivery" in warning
    with pytest.raises(Unresolvable, match="does not resolve"):
        await check("http://does-not-resolve.invalid/h", AddressPolicy())


def test_the_policy_is_parsed_from_the_command_line() -> None:
    assert AddressPolicy.parse("loopback, private") == AddressPolicy(True, True)
    assert AddressPolicy.parse("") == AddressPolicy()
    with pytest.raises(InvalidInput, match="public"):
        AddressPolicy.parse("public")
