"""The effective configuration as ``herald serve --check-config`` prints it: TOML that ``--config``
reads back, each line saying where its value came from, secrets masked."""

from __future__ import annotations

import json

from herald.settings.kinds import Plain
from herald.settings.sources import Resolved
from herald.settings.table import ADMIN_KEY_ENV, SETTINGS


def effective_toml(resolved: Resolved) -> list[str]:
    lines = ["# herald serve's effective configuration; each line says where it came from"]
    for setting in SETTINGS:
        value = _value(resolved, setting.field)
        origin = resolved.origins[setting.name]
        if value is None:
            lines.append(f"# {setting.name} is not set ({origin})")
            continue
        if setting.secret:
            lines.append(f"# {setting.name} is set, {len(str(value))} characters (masked)"
                         f"  # {origin}")  # fmt: skip
            continue
        plain = setting.kind.plain(value)
        if setting.name == "store":
            plain = masked_url(str(plain))
        lines.append(f"{setting.name} = {_toml(plain)}  # {origin}")
    key = resolved.admin_key
    told = f"set, {len(key)} characters (masked)" if key else "not set"
    lines.append(f"# {ADMIN_KEY_ENV}: {told}")
    return lines


def _value(resolved: Resolved, field: str) -> object:
    value: object = resolved.config
    for part in field.split("."):
        value = getattr(value, part)
    return value


def _toml(plain: Plain) -> str:
    # JSON's strings, numbers, booleans and arrays of integers are TOML's too.
    return json.dumps(plain)


def masked_url(url: str) -> str:
    """``url`` with its password, if it has one, masked: fit to be printed or logged."""
    scheme, sep, rest = url.partition("://")
    credentials, at, location = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{location}"
