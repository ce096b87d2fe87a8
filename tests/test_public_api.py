"""herald's public API is deliberate: what ``__all__`` names, and nothing else by accident."""

import inspect

import herald


def test_the_public_api_is_what_all_names() -> None:
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
