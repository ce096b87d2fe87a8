"""API keys: made here, shown once, kept only as a hash."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from herald.errors import InvalidInput

ADMIN_PREFIX = "herald_admin_"
AGENT_PREFIX = "herald_agent_"
PUBLISHER_PREFIX = "herald_pub_"
MIN_CHOSEN_KEY_CHARS = 32
"""A key chosen by an operator is as guessable as its length allows; generated ones have 56."""


def new_key(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    # Keys carry 256 random bits, so a plain SHA-256 cannot be brute-forced and, unlike a slow
    # password hash, lets the store look a key up by its hash on every request.
    return hashlib.sha256(key.encode()).hexdigest()


def matches(key: str, key_hash: str) -> bool:
    # Constant-time: how long the comparison takes says nothing about how much of it matched.
    return hmac.compare_digest(hash_key(key), key_hash)


def check_chosen_key(key: str, name: str) -> None:
    """Refuse a key an operator chose (``name`` says where it came from) that is easy to guess
    or that an ``Authorization: Bearer`` header cannot carry.

    Raises:
        InvalidInput: shorter than 32 characters, or not all visible ASCII.
    """
    if len(key) < MIN_CHOSEN_KEY_CHARS:
        raise InvalidInput(
            f"{name} must be at least {MIN_CHOSEN_KEY_CHARS} characters, not {len(key)}:"
            " choose a long random key, e.g. python3 -c 'import secrets;"
            " print(secrets.token_urlsafe(32))'"
        )
    if not all("!" <= char <= "~" for char in key):
        raise InvalidInput(
            f"{name} must be visible ASCII characters only (no spaces): it travels in an"
            " Authorization header"
        )
