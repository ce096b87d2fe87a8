"""The kinds of value a setting of ``herald serve`` takes, each read alike from a flag, a
``HERALD_*`` variable (both text) and a TOML file (text or a TOML value), and written back as
TOML: ``herald serve --check-config`` prints what ``--config`` reads."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from herald.addresses import AddressPolicy
from herald.endpoint_checks import check_url_prefix, parse_schedule
from herald.errors import InvalidInput
from herald.origins import check_origin
from herald.times import format_duration, parse_duration

Plain = str | int | float | bool | list[int] | list[str]
"""A value as TOML writes it."""


@dataclass(frozen=True)
class Kind:
    """How one kind of setting is read and written back."""

    read: Callable[[object], Any]
    """The setting's value from text or a TOML value; raises ``InvalidInput`` saying what to
    write instead."""
    plain: Callable[[Any], Plain]
    """The value as TOML writes it (and ``read`` reads back)."""
    metavar: str | None = None
    is_switch: bool = False
    """A flag that takes no value and turns the setting on."""
    repeatable: bool = False
    """A flag given once per value (its values come as a list)."""


def _same(value: Any) -> Plain:
    return value  # type: ignore[no-any-return]


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"write a string in quotes, not {value!r}")
    return value


def _shown(value: object) -> str:
    return repr(value) if isinstance(value, str) else json.dumps(value)


TEXT = Kind(_text, _same)


def integer(low: int, high: int | None = None) -> Kind:
    bounds = f"from {low} to {high}" if high is not None else f"of {low} or more"

    def read(value: object) -> int:
        number: int | None = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
            number = int(value)
        if number is None or number < low or (high is not None and number > high):
            raise InvalidInput(f"write an integer {bounds}, not {_shown(value)}")
        return number

    return Kind(read, _same, "N")


def number(low: float) -> Kind:
    def read(value: object) -> float:
        found: float | None = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            found = float(value)
        elif isinstance(value, str):
            try:
                found = float(value)
            except ValueError:
                found = None
        if found is None or not math.isfinite(found) or found < low:
            raise InvalidInput(f"write a number of {low:g} or more, not {_shown(value)}")
        return found

    return Kind(read, _same, "N")


def _duration(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = parse_duration(value)
    else:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidInput(
            "write a duration above 0 such as 90s, 15m, 12h or 7d (a number alone is seconds),"
            f" not {_shown(value)}"
        )
    return seconds


DURATION = Kind(_duration, format_duration, "DURATION")
"""Seconds above 0, written ``90s``, ``15m``, ``12h``, ``7d`` or as a number of seconds."""


def choice(options: Sequence[str]) -> Kind:
    def read(value: object) -> str:
        if value not in options:
            raise InvalidInput(f"write one of {', '.join(options)}, not {_shown(value)}")
        return str(value)

    return Kind(read, _same, "|".join(options))


def _switch(value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off", ""}:
        return False
    raise InvalidInput(f"write true or false, not {_shown(value)}")


SWITCH = Kind(_switch, _same, is_switch=True)


def _schedule(value: object) -> tuple[int, ...]:
    if isinstance(value, list) and all(
        isinstance(delay, int) and not isinstance(delay, bool) for delay in value
    ):
        value = ",".join(str(delay) for delay in value)
    if not isinstance(value, str):
        raise InvalidInput(f'write whole seconds, e.g. [0, 5, 300] or "0,5,300", not {value!r}')
    return parse_schedule(value)


SCHEDULE = Kind(_schedule, list, "SECONDS,...")


def _addresses(value: object) -> AddressPolicy:
    if isinstance(value, list) and all(isinstance(word, str) for word in value):
        value = ",".join(value)
    if not isinstance(value, str):
        raise InvalidInput(f'write address classes, e.g. "loopback,private", not {value!r}')
    return AddressPolicy.parse(value)


ADDRESSES = Kind(_addresses, str, "CLASSES")
"""Address classes webhooks may go to besides public ones: ``loopback``, ``private``."""


def _url_prefixes(value: object) -> tuple[str, ...]:
    # Whitespace separates them in one text (a variable): a URL holds none.
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, list) or not all(isinstance(prefix, str) for prefix in value):
        raise InvalidInput(
            'write URL prefixes, e.g. ["https://hooks.example.com/mcp/"] or'
            f' "https://a.example/hooks/ https://b.example/", not {_shown(value)}'
        )
    words = [word for prefix in value for word in prefix.split()]
    return tuple(check_url_prefix(word, "the prefix") for word in words)


URL_PREFIXES = Kind(_url_prefixes, list, "PREFIX", repeatable=True)
"""Callback URL prefixes: the flag once per prefix, a variable's separated by spaces, a TOML
file's as a list."""


def _origins(value: object) -> tuple[str, ...]:
    # Whitespace separates them in one text (a variable): an origin holds none.
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, list) or not all(isinstance(origin, str) for origin in value):
        raise InvalidInput(
            'write web origins, e.g. ["https://app.example.com"] or'
            f' "https://app.example.com http://localhost:5173", not {_shown(value)}'
        )
    words = [word for origin in value for word in origin.split()]
    return tuple(check_origin(word, "the origin") for word in words)


ORIGINS = Kind(_origins, list, "ORIGIN", repeatable=True)
"""Web origins (CORS): the flag once per origin, a variable's separated by spaces, a TOML
file's as a list."""
