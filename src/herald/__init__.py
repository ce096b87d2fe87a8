"""herald: get every event to every AI agent, over whatever its client can take, and lose none.

The names below are imported when first used, not with the package: ``import herald`` then
costs nothing, and a command that only calls a hub's HTTP API (``herald send``, ``herald
agent``...) does not load the server, the store and their libraries to start."""

import importlib
import typing

if typing.TYPE_CHECKING:
    from herald.capabilities import DeliveryCapabilities, detect
    from herald.config import ServeConfig
    from herald.delivery.engine import Notifier
    from herald.errors import (
        Conflict,
        Forbidden,
        HeraldError,
        InvalidInput,
        NotFound,
        RateLimited,
        StoreUnavailable,
        TooLarge,
        Unauthorized,
    )
    from herald.hub import Hub
    from herald.models import (
        Agent,
        Attempt,
        Drained,
        Event,
        EventStatus,
        NewEvent,
        Published,
        Reply,
    )
    from herald.store import Store, open_store

__version__ = "0.1.0"

_HOMES = {
    "herald.capabilities": ("DeliveryCapabilities", "detect"),
    "herald.config": ("ServeConfig",),
    "herald.delivery.engine": ("Notifier",),
    "herald.errors": (
        "Conflict",
        "Forbidden",
        "HeraldError",
        "InvalidInput",
        "NotFound",
        "RateLimited",
        "StoreUnavailable",
        "TooLarge",
        "Unauthorized",
    ),
    "herald.hub": ("Hub",),
    "herald.models": (
        "Agent",
        "Attempt",
        "Drained",
        "Event",
        "EventStatus",
        "NewEvent",
        "Published",
        "Reply",
    ),
    "herald.store": ("Store", "open_store"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "Agent",
    "Attempt",
    "Conflict",
    "DeliveryCapabilities",
    "Drained",
    "Event",
    "EventStatus",
    "Forbidden",
    "HeraldError",
    "Hub",
    "InvalidInput",
    "NewEvent",
    "NotFound",
    "Notifier",
    "Published",
    "RateLimited",
    "Reply",
    "ServeConfig",
    "Store",
    "StoreUnavailable",
    "TooLarge",
    "Unauthorized",
    "__version__",
    "detect",
    "open_store",
]


def __getattr__(name: str) -> typing.Any:
    """Import a public name on its first use, and keep it."""
    home = _HOME_OF.get(name)
    if home is None:
        raise AttributeError(f"module 'herald' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
