"""herald stands on its dependencies' public interfaces: no private module or name of theirs is
imported, and none of their classes is subclassed where they do not document it as a way to
extend them. So a release of theirs that keeps its documented interface keeps herald working,
and the pins in pyproject.toml can allow it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "herald"
HELD = ("uvicorn", "mcp", "mcp_types", "starlette", "sse_starlette")
"""The dependencies held to this (their top-level packages)."""
EXTENSIBLE: dict[str, set[str]] = {
    "uvicorn": set(),
    # The low-level Server's public methods (initialization options, run), and the base model
    # every notification type of the SDK is made from, for those it has no model for.
    "mcp": {"Server"},
    "mcp_types": {"Notification"},
    "starlette": set(),
    "sse_starlette": set(),
}
"""The classes of each that are meant to be extended (uvicorn documents none)."""


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"))


def _held(module: str) -> str | None:
    top = module.partition(".")[0]
    return top if top in HELD else None


def _private(dotted: str) -> bool:
    return any(part.startswith("_") for part in dotted.split("."))


def private_uses(module: ast.Module) -> list[str]:
    """The private modules and names of a held dependency ``module`` imports."""
    found = []
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _held(a.name) and _private(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _held(node.module or ""):
            names = [f"{node.module}.{a.name}" for a in node.names]
            found += [name for name in names if _private(name)]
    return found


def subclassed(module: ast.Module) -> list[str]:
    """The classes of a held dependency ``module`` subclasses, but for documented ones."""
    origin: dict[str, str] = {}  # local name -> the dotted name it stands for
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _held(a.name):
                    origin[(a.asname or a.name).partition(".")[0]] = a.name.partition(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _held(node.module or ""):
            for a in node.names:
                origin[a.asname or a.name] = f"{node.module}.{a.name}"
    found = []
    for node in ast.walk(module):
        if not isinstance(node, ast.ClassDef):
            continue
        for base in node.bases:
            # Generic[...] names the class it parametrises
            dotted = ast.unparse(base.value if isinstance(base, ast.Subscript) else base)
            head, _, rest = dotted.partition(".")
            if head not in origin:
                continue
            name = origin[head] + (f".{rest}" if rest else "")
            top = name.partition(".")[0]
            if name.rpartition(".")[2] not in EXTENSIBLE[top]:
                found.append(f"{node.name}({name})")
    return found


def private_attributes(module: ast.Module) -> list[str]:
    """In a module that imports a held dependency: the private attributes it reads or sets on
    what is not its own (``self``, ``cls``), as uvicorn's server was once read."""
    imports = [n for n in ast.walk(module) if isinstance(n, (ast.Import, ast.ImportFrom))]
    if not any(
        _held(a.name) if isinstance(n, ast.Import) else n.level == 0 and _held(n.module or "")
        for n in imports
        for a in n.names
    ):
        return []
    return [
        ast.unparse(node)
        for node in ast.walk(module)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"})
    ]


def test_no_private_module_or_name_of_a_dependency_is_imported() -> None:
    found = {str(path): uses for path, module in _modules() if (uses := private_uses(module))}
    assert found == {}


def test_no_class_of_a_dependency_is_subclassed_unless_documented_for_it() -> None:
    found = {str(path): names for path, module in _modules() if (names := subclassed(module))}
    assert found == {}


def test_no_private_attribute_is_touched_where_a_dependency_is_used() -> None:
    found = {
        str(path): names for path, module in _modules() if (names := private_attributes(module))
    }
    assert found == {}


def test_the_checks_find_what_they_look_for() -> None:
    source = ast.parse(
        "import uvicorn\n"
        "from uvicorn._types import Scope\n"
        "from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as P\n"
        "class A(P): ...\n"
        "class B(uvicorn.Server): ...\n"
        "class C(dict): ...\n"
        "server = uvicorn.Server(config)\n"
        "server._captured_signals.clear()\n"
    )
    assert private_uses(source) == ["uvicorn._types.Scope"]
    assert subclassed(source) == [
        "A(uvicorn.protocols.http.httptools_impl.HttpToolsProtocol)",
        "B(uvicorn.Server)",
    ]
    assert private_attributes(source) == ["server._captured_signals"]
