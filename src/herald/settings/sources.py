"""Where ``herald serve``'s settings come from, in order of precedence: flags, ``HERALD_*``
variables, a TOML file (``--config``, or ``HERALD_CONFIG``), the defaults. Every value is read
and checked before anything starts, and each problem is one line naming the setting, where it
was set and what to write instead."""

from __future__ import annotations

import dataclasses
import difflib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from herald.config import DEFAULTS, ServeConfig
from herald.errors import HeraldError, InvalidInput
from herald.settings.table import (
    ADMIN_KEY_ENV,
    BY_ENV,
    BY_NAME,
    CONFIG_ENV,
    ENV_PREFIX,
    NOT_SETTINGS,
    SETTINGS,
    Setting,
)
from herald.urls import check_store_url

DEFAULT = "default"


class ConfigProblems(HeraldError):
    """The settings given are invalid: ``problems`` has a line for each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Resolved:
    config: ServeConfig
    origins: dict[str, str]
    """Where each setting's value came from: ``flag --port``, ``env HERALD_PORT``,
    ``herald.toml:3`` or ``default``."""
    admin_key: str | None


@dataclass
class _Reading:
    values: dict[str, Any] = dataclasses.field(default_factory=dict)
    origins: dict[str, str] = dataclasses.field(default_factory=dict)
    problems: list[str] = dataclasses.field(default_factory=list)

    def take(self, setting: Setting, raw: object, origin: str) -> None:
        """Sources are taken most important first: the first value counts, but every one is
        checked (a mistake in the file is one even while a flag overrides it)."""
        try:
            value = setting.kind.read(raw)
        except InvalidInput as exc:
            self.problems.append(f"{setting.name} ({origin}): {exc.message}")
            return
        if setting.name not in self.origins:
            self.origins[setting.name] = origin
            self.values[setting.name] = value


def resolve(
    flags: Mapping[str, object], environ: Mapping[str, str], config_file: str | None = None
) -> Resolved:
    """The settings from ``flags`` (by setting name: only those given), ``environ`` and the TOML
    file named by ``config_file`` (or ``HERALD_CONFIG``).

    Raises:
        ConfigProblems: a value, key or variable is invalid or unknown, the file cannot be
            read, or the settings do not fit together.
    """
    reading = _Reading()
    for name, raw in flags.items():
        reading.take(BY_NAME[name], raw, f"flag {BY_NAME[name].flag}")
    _read_environment(reading, environ)
    path = config_file or environ.get(CONFIG_ENV)
    if path:
        _read_file(reading, Path(path))
    admin_key = environ.get(ADMIN_KEY_ENV) or None
    if admin_key is not None:
        from herald.keys import check_chosen_key

        try:
            check_chosen_key(admin_key, ADMIN_KEY_ENV)
        except InvalidInput as exc:
            reading.problems.append(exc.message)
    config = _config(reading) if not reading.problems else None
    if config is None:
        raise ConfigProblems(reading.problems)
    origins = {s.name: reading.origins.get(s.name, DEFAULT) for s in SETTINGS}
    return Resolved(config, origins, admin_key)


def _read_environment(reading: _Reading, environ: Mapping[str, str]) -> None:
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or name in NOT_SETTINGS:
            continue
        setting = BY_ENV.get(name)
        if setting is None:
            reading.problems.append(
                f"{name} (env): herald serve has no such setting{_instead(name, BY_ENV)}"
            )
        else:
            reading.take(setting, raw, f"env {name}")


def _read_file(reading: _Reading, path: Path) -> None:
    try:
        text = path.read_text(encoding="utf-8")
        table = tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        reading.problems.append(f"{path}: cannot be read ({exc.__class__.__name__}): give a"
                                " readable TOML file with --config or HERALD_CONFIG")  # fmt: skip
        return
    except tomllib.TOMLDecodeError as exc:
        reading.problems.append(f"{path}: not valid TOML: {exc}")
        return
    for key, raw in table.items():
        origin = f"{path}:{_line_of(key, text)}"
        setting = BY_NAME.get(key)
        if setting is None:
            reading.problems.append(
                f"{key} ({origin}): herald serve has no such setting{_instead(key, BY_NAME)}"
            )
        else:
            reading.take(setting, raw, origin)


def _line_of(key: str, text: str) -> int | str:
    """The line that sets ``key`` at the top level (a plain key, possibly quoted), else "?"."""
    pattern = re.compile(
        rf"""\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*[=.]"""
    )
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return "?"


def _instead(name: str, known: Mapping[str, object]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    if close:
        return f": write {close[0]}"
    return ": herald serve --help lists them"


def _config(reading: _Reading) -> ServeConfig | None:
    """The ``ServeConfig`` of the values read; None when they do not fit together (each group
    checks itself), the problems noted."""
    top: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {}
    for name, value in reading.values.items():
        group, _, field = BY_NAME[name].field.rpartition(".")
        if group:
            groups.setdefault(group, {})[field] = value
        else:
            top[field] = value
    for group, changes in groups.items():
        try:
            top[group] = dataclasses.replace(getattr(DEFAULTS, group), **changes)
        except InvalidInput as exc:
            reading.problems.append(f"{_named(reading, group)}: {exc.message}")
    if reading.problems:
        return None
    config = ServeConfig(**top)
    # Checked without the hub or the store: the metrics library must not be imported yet
    # (herald.workers sets it up first), and herald bridge and drain need neither.
    try:
        check_store_url(config.store_url)
    except InvalidInput as exc:
        reading.problems.append(f"store ({reading.origins.get('store', DEFAULT)}): {exc.message}")
        return None
    return config


def _named(reading: _Reading, group: str) -> str:
    """The settings of ``group`` that were set, and where."""
    return ", ".join(
        f"{name} ({reading.origins[name]})"
        for name in reading.values
        if BY_NAME[name].field.startswith(group + ".")
    )
