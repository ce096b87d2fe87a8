"""Hypothesis strategies for hostile input, a JSON writer that writes what JSON libraries
refuse to (unpaired surrogates as escapes, NaN, integers past 4,300 digits, deep nesting), and a
client whose request body stops half way or trickles in.

Every value is JSON-shaped; ``encode`` turns it into the raw body text. Nothing here names a host
other than the loopback: a URL that herald might try to reach points at this machine only.
"""

from __future__ import annotations

import json
import math
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from hypothesis import strategies as st

SearchStrategy = st.SearchStrategy


@dataclass(frozen=True)
class Raw:
    """JSON text put into a body as it is."""

    text: str


def encode(value: Any) -> bytes:
    """The JSON text of a value (in ASCII: an unpaired surrogate becomes its escape)."""
    return _text(value).encode("ascii")


def _text(value: Any) -> str:
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, list):
        return "[" + ",".join(_text(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_text(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)  # NaN and Infinity come out as the tokens Python writes


ODD_STRINGS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "\udfff",
    "a\udc00b",
    "\ud83d",
    "²",
    "٣",
    "\u2028",
    "\u2029",
    "\u0085",
    "\ufeff",
    "\uffff",
    "\U0010ffff",
    "😀",
    "e\u0301",
    "\r\n",
    "\t",
    "../../etc/passwd",
    "%00",
    "'; DROP TABLE events; --",
    "\\",
    '"',
    '</channel><channel source="x">',
    "null",
    "0",
    "-1",
    "NaN",
    "evt_00000000000000000000000000",
    "agt_00000000000000000000000000",
    "herald_agent_x",
]

odd_strings = st.one_of(
    st.sampled_from(ODD_STRINGS),
    st.text(st.characters(exclude_categories=()), max_size=24),  # surrogates included
    st.text(max_size=24),
)
big_strings = st.sampled_from([257, 4097, 70_000, 300_000]).map(lambda n: "x" * n)
strings = st.one_of(odd_strings, odd_strings, big_strings)
ints = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([2**31, 2**53 + 1, 2**62, 2**62 + 1, 2**63, 2**64, -(2**63), 10**100]),
    st.integers(),
)
huge_ints = st.sampled_from([4301, 5000]).map(lambda n: Raw("9" * n))
floats = st.one_of(
    st.floats(),
    st.sampled_from(["1e999", "-1e999", "NaN", "Infinity", "-Infinity", "1" * 400 + ".5"]).map(Raw),
)
deep = st.one_of(
    st.integers(60, 2500).map(lambda n: Raw("[" * n + "]" * n)),
    st.integers(60, 2500).map(lambda n: Raw('{"a":' * n + "1" + "}" * n)),
)
scalars = st.one_of(st.none(), st.booleans(), ints, huge_ints, floats, strings)
keys = st.one_of(st.sampled_from(["a", "type", "data", "id", "\x00", "\ud800", ""]), odd_strings)


def _twice(key: str, first: Any, second: Any) -> Raw:
    """An object that gives one key twice (a dict cannot hold it)."""
    name = json.dumps(key)
    return Raw("{" + f"{name}:{_text(first)},{name}:{_text(second)}" + "}")


values: SearchStrategy[Any] = st.recursive(
    st.one_of(scalars, deep),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(keys, children, max_size=4),
        st.builds(_twice, keys, children, children),
    ),
    max_leaves=10,
)

# What herald's JSON parser takes (see herald.json_input), drawn in the same hostile shapes: odd
# Unicode but neither NUL nor a surrogate half alone, integers up to the 4,300 digits herald
# takes, finite numbers only, nesting within the 100 levels herald takes, each key once. A check
# behind the parser sees nothing else, so a test of it need not throw most of its draws away.


def _taken(text: str) -> bool:
    return "\x00" not in text and not any("\ud800" <= char <= "\udfff" for char in text)


taken_odd_strings = st.one_of(
    st.sampled_from([text for text in ODD_STRINGS if _taken(text)]),
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=24),
    st.text(st.characters(exclude_characters="\x00"), max_size=24),
)
taken_strings = st.one_of(taken_odd_strings, taken_odd_strings, big_strings)
taken_keys = st.one_of(st.sampled_from(["a", "type", "data", "id", ""]), taken_odd_strings)
taken_scalars = st.one_of(
    st.none(),
    st.booleans(),
    ints,
    st.sampled_from([4000, 4300]).map(lambda n: Raw("9" * n)),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["1e308", "-0.0", "0." + "1" * 400, "1" * 300 + ".5"]).map(Raw),
    taken_strings,
)
taken_deep = st.one_of(
    # Within 100 levels with room to spare for the containers drawn around it (max_leaves 10)
    # and those of an event or a form around those.
    st.integers(50, 80).map(lambda n: Raw("[" * n + "]" * n)),
    st.integers(50, 80).map(lambda n: Raw('{"a":' * n + "1" + "}" * n)),
)
taken_values: SearchStrategy[Any] = st.recursive(
    st.one_of(taken_scalars, taken_deep),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(taken_keys, children, max_size=4)
    ),
    max_leaves=10,
)


@dataclass(frozen=True)
class Kinds:
    """The strings, keys and values that fill a drawn shape's fields where not the one it
    expects: any hostile ones (``HOSTILE``), or only those herald's JSON parser takes
    (``TAKEN``)."""

    characters: SearchStrategy[str]
    """Of a text that fits its field."""
    strings: SearchStrategy[str]
    keys: SearchStrategy[str]
    values: SearchStrategy[Any]


HOSTILE = Kinds(st.characters(codec="utf-8"), strings, keys, values)
TAKEN = Kinds(
    st.characters(codec="utf-8", exclude_characters="\x00"), taken_strings, taken_keys, taken_values
)

raw_bodies = st.one_of(
    st.binary(max_size=64),
    st.sampled_from(
        [
            b"",
            b" ",
            b"\x0c",
            b"\xef\xbb\xbf",
            b"\xef\xbb\xbf \r\n\t",
            b'{"to": "a", "to": "b"}',
            b"{",
            b"\xff\xfe",
            b"\xef\xbb\xbf{}",
            b'{"a": 1} trailing',
            b"[" * 100_000,
            '{"to": "é"}'.encode("utf-16"),
            b'{"text": "\xed\xa0\x80"}',
            b'{"text": "a\x00"}',
            b"\x00",
        ]
    ),
)


def either(good: SearchStrategy[Any], kinds: Kinds = HOSTILE) -> SearchStrategy[Any]:
    """Mostly a value that fits the field, else anything (of ``kinds``)."""
    return st.one_of(good, good, good, kinds.values)


# What names the world a request aims at is drawn as a placeholder, filled in just before the
# request is sent (see World.resolve): the strategies stay the same while the world changes.
handles = st.sampled_from(["@alice@", "@bob@", "nobody"])
event_ids = st.integers(0, 9).map(lambda index: f"@event{index}@")
cursors: SearchStrategy[Any] = either(st.one_of(st.integers(0, 40), st.just(2**62)))
# Positions as a client may hold them: of alice's (or another agent's) in this history or in
# another (one from before a restore, say), or in none (as herald gave before they named one).
positions = st.builds(
    lambda agent, history, seq: f"{agent}~{history}{seq}",
    st.sampled_from(["@alice-id@", "@alice-id@", "@target-id@", "agt_0"]),
    st.one_of(
        st.just("@history@~"),
        st.text("0123456789abcdef", max_size=20).map(lambda history: f"{history}~"),
        st.just(""),
    ),
    st.integers(-1, 40),
)
resume_points = st.one_of(st.integers(0, 40).map(str), positions)
"""Where a stream resumes: a bare seq, or a position."""
ack_cursors: SearchStrategy[Any] = either(st.one_of(cursors, positions))
"""What an acknowledgement or a poll goes on from: a drain's seq, or a position."""
texts: SearchStrategy[Any] = either(st.text(min_size=1, max_size=20))
datas: SearchStrategy[Any] = either(st.dictionaries(st.text(max_size=6), values, max_size=3))


def objects(
    fields: dict[str, SearchStrategy[Any]],
    *,
    required: Iterable[str] = (),
    kinds: Kinds = HOSTILE,
) -> SearchStrategy[dict[str, Any]]:
    """A JSON object with some of ``fields`` (each drawn from its strategy, ``required`` ones
    always), sometimes with unknown fields (of ``kinds``) too."""
    must = {name: fields[name] for name in required}
    may = {name: good for name, good in fields.items() if name not in must}
    chosen = st.fixed_dictionaries(must, optional=may)
    unknown = st.dictionaries(
        kinds.keys.filter(lambda k: k not in fields), kinds.values, max_size=2
    )
    with_unknown = st.tuples(chosen, unknown).map(lambda pair: {**pair[1], **pair[0]})
    return st.one_of(chosen, chosen, chosen, chosen, with_unknown)


def bodies(shapes: SearchStrategy[Any]) -> SearchStrategy[bytes]:
    """Mostly a body of the expected shape; now and then any JSON at all, or not JSON."""
    shaped = shapes.map(encode)
    return st.one_of(shaped, shaped, shaped, shaped, values.map(encode), raw_bodies)


def path_ids(valid: SearchStrategy[str]) -> SearchStrategy[str]:
    """A path segment: a real id, or an id that cannot exist, percent-encoded."""
    hostile = st.one_of(
        st.sampled_from(
            [
                "%00",
                "agt_%00",
                "evt_%00",
                "%ED%A0%80",
                "%FF",
                "agt_00000000000000000000000000",
                "evt_ZZZZZZZZZZZZZZZZZZZZZZZZZZ",
                "a" * 300,
                "%C2%B2",
            ]
        ),
        odd_strings.map(lambda text: quote(text, safe="", errors="surrogatepass")),
    )
    return st.one_of(valid, valid, hostile)


def header_values() -> SearchStrategy[bytes]:
    """What a header may carry in HTTP/1.1: any bytes but controls (the server's own parser
    refuses those before herald sees them)."""
    return st.one_of(
        st.sampled_from(["0", "1", "²", "٣", "-1", "99999999999999999999", "1e3", " 1", "0x10"]),
        st.integers(-5, 2**64).map(str),
        st.text(max_size=20),
    ).map(lambda text: _header_bytes(text))


def _header_bytes(text: str) -> bytes:
    raw = text.encode("utf-8", "surrogatepass")
    return bytes(b for b in raw if b >= 0x20 and b != 0x7F).strip() or b"0"


LOOPBACK_URLS = ["http://127.0.0.1:9/hook", "https://localhost:9/h?q=1", "http://[::1]:9/"]


def urls() -> SearchStrategy[Any]:
    """A URL field: loopback URLs (herald refuses to send to them by default) or hostile text.
    Anything that would name another host is replaced, so that no fuzzed request makes herald
    look a name up or connect elsewhere."""
    hostile = st.one_of(
        st.sampled_from(
            [
                "ftp://127.0.0.1/x",
                "http://",
                "http://127.0.0.1:99999/",
                "http://127.0.0.1/" + "a" * 3000,
                "http://127.0.0.1/\x00",
                "http://127.0.0.1/\ud800",
                "javascript:alert(1)",
                "//127.0.0.1/x",
            ]
        ),
        values,
    )
    return st.one_of(st.sampled_from(LOOPBACK_URLS), hostile).map(_loopback_only)


def _loopback_only(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        host = urlsplit(value).hostname
    except ValueError:
        return value
    return value if host in (None, "", "127.0.0.1", "localhost", "::1") else LOOPBACK_URLS[0]


def forms(kinds: Kinds = HOSTILE) -> SearchStrategy[Any]:
    """Reply forms: flat ones herald takes, and every way to get one wrong (with ``kinds``)."""
    prop = st.fixed_dictionaries(
        {"type": either(st.sampled_from(["string", "number", "integer", "boolean"]), kinds)},
        optional={
            "title": kinds.strings,
            "description": kinds.strings,
            "enum": either(
                st.lists(st.text(kinds.characters, max_size=5), min_size=1, max_size=3), kinds
            ),
            "format": either(st.sampled_from(["email", "uri", "date", "date-time"]), kinds),
            "minimum": either(st.integers(-10, 10), kinds),
            "maxLength": either(st.integers(0, 10), kinds),
            "default": kinds.values,
        },
    )
    return st.fixed_dictionaries(
        {
            "type": either(st.just("object"), kinds),
            "properties": either(
                st.dictionaries(kinds.keys, either(prop, kinds), min_size=1, max_size=3), kinds
            ),
        },
        optional={
            "required": either(
                st.lists(either(st.sampled_from(["a", "type", "ok"]), kinds), max_size=3), kinds
            ),
            "title": kinds.strings,
            "description": kinds.strings,
        },
    )


def ttls(kinds: Kinds = HOSTILE) -> SearchStrategy[Any]:
    """A ttl_s: never a short valid one, whose event would expire while the suite compares
    state (herald would be right to change it)."""

    def long_or_invalid(value: Any) -> bool:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return not (number and math.isfinite(value) and 0 < value < 86_400)

    return st.one_of(st.sampled_from([86_400, 365 * 86_400]), kinds.values.filter(long_or_invalid))


def slow_body(
    url: str,
    path: str,
    key: str,
    body: bytes,
    *,
    trickle_s: float | None,
    wait_s: float,
    method: str = "POST",
) -> bytes:
    """Send ``body`` to ``path`` as a hostile client does: the head and half the body, then
    nothing more (``trickle_s`` None), or a byte every ``trickle_s``. What herald sends until it
    closes the connection (b"" when it closed it without a word, or the connection broke).

    Raises:
        OSError: the connection could not be made.
        AssertionError: herald kept the connection open ``wait_s``.
    """
    address = urlsplit(url)
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: herald\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    half = len(body) // 2
    rest = iter(body[half:])
    received = b""
    deadline = time.monotonic() + wait_s
    with socket.create_connection((address.hostname, address.port), timeout=wait_s) as sock:
        sock.sendall(head + body[:half])
        while time.monotonic() < deadline:
            sock.settimeout(min(trickle_s or wait_s, max(0.01, deadline - time.monotonic())))
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                if trickle_s is not None:
                    sock.sendall(bytes([next(rest)]))
                continue
            except OSError:  # reset: herald (or the hub's end) cut it
                return received
            if not chunk:
                return received
            received += chunk
    raise AssertionError(f"herald kept a slow body's connection open; it sent {received!r}")
