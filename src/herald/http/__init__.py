"""herald's HTTP edge: the JSON API, the drain for stateless clients, health."""

from herald.http.app import create_app

__all__ = ["create_app"]
