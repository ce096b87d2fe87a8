"""Versioned schema migrations, one numbered ``.sql`` file each, per backend."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def load(backend: str) -> list[Migration]:
    """The migrations of ``backend`` (``sqlite`` or ``postgres``), in version order."""
    folder = resources.files("herald.store") / "sql" / backend
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            number, _, name = entry.name.removesuffix(".sql").partition("_")
            found.append(Migration(int(number), name, entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda migration: migration.version)
