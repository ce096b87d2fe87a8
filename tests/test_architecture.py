"""The house as built stays as built: the layers of ``docs/ARCHITECTURE.md`` hold (each part
imports only from its own layer and the layers below, and no parts import each other in a
circle), only the store's backends import their database drivers, and only the hub and the store
itself touch the store.

The layers are read from the table of ``docs/ARCHITECTURE.md`` itself, so the page and the code
cannot drift apart: a module the table does not name, or an import that climbs, fails here.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import herald

SOURCE = Path(herald.__file__).parent
ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "ARCHITECTURE.md"
STORE_DOOR = ("hub", "store")
"""The packages of ``herald`` allowed to hold the store: the store itself and the hub."""
PUBLIC_API = SOURCE / "__init__.py"
"""Re-exports ``Store`` and ``open_store`` for embedders, and uses neither."""
DRIVERS = {"sqlite3": "store/sqlite/", "asyncpg": "store/postgres/"}
"""Each database driver, and the one backend that may import it."""

Modules = Mapping[str, str]
"""Each module of ``herald``, by its path in the package (``http/app.py``), to its text."""


def herald_modules() -> dict[str, str]:
    return {
        path.relative_to(SOURCE).as_posix(): path.read_text()
        for path in sorted(SOURCE.rglob("*.py"))
    }


def part_of(path: str) -> str:
    """The part of the house a module is in, as the layers' table names it: its package
    (``http/``), or the module itself at the top of ``herald`` (``cli.py``)."""
    first, _, rest = path.partition("/")
    return f"{first}/" if rest else first


@dataclass(frozen=True)
class Import:
    module: str
    """The path of the importing module in the package (``http/app.py``)."""
    name: str
    """The module imported, dotted (``herald.hub.hub``, ``sqlite3``)."""
    line: int
    for_types_only: bool
    """Under ``if TYPE_CHECKING:``: never run, read by the type checker."""

    def __str__(self) -> str:
        return f"{self.module} line {self.line} imports {self.name}"


@functools.cache
def imports_of(path: str, text: str) -> tuple[Import, ...]:
    """Every import in a module, at its top or inside a function."""
    return tuple(_imports(path, text))


def _imports(path: str, text: str) -> Iterator[Import]:
    tree = ast.parse(text, path)
    package = ["herald", *Path(path).parent.parts]
    for_types = {
        id(node)
        for branch in ast.walk(tree)
        if isinstance(branch, ast.If) and ast.unparse(branch.test).endswith("TYPE_CHECKING")
        for statement in branch.body
        for node in ast.walk(statement)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            # ``from herald import answers`` imports a module; ``from herald.x import y`` a name.
            names = [f"{module}.{alias.name}" for alias in node.names]
            names = [name if _is_module(name) else module for name in names]
        else:
            continue
        for name in dict.fromkeys(names):
            yield Import(path, name, node.lineno, id(node) in for_types)


def _is_module(name: str) -> bool:
    parts = name.split(".")
    if parts[0] != "herald":
        return False
    place = SOURCE.joinpath(*parts[1:])
    return place.is_dir() or place.with_suffix(".py").is_file()


def part_imported(name: str) -> str | None:
    """The part of the house an import of ``name`` reaches; None outside ``herald``, and for
    ``herald`` itself (its ``__version__``): the package every import of it loads first."""
    parts = name.split(".")
    if parts[0] != "herald" or len(parts) == 1:
        return None
    return f"{parts[1]}/" if (SOURCE / parts[1]).is_dir() else f"{parts[1]}.py"


def documented_layers(text: str) -> list[tuple[str, list[str]]]:
    """The layers' table of the architecture page, from the top: each layer's name and the
    parts its row names (the backquoted names of its second column)."""
    section = text.split("\n## The layers\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]
    layers = []
    for row in rows:
        name, modules = (cell.strip() for cell in row.strip("|").split("|")[:2])
        layers.append((name, re.findall(r"`([\w]+(?:\.py|/))`", modules)))
    return layers


def layer_of_each_part(layers: list[tuple[str, list[str]]]) -> dict[str, int]:
    """Each part's layer, counted from the bottom (0: the lowest)."""
    return {part: len(layers) - at for at, (_, parts) in enumerate(layers, 1) for part in parts}


def climbing_imports(modules: Modules, layers: list[tuple[str, list[str]]]) -> list[str]:
    """The imports that reach a layer above their own module's (type checkers' too: a name a
    module annotates with is one it depends on)."""
    level = layer_of_each_part(layers)
    names = [name for name, _ in reversed(layers)]
    return [
        f"{found} ({names[level[above]]}, above {names[level[own]]})"
        for path, text in modules.items()
        for found in imports_of(path, text)
        if (above := part_imported(found.name)) is not None
        and level.get(above, -1) > level[own := part_of(path)]
    ]


def circles(modules: Modules) -> list[list[str]]:
    """The circles of parts that import one another, each as the parts in their order. Imports
    for the type checker alone are left out: they are never run, and the layers still hold
    them."""
    edges: dict[str, set[str]] = {}
    for path, text in modules.items():
        for found in imports_of(path, text):
            imported = part_imported(found.name)
            if imported is not None and imported != part_of(path) and not found.for_types_only:
                edges.setdefault(part_of(path), set()).add(imported)
    found_circles: list[list[str]] = []
    finished: set[str] = set()

    def visit(part: str, trail: list[str]) -> None:
        if part in trail:
            found_circles.append(trail[trail.index(part) :])
            return
        if part in finished:
            return
        for imported in sorted(edges.get(part, ())):
            visit(imported, [*trail, part])
        finished.add(part)

    for part in sorted(edges):
        visit(part, [])
    return found_circles


def driver_imports(modules: Modules) -> list[str]:
    """The imports of a database driver outside the one backend that may import it."""
    return [
        str(found)
        for path, text in modules.items()
        for found in imports_of(path, text)
        if (driver := found.name.partition(".")[0]) in DRIVERS
        and not path.startswith(DRIVERS[driver])
    ]


def unplaced_parts(modules: Modules, layers: list[tuple[str, list[str]]]) -> list[str]:
    """What the layers' table gets wrong: a part of herald it does not name, one it names that
    herald has not, one it names twice."""
    named = [part for _, parts in layers for part in parts]
    parts = {part_of(path) for path in modules}
    return (
        [f"{part} is in no layer" for part in sorted(parts - set(named))]
        + [f"{part} is not in herald" for part in sorted(set(named) - parts)]
        + [f"{part} is named twice" for part in sorted({p for p in named if named.count(p) > 1})]
    )


def test_each_module_is_in_one_layer_of_the_architecture_page() -> None:
    layers = documented_layers(ARCHITECTURE.read_text())
    assert unplaced_parts(herald_modules(), layers) == [], "mend docs/ARCHITECTURE.md's table"


def test_each_layer_imports_only_from_itself_and_the_layers_below() -> None:
    layers = documented_layers(ARCHITECTURE.read_text())
    assert climbing_imports(herald_modules(), layers) == [], (
        "move what is imported down (or the importer up), and the page with it"
    )


def test_no_parts_import_each_other_in_a_circle() -> None:
    assert circles(herald_modules()) == []


def test_only_the_store_imports_a_database_driver() -> None:
    assert driver_imports(herald_modules()) == [], (
        "reach the database through the hub (herald.hub), and the hub through the store"
    )


def test_the_checks_catch_a_forbidden_import() -> None:
    modules = herald_modules()
    layers = documented_layers(ARCHITECTURE.read_text())

    def adding(path: str, line: str) -> dict[str, str]:
        return {**modules, path: modules[path] + f"\n{line}\n"}

    assert climbing_imports(adding("config.py", "from herald.webhooks import worker"), layers) == [
        f"config.py line {modules['config.py'].count(chr(10)) + 2} imports"
        " herald.webhooks.worker (ways of delivering, above values)"
    ]
    climbing = adding("delivery/cascade.py", "def f():\n    from herald import serve")
    assert [line.split(" line ")[0] for line in climbing_imports(climbing, layers)] == [
        "delivery/cascade.py"
    ]
    typed = adding("models.py", "if TYPE_CHECKING:\n    from herald.hub import Hub")
    assert len(climbing_imports(typed, layers)) == 1  # a type checker's import climbs too
    # Within one layer, webhooks/ imports subscriptions/: one the other way closes a circle.
    circle = adding("subscriptions/poll.py", "from herald.webhooks.worker import WebhookWorker")
    assert climbing_imports(circle, layers) == []
    assert circles(circle) == [["subscriptions/", "webhooks/"]]
    assert driver_imports(adding("backup.py", "import sqlite3")) == [
        f"backup.py line {modules['backup.py'].count(chr(10)) + 2} imports sqlite3"
    ]
    assert len(driver_imports(adding("store/sqlite/rows.py", "import asyncpg.pool"))) == 1
    assert unplaced_parts({**modules, "pager.py": ""}, layers) == ["pager.py is in no layer"]


def test_the_layers_are_read_from_the_page() -> None:
    layers = dict(documented_layers(ARCHITECTURE.read_text()))
    assert {"hub/"} <= set(layers["the hub"]) and layers["the store"] == ["store/"]
    assert {"cli.py", "backup.py", "settings/"} <= set(layers["commands"])


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
