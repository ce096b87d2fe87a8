"""API keys: made here, shown once, kept only as a hash."""

from __future__ import annotations

import hashlib
import hmac
import secrets

ADMIN_PREFIX = "herald_admin_"
AGENT_PREFIX = "herald_agent_"


def new_key(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    # Keys carry 256 random bits, so a plain SHA-256 cannot be brute-forced and, unlike a slow
    # password hash, lets the store look a key up by its hash on every request.
    return hashlib.sha256(key.encode()).hexdigest()


def matches(key: str, key_hash: str) -> bool:
    return hmac.compare_digest(hash_key(key), key_hash)
