"""herald: get every event to every AI agent, over whatever its client can take, and lose none."""

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
from herald.models import Agent, Attempt, Drained, Event, EventStatus, NewEvent, Published, Reply
from herald.store import Store, open_store

__version__ = "0.1.0"

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
