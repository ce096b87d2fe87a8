"""The JSON-RPC error codes of the MCP Events extension (SEP-3415). Provisional in the SEP: kept
here, once, for the MCP handlers and the webhook envelopes alike; and their counterparts in the
extension's earlier design sketch, for the clients built on it (``EventsProfile.error_codes``)."""

from herald.capabilities import ERROR_CODES_SKETCH, EventsProfile

NOT_FOUND = -32023
FORBIDDEN = -32024
RESOURCE_EXHAUSTED = -32025
UNSUPPORTED = -32026
CALLBACK_ENDPOINT_ERROR = -32027

SKETCH_CODES = {
    NOT_FOUND: -32011,
    FORBIDDEN: -32012,
    RESOURCE_EXHAUSTED: -32013,
    CALLBACK_ENDPOINT_ERROR: -32015,
}
"""Each code with a counterpart in the design sketch, to it: NotFound to EventNotFound,
Forbidden to Unauthorized, ResourceExhausted to TooManySubscriptions, CallbackEndpointError to
InvalidCallbackUrl. Unsupported has none: it is sent as it is."""
SKETCH_SUBSCRIPTION_NOT_FOUND = -32016
"""The sketch's SubscriptionNotFound: its NotFound of a subscription, not an event."""


def for_client(code: int, profile: EventsProfile, *, subscription: bool = False) -> int:
    """The code an Events error ``code`` is sent with to a client of ``profile``;
    ``subscription``: a NotFound names a subscription, not an event."""
    if profile.error_codes != ERROR_CODES_SKETCH:
        return code
    if code == NOT_FOUND and subscription:
        return SKETCH_SUBSCRIPTION_NOT_FOUND
    return SKETCH_CODES.get(code, code)
