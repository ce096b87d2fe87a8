"""herald: get every event to every AI agent, over whatever its client can take, and lose none."""

from herald.errors import (
    Conflict,
    Forbidden,
    HeraldError,
    InvalidInput,
    NotFound,
    StoreUnavailable,
    TooLarge,
    Unauthorized,
)
from herald.events import Agent, Attempt, Event, EventStatus, NewEvent, Published
from herald.hub import Drained, Hub
from herald.store import Store, open_store

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "Attempt",
    "Conflict",
    "Drained",
    "Event",
    "EventStatus",
    "Forbidden",
    "HeraldError",
    "Hub",
    "InvalidInput",
    "NewEvent",
    "NotFound",
    "Published",
    "Store",
    "StoreUnavailable",
    "TooLarge",
    "Unauthorized",
    "__version__",
    "open_store",
]
