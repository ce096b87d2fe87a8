"""Ids: globally unique, sortable by creation time, and checkable without asking the store."""

from __future__ import annotations

import os
import re
import threading
import time

# Crockford's base32 digits, whose order is also ASCII order; each 10 bits as two of them.
_DIGITS = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [high + low for high in _DIGITS for low in _DIGITS]


_last_id = [0, 0]
_id_lock = threading.Lock()


def new_id(prefix: str) -> str:
    """A globally unique id that sorts by creation time: 48 bits of milliseconds, 80 random bits,
    in 26 characters of Crockford base32. Within a millisecond, a process's ids still increase:
    the random part of the last one is counted up."""
    millis = time.time_ns() // 1_000_000
    with _id_lock:
        if millis <= _last_id[0]:
            millis, rand = _last_id[0], _last_id[1] + 1
        else:
            rand = int.from_bytes(os.urandom(10), "big") >> 1  # room to count up
        _last_id[0], _last_id[1] = millis, rand
    return prefix + _base32(millis << 80 | rand)


def _base32(value: int) -> str:
    """A 128-bit number in 26 digits, most significant first, the last padded with two zero
    bits (as RFC 4648's base32 of its 16 bytes, in Crockford's digits; a table of digit pairs
    makes it a third of the cost of ``base64.b32encode``, which an event pays as it is stored)."""
    padded = value << 2
    return "".join([_PAIRS[(padded >> shift) & 1023] for shift in range(120, -1, -10)])


_ID_BODY = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def is_id(value: str, prefix: str) -> bool:
    """Whether ``value`` could be an id that ``new_id(prefix)`` made. One that cannot (a typo,
    NUL, any other text) names nothing, and is answered so without asking the store."""
    return value.startswith(prefix) and _ID_BODY.fullmatch(value, len(prefix)) is not None
