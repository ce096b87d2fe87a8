"""The operator's calls to a hub: over HTTPS its certificate is checked; over HTTP no CA is
loaded for it."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme

from herald.operator.api import AdminApi, OperatorError
from tests.webhooks.receiver import Receiver


@pytest.fixture
def certificate_authority(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> trustme.CA:
    """A CA that calls made from now on trust (as they would the system's)."""
    authority = trustme.CA()
    bundle = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    return authority


def tls_receiver(authority: trustme.CA, name: str) -> Receiver:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert(name).configure_cert(context)
    return Receiver(tls=context)


def test_an_https_hub_is_reached_only_with_a_certificate_for_its_name(
    certificate_authority: trustme.CA,
) -> None:
    right = tls_receiver(certificate_authority, "127.0.0.1")
    wrong = tls_receiver(certificate_authority, "other.test")
    try:
        api = AdminApi(f"https://127.0.0.1:{right.port}", "key")
        assert api.post_body("/v1/events", b"[]") == b"{}"
        api.close()
        api = AdminApi(f"https://127.0.0.1:{wrong.port}", "key")
        with pytest.raises(OperatorError, match=r"cannot reach the hub.*certificate"):
            api.post_body("/v1/events", b"[]")
        api.close()
    finally:
        right.close()
        wrong.close()
    assert len(right.requests) == 1 and wrong.requests == []
