"""Ids: globally unique, sortable by creation time, and checkable without asking the store."""

from __future__ import annotations

import os
import re
import threading
import time

# Crockford's base32 digits, whose order is also ASCII order; each 10 bits as two of them.
_DIGITS = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [high + low for high in _DIGITS for low in _DIGITS]
_LAST_PAIRS = [_PAIRS[low << 2] for low in range(256)]
"""The last two digits of an id by its low 8 bits: with the padding's two zero bits, they are
its last 10 bits."""


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


def new_ids(prefix: str, count: int) -> list[str]:
    """``count`` ids, as many calls of ``new_id`` in one millisecond would make them: one clock
    read and one draw of random bits for all, the rest counted up. (A batch of 1,000 events
    paid a clock read, a lock, a read of random bits and an encoding of 26 digits for each.)"""
    if count <= 0:
        return []
    millis = time.time_ns() // 1_000_000
    with _id_lock:
        if millis <= _last_id[0]:
            millis, rand = _last_id[0], _last_id[1] + 1
        else:
            rand = int.from_bytes(os.urandom(10), "big") >> 1
        _last_id[0], _last_id[1] = millis, rand + count - 1
    # Ids counted up share all digits but the last pair, which holds the low 8 bits (and the
    # padding) until those wrap: the shared 24 digits are encoded once per 256 ids.
    ids: list[str] = []
    value, end = millis << 80 | rand, (millis << 80 | rand) + count
    while value < end:
        head = prefix + _base32(value)[:-2]
        last = min(end, (value | 255) + 1)
        ids += [head + _LAST_PAIRS[low] for low in range(value & 255, ((last - 1) & 255) + 1)]
        value = last
    return ids


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
