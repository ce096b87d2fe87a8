"""Where a webhook may point, checked after DNS resolution."""

from __future__ import annotations

import pytest

from herald.errors import InvalidInput
from herald.webhooks.addresses import AddressPolicy, AddressRefused, check

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("url", "policy", "refused"),
    [
        ("http://127.0.0.1:8080/h", AddressPolicy(), "loopback"),
        ("http://localhost/h", AddressPolicy(), "loopback"),
        ("http://[::1]/h", AddressPolicy(), "loopback"),
        ("http://10.1.2.3/h", AddressPolicy(), "private"),
        ("http://192.168.0.10/h", AddressPolicy(allow_loopback=True), "private"),
        ("http://169.254.169.254/latest/meta-data", AddressPolicy(allow_private=True), "metadata"),
        ("http://169.254.10.10/h", AddressPolicy(allow_private=True), "link-local"),
        ("http://0.0.0.0/h", AddressPolicy(allow_loopback=True), "private"),
        ("http://does-not-resolve.invalid/h", AddressPolicy(), "resolve"),
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
        ("http://127.0.0.1:8080/h", AddressPolicy(allow_loopback=True)),
        ("http://10.1.2.3/h", AddressPolicy(allow_private=True)),
        ("https://93.184.215.14/h", AddressPolicy()),
    ],
)
async def test_allowed_addresses_pass(url: str, policy: AddressPolicy) -> None:
    await check(url, policy)


def test_the_policy_is_parsed_from_the_command_line() -> None:
    assert AddressPolicy.parse("loopback, private") == AddressPolicy(True, True)
    assert AddressPolicy.parse("") == AddressPolicy()
    with pytest.raises(InvalidInput, match="public"):
        AddressPolicy.parse("public")
