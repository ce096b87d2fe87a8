"""What herald imports, it declares: an install from the package index has every module the
code needs, not only those other packages happen to bring along. The PostgreSQL store alone
needs the ``postgres`` extra; and CI installs every declared package at a pinned release."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterable
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "herald"
POSTGRES_STORE = PACKAGE / "store" / "postgres"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _imported_modules(paths: Iterable[Path]) -> set[str]:
    found: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.partition(".")[0])
    return found - set(sys.stdlib_module_names) - {"herald"}


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _names(requirements: Iterable[str]) -> set[str]:
    return {
        _normalized(re.match(r"[A-Za-z0-9._-]+", requirement).group())  # type: ignore[union-attr]
        for requirement in requirements
    }


def _undeclared(modules: set[str], declared: set[str]) -> dict[str, list[str] | None]:
    distributions = packages_distributions()
    return {
        module: distributions.get(module)
        for module in modules
        if not any(_normalized(d) in declared for d in distributions.get(module, [module]))
    }


def test_every_package_herald_imports_is_a_declared_dependency() -> None:
    outside = (p for p in PACKAGE.rglob("*.py") if not p.is_relative_to(POSTGRES_STORE))
    undeclared = _undeclared(_imported_modules(outside), _names(PROJECT["dependencies"]))
    assert undeclared == {}, "imported by src/herald but not in [project.dependencies]"


def test_what_the_postgresql_store_imports_is_declared_with_its_extra() -> None:
    declared = _names([*PROJECT["dependencies"], *PROJECT["optional-dependencies"]["postgres"]])
    undeclared = _undeclared(_imported_modules(POSTGRES_STORE.rglob("*.py")), declared)
    assert undeclared == {}, "imported by herald.store.postgres but not declared"


def test_ci_installs_every_declared_package_at_a_pinned_release() -> None:
    pins = re.findall(
        r"^([A-Za-z0-9._-]+)==", (ROOT / "constraints.txt").read_text(encoding="utf-8"), re.M
    )
    extras = PROJECT["optional-dependencies"].values()
    declared = _names([*PROJECT["dependencies"], *(r for extra in extras for r in extra)])
    assert declared - {"herald"} - {_normalized(pin) for pin in pins} == set()
