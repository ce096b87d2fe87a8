"""The house as built stays as built: only the hub and the store itself touch the store."""

from __future__ import annotations

import ast
from pathlib import Path

import herald

SOURCE = Path(herald.__file__).parent
STORE_DOOR = ("hub", "store")
"""The packages of ``herald`` allowed to hold the store: the store itself and the hub."""
PUBLIC_API = SOURCE / "__init__.py"
"""Re-exports ``Store`` and ``open_store`` for embedders, and uses neither."""


def _outside_the_door() -> list[Path]:
    return [
        path
        for path in sorted(SOURCE.rglob("*.py"))
        if path.relative_to(SOURCE).parts[0] not in STORE_DOOR and path != PUBLIC_API
    ]


def _store_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("herald.store"):
            found.append(f"line {node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Import):
            found += [
                f"line {node.lineno}: import {alias.name}"
                for alias in node.names
                if alias.name.startswith("herald.store")
            ]
        elif isinstance(node, ast.Attribute) and node.attr in ("store", "_store"):
            if isinstance(node.value, ast.Name) and node.value.id == "args":
                continue  # the CLI's --store option: a URL, not the store
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


def test_no_module_outside_the_hub_and_the_store_touches_the_store() -> None:
    offenders = {
        str(path.relative_to(SOURCE)): uses
        for path in _outside_the_door()
        if (uses := _store_uses(path))
    }
    assert offenders == {}, "reach the store through the hub (herald.hub), not directly"


def test_the_scan_sees_every_module_above_the_store() -> None:
    names = {str(path.relative_to(SOURCE)) for path in _outside_the_door()}
    assert {"delivery/engine.py", "webhooks/worker.py", "http/stream.py", "cli.py"} <= names
