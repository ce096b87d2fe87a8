"""Ids: globally unique, sortable by creation time, and checkable without asking the store."""

from __future__ import annotations

import base64
import os
import re
import threading
import time

# base32 digits mapped in order onto Crockford's alphabet, whose order is also ASCII order.
_CROCKFORD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", "0123456789ABCDEFGHJKMNPQRSTVWXYZ")


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
    raw = millis.to_bytes(6, "big") + rand.to_bytes(10, "big")
    return prefix + base64.b32encode(raw)[:26].decode().translate(_CROCKFORD)


_ID_BODY = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def is_id(value: str, prefix: str) -> bool:
    """Whether ``value`` could be an id that ``new_id(prefix)`` made. One that cannot (a typo,
    NUL, any other text) names nothing, and is answered so without asking the store."""
    return value.startswith(prefix) and _ID_BODY.fullmatch(value, len(prefix)) is not None
