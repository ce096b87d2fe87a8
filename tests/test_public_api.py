"""herald's public API is deliberate: what ``__all__`` names, and nothing else by accident."""

import inspect
import subprocess
import sys

import pytest

import herald


def test_the_public_api_is_what_all_names() -> None:
    for name in herald.__all__:  # each is imported on its first use
        getattr(herald, name)
    exported = {
        name
        for name, value in vars(herald).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert exported == set(herald.__all__) - {"__version__"}


def test_every_error_is_a_herald_error() -> None:
    errors = [
        getattr(herald, name) for name in herald.__all__ if name.endswith(("Error", "Unavailable"))
    ]
    errors += [herald.InvalidInput, herald.TooLarge, herald.NotFound, herald.Conflict]
    errors += [herald.Unauthorized, herald.Forbidden]
    assert all(issubclass(error, herald.HeraldError) for error in errors)


def test_a_name_not_in_the_api_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        herald.Nothing  # type: ignore[attr-defined]  # noqa: B018
    assert set(herald.__all__) <= set(dir(herald))


def test_importing_herald_imports_none_of_what_its_names_need() -> None:
    # The names load on first use: a program that only needs one pays for no other.
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, herald; print(sorted(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "'herald.hub'" not in loaded and "'pydantic'" not in loaded
    assert "'starlette'" not in loaded and "'mcp'" not in loaded
