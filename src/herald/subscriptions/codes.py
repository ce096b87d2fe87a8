"""The JSON-RPC error codes of the MCP Events extension (SEP-3415). Provisional in the SEP: kept
here, once, for the MCP handlers and the webhook envelopes alike."""

NOT_FOUND = -32023
FORBIDDEN = -32024
RESOURCE_EXHAUSTED = -32025
UNSUPPORTED = -32026
CALLBACK_ENDPOINT_ERROR = -32027
