"""The Events extension's error codes, and their counterparts for clients built on its earlier
design sketch."""

from __future__ import annotations

import pytest

from herald.capabilities import ERROR_CODES_SKETCH, EventsProfile
from herald.subscriptions import codes

SKETCH = EventsProfile(error_codes=ERROR_CODES_SKETCH)


@pytest.mark.parametrize(
    ("code", "subscription", "sketched"),
    [
        (codes.NOT_FOUND, False, -32011),  # EventNotFound
        (codes.NOT_FOUND, True, -32016),  # SubscriptionNotFound
        (codes.FORBIDDEN, False, -32012),  # Unauthorized
        (codes.RESOURCE_EXHAUSTED, False, -32013),  # TooManySubscriptions
        (codes.CALLBACK_ENDPOINT_ERROR, False, -32015),  # InvalidCallbackUrl
        (codes.UNSUPPORTED, False, codes.UNSUPPORTED),  # no counterpart: as it is
        (-32602, False, -32602),  # JSON-RPC's own: every band
    ],
)
def test_each_code_has_its_counterpart_in_the_sketch_band_and_is_itself_in_the_seps(
    code: int, subscription: bool, sketched: int
) -> None:
    assert codes.for_client(code, SKETCH, subscription=subscription) == sketched
    assert codes.for_client(code, EventsProfile(), subscription=subscription) == code
