"""docs/RELIABILITY.md names the tests that prove each guarantee: every one named must exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = re.compile(r"`((?:[\w/]+\.py)?)(?:::(\w+))?`")


def referenced_tests() -> list[tuple[str, str | None]]:
    """Each ``path::name`` (or ``::name``, of the path named last in the same row, or a whole
    ``path``) the page cites."""
    found: list[tuple[str, str | None]] = []
    for row in (ROOT / "docs" / "RELIABILITY.md").read_text().splitlines():
        path = ""
        for given_path, name in REFERENCE.findall(row):
            path = given_path or path
            if given_path or name:
                found.append((path, name or None))
    return found


def test_every_test_the_reliability_page_names_exists() -> None:
    references = referenced_tests()
    assert len(references) > 20
    missing = []
    for path, name in references:
        source = ROOT / "tests" / path
        if not source.is_file():
            missing.append(path)
        elif name is not None and not re.search(rf"def {name}\(", source.read_text()):
            missing.append(f"{path}::{name}")
    assert missing == []
