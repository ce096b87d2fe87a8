"""The hub: herald's one door to its store. Every module above the store reaches it through a
``Hub`` (and the hub's ``endpoints``, ``subscriptions``, ``presence``, ``event_types``,
``publisher_keys`` and ``feed``), never directly, so each rule is kept in one place."""

from herald.hub.catalogue import Catalogue
from herald.hub.endpoints import EndpointBook
from herald.hub.feed import Feed
from herald.hub.hub import Hub
from herald.hub.presence import Presence
from herald.hub.publisher_keys import PublisherKeyBook
from herald.hub.subscriptions import SubscriptionBook

__all__ = [
    "Catalogue",
    "EndpointBook",
    "Feed",
    "Hub",
    "Presence",
    "PublisherKeyBook",
    "SubscriptionBook",
]
