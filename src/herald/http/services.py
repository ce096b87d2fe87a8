"""What the HTTP handlers work with, assembled once by ``create_app`` and kept on the app's
state: the handlers are plain functions of a request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.requests import Request

from herald.addresses import AddressGuard
from herald.delivery.engine import Notifier
from herald.http.auth import MetricsAccess
from herald.http.limits import Limits
from herald.hub import Hub
from herald.inputs.events import CheckedBatches

if TYPE_CHECKING:
    from herald.http.app import HeraldApp

APP_SCOPE_KEY = "herald.app"
"""The scope key of the app serving a request (``herald.http.app.HeraldApp`` puts itself there).
Starlette's ``request.app`` reads ``scope["app"]``, which it documents only for its own
application class, and which changes how its router and form parser answer errors: herald's app
is not one, so it uses a key of its own."""


@dataclass(frozen=True)
class Services:
    hub: Hub
    notifier: Notifier
    limits: Limits
    """What each key may hold or do at once."""
    guard: AddressGuard
    """Where webhook and OpenClaw targets may point, checked as they are set."""
    metrics_access: MetricsAccess
    """Who besides the admin may read ``GET /metrics``."""
    checked_batches: CheckedBatches
    """The batch bodies a dry run passed lately: their publish is not checked field by field
    again."""


def serving_app(request: Request) -> HeraldApp:
    """The app that serves ``request``."""
    app: HeraldApp = request.scope[APP_SCOPE_KEY]
    return app


def services(request: Request) -> Services:
    """The services of the app that serves ``request``."""
    found = serving_app(request).state.services
    assert isinstance(found, Services), "create_app stores the services on the app's state"
    return found
