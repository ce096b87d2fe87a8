"""Store URLs read without opening a store: ``herald.store`` builds its stores from them, and
``herald serve``, ``herald backup`` and ``herald restore`` find a SQLite store's file by them."""

from __future__ import annotations

from typing import Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from herald.errors import InvalidInput

Backend = Literal["sqlite", "postgres"]

POSTGRES_SCHEMES = ("postgresql", "postgres")


def backend_of(url: str) -> Backend:
    """Which backend a store URL names.

    Raises:
        InvalidInput: the URL names no backend herald has.
    """
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        return "sqlite"
    if scheme in POSTGRES_SCHEMES:
        return "postgres"
    raise InvalidInput(
        f"unknown store URL {url!r}: use sqlite:///path.db or postgresql://user@host/db"
    )


def sqlite_path(url: str) -> str:
    """The file of a ``sqlite:///relative.db`` or ``sqlite:////absolute.db`` URL, as given.

    Raises:
        InvalidInput: the URL is not a SQLite URL, or names no file.
    """
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        raise InvalidInput(f"{url!r} is not a SQLite store URL: use sqlite:///path.db")
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not path:
        raise InvalidInput("a SQLite store URL needs a file: sqlite:///herald.db")
    return path


def without_password(url: str) -> str:
    """A PostgreSQL URL with its password left out (from the user part and from the query), fit
    to be shown in a command line: the tool then asks libpq's usual places (PGPASSWORD,
    ~/.pgpass)."""
    parts = urlsplit(url)
    credentials, at, location = parts.netloc.rpartition("@")
    netloc = f"{credentials.split(':', 1)[0]}{at}{location}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "password"])
    return urlunsplit(parts._replace(netloc=netloc, query=query))
