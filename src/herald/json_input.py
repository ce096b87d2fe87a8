"""JSON from outside, checked once where it comes in (an HTTP body, an MCP tool's arguments).

What JSON text can carry but herald cannot keep or answer with is refused here, with the path
of the value at fault, before any of it reaches a check that would echo it or a store that would
choke on it:

- a key given twice in one object (``{"to": "a", "to": "b"}``): JSON parsers disagree on which
  one counts, so herald takes neither rather than guess;
- nesting deeper than ``MAX_DEPTH`` levels;
- an unpaired surrogate (``"\\ud800"``): it is not Unicode, so it cannot be encoded as UTF-8,
  stored, or even quoted back in an error;
- NUL (U+0000), in any string or key: PostgreSQL stores it nowhere, so neither backend takes it;
- an integer of more than ``MAX_INT_DIGITS`` digits, and NaN, Infinity or a number too large
  for a double: none of them can be written back as JSON.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from itertools import chain
from typing import Any, Final

from herald.errors import InvalidInput

MAX_DEPTH = 100
"""How deeply a JSON value may nest: an event's data, in its batch, stays well within it."""
MAX_INT_DIGITS = 4300
"""Python's own bound on converting digits to an integer; a longer number is refused."""

_CONTAINERS = frozenset({dict, list})
_SAFE = frozenset({int, bool, type(None), dict, list})
_PARSED = frozenset({int, bool, type(None), dict, list, str, float})
"""What a JSON parser makes of JSON text."""
_RISKY_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
_UNSURE_ESCAPE = re.compile(rb"\\u(?:0000|003[aA])")
"""NUL, or a colon, spelled as an escape (which ``keys_once`` cannot count)."""
_MAX_INT_BITS = 14_000
"""Under ``MAX_INT_DIGITS`` decimal digits (4,300 digits take 14,282 bits or more)."""
SHORTEST_LONG_INT = 4_000
"""Fewer characters than an integer over ``_MAX_INT_BITS`` bits takes (4,215 digits)."""
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_MAX_PATH_CHARS = 160

# One link of the path to a value: (the link of its container, its key or index); None at the root.
_Link = tuple[Any, str | int] | None


class _DuplicateKey(Exception):
    """Raised by the parser's hook at the first object that holds a key twice."""


class _Pairs(list[tuple[str, Any]]):
    """An object's members as written, duplicates kept, to find the one at fault."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The parser's hook for each object: a dict, unless a key is given twice."""
    members = dict(pairs)
    if len(members) != len(pairs):
        raise _DuplicateKey
    return members


class _TooManyDigits:
    """An integer literal too long to convert, kept to be refused with its path."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def loads(body: bytes, where: str = "$") -> Any:
    """Parse a JSON body (UTF-8) and check everything in it (see the module's rules).

    Raises:
        InvalidInput: the body is not JSON, or holds what herald does not take; the message
            names the path of the value at fault.
    """
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"the body is not valid JSON in UTF-8: {exc}") from exc
    try:
        value = _parse(text, where, _DECODER)
    except ValueError:
        # Only an over-long integer gets here: parse again, keeping it aside to name its path.
        value = _parse(text, where, _LONG_INT_DECODER)
    # A string at fault is spelled with an escape (the decoder refuses raw NUL and surrogates):
    # most bodies have none, and then no string needs a look.
    strings = "\\u" in text and _RISKY_ESCAPE.search(text) is not None
    if _has_fault(value, strings=strings):
        _name_fault(value, where)
    return value


def unsure(body: bytes) -> bool:
    """Whether a JSON text may hold what only ``loads`` tells apart, whatever a parser that does
    not check it makes of it: NUL (written as an escape: raw, it is not JSON), NaN or Infinity
    (which some parsers take), or a colon written as an escape. (Any text that merely holds
    such letters is unsure too: ``loads`` decides.) A surrogate half alone is refused by
    pydantic's parser itself (a pair of them is a character beyond the BMP, as ``loads``
    takes it)."""
    return (
        b"NaN" in body
        or b"Infinity" in body
        or (b"\\u" in body and _UNSURE_ESCAPE.search(body) is not None)
    )


def plain(values: list[Any], most: int, *, long_ints: bool = True) -> tuple[int, list[str]] | None:
    """Values a JSON parser made (which checks none of this module's rules), looked at level by
    level with few steps in Python per value: None if anything in them may break a rule (a
    number JSON cannot carry, a long integer) or nests more than ``most`` levels (a container
    is one level, its containers two); else how many keys their objects hold in all and the
    strings in them (keys too), for ``keys_once``. Without ``long_ints`` (a text shorter than
    ``SHORTEST_LONG_INT``), integers are not looked at."""
    keys = 0
    strings: list[str] = []
    depth = 0
    while values:
        kinds = set(map(type, values))
        if not kinds <= _PARSED:
            return None
        if float in kinds and not all(
            math.isfinite(item) for item in values if type(item) is float
        ):
            return None
        if (
            long_ints
            and int in kinds
            and max(item.bit_length() for item in values if type(item) is int) > _MAX_INT_BITS
        ):
            return None
        if str in kinds:
            strings += [item for item in values if type(item) is str]
        if not kinds & _CONTAINERS:
            break
        depth += 1
        if depth > most:
            return None
        objects = [item for item in values if type(item) is dict]
        keys += sum(map(len, objects))
        strings += chain.from_iterable(objects)
        values = list(
            chain.from_iterable(
                item.values() if type(item) is dict else item
                for item in values
                if type(item) in _CONTAINERS
            )
        )
    return keys, strings


def keys_once(body: bytes, keys: int, strings: Iterable[str]) -> bool:
    """Whether a JSON text that ``unsure`` passed, parsed by a parser that keeps one member of a
    key given twice, held each key once per object: ``keys`` are the keys of what it made,
    ``strings`` every string in it (keys too). Every colon of the text ends a key, or is in a
    string: the text holds ``keys`` colons and those of the strings exactly when no key was
    dropped (a member dropped takes its key's colon, and its strings' colons, with it)."""
    colons = body.count(b":")
    return colons == keys or colons == keys + "\n".join(strings).count(":")


def check(value: Any, where: str) -> None:
    """Check a value already parsed (by the ``mcp`` SDK, say) against the same rules, but one:
    a key given twice cannot be seen once parsed (see ``duplicate_key``).

    Raises:
        InvalidInput: naming the path of the first value at fault.
    """
    if _has_fault(value, strings=True):
        _name_fault(value, where)


NOT_JSON: Final = object()
"""What ``decoded`` gives for a body that is not JSON (or holds a key twice)."""


def duplicate_key(body: bytes, where: str = "$") -> str | None:
    """What is wrong if a JSON text holds a key twice in one object (None: it does not, or it
    is not JSON at all: that is for its reader to say)."""
    return decoded(body, where)[1]


def decoded(body: bytes, where: str = "$") -> tuple[Any, str | None]:
    """A JSON text's value, as ``json.loads`` gives it, and what is wrong if it holds a key twice
    in one object (the value is then ``NOT_JSON``). A text that is not JSON at all is
    ``NOT_JSON`` with no fault: that is for its reader to say."""
    try:
        return _DECODER.decode(body.decode("utf-8-sig")), None
    except _DuplicateKey:
        return NOT_JSON, _duplicate(body.decode("utf-8-sig"), where)
    except (ValueError, RecursionError):
        return NOT_JSON, None


def _parse(text: str, where: str, decoder: json.JSONDecoder) -> Any:
    try:
        return decoder.decode(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"the body is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise InvalidInput(_too_deep(where)) from exc
    except _DuplicateKey:
        raise InvalidInput(_duplicate(text, where)) from None


def _duplicate(text: str, where: str) -> str:
    """Say which key of which object is given twice (the outermost such object first)."""
    try:
        value = json.JSONDecoder(parse_int=_int_or_too_long, object_pairs_hook=_Pairs).decode(text)
    except RecursionError:
        return _too_deep(where)
    stack: list[tuple[Any, _Link]] = [(value, None)]
    while stack:
        item, link = stack.pop()
        children: list[tuple[Any, _Link]]
        if isinstance(item, _Pairs):
            seen: set[str] = set()
            for key, _ in item:
                if key in seen:
                    return (
                        f"{_path(where, link)} has the key {_quoted(key)} more than once; give"
                        " each key once (parsers differ on which one counts)"
                    )
                seen.add(key)
            children = [(member, (link, key)) for key, member in item]
        elif isinstance(item, list):
            children = [(member, (link, index)) for index, member in enumerate(item)]
        else:
            continue
        stack.extend(reversed(children))
    return f"{where} has a key more than once; give each key once"


def _has_fault(value: Any, *, strings: bool) -> bool:
    """Whether anything in ``value`` breaks a rule, found level by level with few steps in
    Python per value: a large body costs about what parsing it did."""
    level = [value]
    depth = 0
    while level:
        depth += 1
        kinds = set(map(type, level))
        if not kinds <= _SAFE and _scalars_at_fault(level, kinds, strings):
            return True
        if not kinds & _CONTAINERS:
            return False
        if depth > MAX_DEPTH:
            return True
        containers = [item for item in level if type(item) in _CONTAINERS]
        level = list(chain.from_iterable(_children(item, strings) for item in containers))
    return False


def _scalars_at_fault(level: list[Any], kinds: set[type], strings: bool) -> bool:
    if kinds - _SAFE - {str, float}:
        return True  # an over-long integer, or a type that only the full walk knows
    look_at_strings = strings and str in kinds
    if look_at_strings and any(_string_fault(item) for item in level if type(item) is str):
        return True
    return float in kinds and not all(math.isfinite(item) for item in level if type(item) is float)


def _children(container: dict[str, Any] | list[Any], keys: bool) -> Iterable[Any]:
    if isinstance(container, list):
        return container
    return chain(container, container.values()) if keys else container.values()


def _name_fault(value: Any, where: str) -> None:
    """Find the first value at fault, with its path, and refuse it.

    Raises:
        InvalidInput: naming the path.
    """
    fault = _scalar_fault(value)
    if fault is not None:
        raise InvalidInput(f"{where} {fault}")
    if not isinstance(value, (dict, list)):
        return
    stack: list[tuple[dict[str, Any] | list[Any], int, _Link]] = [(value, 1, None)]
    while stack:
        container, depth, link = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidInput(_too_deep(_path(where, link)))
        if isinstance(container, dict):
            _check_keys(container, where, link)
        items = container.items() if isinstance(container, dict) else enumerate(container)
        for key, item in items:
            if isinstance(item, (dict, list)):
                stack.append((item, depth + 1, (link, key)))
            elif (fault := _scalar_fault(item)) is not None:
                raise InvalidInput(f"{_path(where, (link, key))} {fault}")


def _check_keys(container: dict[str, Any], where: str, link: _Link) -> None:
    for key in container:
        if isinstance(key, str) and (fault := _string_fault(key)) is not None:
            raise InvalidInput(f"a key in {_path(where, link)} {fault}")


def _scalar_fault(value: Any) -> str | None:
    if isinstance(value, str):
        return _string_fault(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "is NaN, Infinity or a number too large for a double, which JSON cannot carry"
    if isinstance(value, _TooManyDigits):
        return (
            f"is an integer of {value.digits} digits; herald takes at most {MAX_INT_DIGITS}"
            " (send a longer number as a string)"
        )
    return None


def _string_fault(text: str) -> str | None:
    if "\x00" in text:
        return "holds a NUL character (U+0000), which herald does not store"
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            return (
                "holds an unpaired surrogate (such as \\ud800), which is not Unicode text;"
                " send valid UTF-8"
            )
    return None


def _int_or_too_long(literal: str) -> int | _TooManyDigits:
    digits = len(literal.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        return _TooManyDigits(digits)
    try:
        return int(literal)
    except ValueError:  # a lower limit set for this process
        return _TooManyDigits(digits)


def _quoted(key: str) -> str:
    """A key as JSON, in ASCII and cut short: it can always be shown."""
    return json.dumps(key[:64])


_DECODER = json.JSONDecoder(object_pairs_hook=_unique)
"""Made once: ``json.loads`` with options makes a decoder at each call, which costs as much as
parsing a small body."""
_LONG_INT_DECODER = json.JSONDecoder(parse_int=_int_or_too_long, object_pairs_hook=_unique)


def _too_deep(where: str) -> str:
    return f"{where} nests deeper than {MAX_DEPTH} levels, herald's limit for JSON"


def _path(where: str, link: _Link) -> str:
    """``$.data.items[3]``: keys that are not identifiers are quoted, in ASCII, so that a path
    can always be shown; a long path keeps its start and its end."""
    parts: list[str] = []
    while link is not None:
        link, key = link
        if isinstance(key, int):
            parts.append(f"[{key}]")
        elif _IDENTIFIER.fullmatch(key):
            parts.append(f".{key}")
        else:
            parts.append(f"[{_quoted(key)}]")
    text = where + "".join(reversed(parts))
    if len(text) <= _MAX_PATH_CHARS:
        return text
    half = _MAX_PATH_CHARS // 2
    return f"{text[:half]}...{text[-half:]}"
