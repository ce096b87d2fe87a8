"""Store URLs read without opening a store: ``herald.store`` builds its stores from them, and
``herald serve``, ``herald backup`` and ``herald restore`` find a SQLite store's file by them."""

from __future__ import annotations

import importlib.util
import re
from typing import Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from herald.errors import ExtraNotInstalled, InvalidInput

Backend = Literal["sqlite", "postgres"]

POSTGRES_SCHEMES = ("postgresql", "postgres")
SYNCHRONOUS_MODES = ("FULL", "NORMAL", "EXTRA")
"""SQLite's ``synchronous`` pragmas a store may run with."""
SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


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


def synchronous_mode(value: str) -> str:
    """SQLite's ``synchronous`` pragma ``value`` names, in capitals.

    Raises:
        InvalidInput: it names none herald runs with.
    """
    if value.upper() not in SYNCHRONOUS_MODES:
        raise InvalidInput(f"synchronous={value!r}: use FULL, NORMAL or EXTRA")
    return value.upper()


def sqlite_synchronous(url: str) -> str:
    """The ``synchronous`` pragma a ``sqlite:///herald.db?synchronous=NORMAL`` URL asks for
    (FULL when it asks for none).

    Raises:
        InvalidInput: it names none herald runs with.
    """
    return synchronous_mode(dict(parse_qsl(urlsplit(url).query)).get("synchronous", "FULL"))


POSTGRES_DRIVER = "asyncpg"
"""The module a PostgreSQL store needs: installed by the ``postgres`` extra, not by herald alone."""
POSTGRES_EXTRA_MISSING = "PostgreSQL needs the postgres extra: pip install 'herald[postgres]'"


def check_store_url(url: str) -> None:
    """Check a store URL as building its store would, without building it (nor importing the
    store, the hub or what they import).

    Raises:
        InvalidInput: the URL names no backend herald has, or is malformed for its backend.
        ExtraNotInstalled: a PostgreSQL URL, without the ``postgres`` extra (its driver).
    """
    if backend_of(url) == "sqlite":
        sqlite_path(url)
        sqlite_synchronous(url)
    else:
        split_schema(url)
        if importlib.util.find_spec(POSTGRES_DRIVER) is None:
            raise ExtraNotInstalled(POSTGRES_EXTRA_MISSING)


def password_free(url: str) -> str:
    """A URL with its password left out (from the user part and from the query), fit to be
    shown in a log line, or in a command line for a PostgreSQL URL: the tool then asks libpq's
    usual places (PGPASSWORD, ~/.pgpass)."""
    parts = urlsplit(url)
    credentials, at, location = parts.netloc.rpartition("@")
    netloc = f"{credentials.split(':', 1)[0]}{at}{location}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "password"])
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def split_schema(url: str) -> tuple[str, str | None]:
    """The URL without herald's own ``schema`` parameter, and the schema it names (None: the
    database's default search path, usually ``public``).

    Raises:
        InvalidInput: the schema is not a plain identifier.
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for name, value in query if name == "schema"]
    if not schemas:
        return url, None
    schema = schemas[-1]
    if not SCHEMA_NAME.fullmatch(schema):
        raise InvalidInput(
            f"schema={schema!r} in the store URL: name a schema with letters, digits and _"
            " (not starting with a digit, at most 63), e.g. ?schema=herald"
        )
    rest = urlencode([(name, value) for name, value in query if name != "schema"])
    return urlunsplit(parts._replace(query=rest)), schema
