"""What herald imports, it declares: an install from the package index has every module the
code needs, not only those other packages happen to bring along."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imported_modules() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "src" / "herald").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.partition(".")[0])
    return found - set(sys.stdlib_module_names) - {"herald"}


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_package_herald_imports_is_a_declared_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {
        _normalized(re.match(r"[A-Za-z0-9._-]+", requirement).group())  # type: ignore[union-attr]
        for requirement in project["dependencies"]
    }
    distributions = packages_distributions()
    undeclared = {
        module: distributions.get(module)
        for module in _imported_modules()
        if not any(_normalized(d) in declared for d in distributions.get(module, [module]))
    }
    assert undeclared == {}, "imported by src/herald but not in [project.dependencies]"
