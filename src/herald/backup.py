"""``herald backup`` and ``herald restore``: a consistent copy of a SQLite store, taken while
``herald serve`` serves it, and that copy put back in its place.

A SQLite store is copied by the store itself (``Hub.copy_sqlite_store``: SQLite's online backup
API, from one read snapshot, so that a copy taken under load holds every event committed before
it began and none half-written), into a file beside its destination under a temporary name,
checked there (SQLite's ``integrity_check``, and its events counted) and only then renamed into
place: a failed or interrupted backup leaves any earlier one untouched.

A PostgreSQL store is copied by PostgreSQL's own tools, run here: ``pg_dump`` (its custom
format, written beside the destination and renamed into place once it is whole) and
``pg_restore`` (in one transaction: a failed restore changes nothing). They are found on the
PATH, or in the directory ``pg_config --bindir`` names; when they are not installed, the command
fails, naming the command to run where they are. The URL's password is handed to them in
``PGPASSWORD``, never on their command line (which any user of the machine may read) nor in a
line herald prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from herald.errors import HeraldError, InvalidInput
from herald.hub import Hub
from herald.serving_lock import hold_store
from herald.urls import backend_of, password_free, split_schema, sqlite_path

STALE_BESIDE_STORE = ("-wal", "-shm")
"""The files SQLite keeps beside a store: left from the store a restore replaces, they would be
read as part of the restored one."""


def backup(store_url: str, path: str, *, say: Callable[[str], None] = print) -> None:
    """Copy the store ``store_url`` names to the file ``path`` (replaced if it exists), while it
    may be served; a PostgreSQL store with ``pg_dump``.

    Raises:
        InvalidInput: the store URL is malformed, or ``path`` is the store itself.
        HeraldError: the store cannot be read, or the copy cannot be written or fails its check;
            for PostgreSQL, ``pg_dump`` is not installed or fails.
    """
    if backend_of(store_url) == "postgres":
        _pg_backup(store_url, path, say)
        return
    store = sqlite_path(store_url)
    if Path(path).resolve() == Path(store).resolve():
        raise InvalidInput(f"the backup {path} would replace the store itself: choose another path")
    events = copy_store(store, path)
    say(f"herald: backed up {store} to {path} ({events} events; integrity checked)")


def restore(backup_path: str, store_url: str, *, say: Callable[[str], None] = print) -> None:
    """Put the backup ``backup_path`` in the place of the store ``store_url`` names, once it is
    checked; a PostgreSQL store with ``pg_restore`` (herald should be stopped meanwhile).

    Raises:
        InvalidInput: the store URL is malformed.
        StoreInUse: a herald serves the store: it must be stopped first.
        HeraldError: the backup cannot be read or fails its check, or the store cannot be
            replaced; for PostgreSQL, ``pg_restore`` is not installed or fails. The store is
            left as it was.
    """
    if backend_of(store_url) == "postgres":
        _pg_restore(backup_path, store_url, say)
        return
    store = sqlite_path(store_url)
    with hold_store(store, otherwise="stop it before restoring its store"):
        events = copy_store(backup_path, store, before_rename=_remove_stale_files)
    say(f"herald: restored {store} from {backup_path} ({events} events; integrity checked)")


def _pg_backup(store_url: str, path: str, say: Callable[[str], None]) -> None:
    url = password_free(split_schema(store_url)[0])
    command = shlex.join(["pg_dump", *_pg_dump(store_url, path)])
    tool = _pg_tool("pg_dump", command)
    if not asyncio.run(_holds_a_store(store_url)):  # a mistyped name: no empty dump
        raise HeraldError(
            f"there is no herald store in {password_free(store_url)}: give the --store that"
            " herald serve uses"
        )
    target = Path(path)
    if not target.parent.is_dir():
        raise HeraldError(f"cannot write {path}: there is no directory {target.parent}")
    with _beside(target) as temporary:
        _run_pg_tool(tool, _pg_dump(store_url, str(temporary)), store_url, command)
        _sync(str(temporary))
        os.replace(temporary, target)
        _sync(str(target.parent))
    say(f"herald: backed up {url} to {path} (pg_dump, custom format)")


async def _holds_a_store(store_url: str) -> bool:
    return await Hub.store_exists(store_url)


def _pg_dump(store_url: str, path: str) -> list[str]:
    """``pg_dump``'s arguments (the password left out of the URL)."""
    # herald's own ?schema= is no libpq parameter: pg_dump is told it as --schema.
    url, schema = split_schema(store_url)
    schemas = [f"--schema={schema}"] if schema is not None else []
    return ["--format=custom", *schemas, f"--file={path}", password_free(url)]


def _pg_restore(backup_path: str, store_url: str, say: Callable[[str], None]) -> None:
    url = password_free(split_schema(store_url)[0])
    arguments = ["--clean", "--if-exists", "--no-owner", "--single-transaction",
                 "--exit-on-error", f"--dbname={url}", backup_path]  # fmt: skip
    command = shlex.join(["pg_restore", *arguments])
    tool = _pg_tool("pg_restore", command)
    if not Path(backup_path).is_file():
        raise HeraldError(f"there is no backup at {backup_path}")
    _run_pg_tool(tool, arguments, store_url, command)
    say(f"herald: restored {url} from {backup_path} (pg_restore)")


def _pg_tool(name: str, command: str) -> str:
    """The path of PostgreSQL's tool ``name``, to run as ``command``.

    Raises:
        HeraldError: it is not installed here; the line names the command to run elsewhere.
    """
    tool = _find_pg_tool(name)
    if tool is None:
        raise HeraldError(
            f"{name} is not installed (not on the PATH, nor in pg_config --bindir): install"
            f" PostgreSQL's client tools, or run where they are: {command}"
        )
    return tool


def _run_pg_tool(tool: str, arguments: list[str], store_url: str, command: str) -> None:
    """Run PostgreSQL's ``tool`` with ``arguments``, the store URL's password (if any) in its
    environment; ``command`` is how a message names it (without the password).

    Raises:
        HeraldError: the tool cannot be run, or fails (its first error said).
    """
    password = _password_of(store_url)
    environment = dict(os.environ)
    if password is not None:
        environment["PGPASSWORD"] = password
    try:
        done = subprocess.run(
            [tool, *arguments], env=environment, capture_output=True, text=True, check=False
        )
    except OSError as exc:
        raise HeraldError(f"cannot run {tool}: {exc.strerror}") from exc
    if done.returncode != 0:
        said = _first_error(done.stderr) or f"exit code {done.returncode}"
        if password:
            said = said.replace(password, "***")
        raise HeraldError(f"{Path(tool).name} failed: {said} (the command: {command})")


def _first_error(stderr: str) -> str | None:
    """The line of a PostgreSQL tool's output that says what went wrong: its first error (the
    lines after it give details), else its last line."""
    lines = stderr.strip().splitlines()
    errors = [line for line in lines if ": error: " in line]
    if errors:
        return errors[0]
    return lines[-1] if lines else None


def _find_pg_tool(name: str) -> str | None:
    """The path of PostgreSQL's tool ``name``: on the PATH, else where ``pg_config`` says the
    installed tools are (Debian's packages keep them in a versioned directory)."""
    found = shutil.which(name)
    if found is not None:
        return found
    pg_config = shutil.which("pg_config")
    if pg_config is None:
        return None
    try:
        bindir = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return shutil.which(name, path=bindir) if bindir else None


def _password_of(url: str) -> str | None:
    """The password a PostgreSQL URL holds, in its user part or its query."""
    parts = urlsplit(url)
    if parts.password is not None:
        return unquote(parts.password)
    given = [value for key, value in parse_qsl(parts.query) if key == "password"]
    return given[-1] if given else None


@contextlib.contextmanager
def _beside(target: Path) -> Iterator[Path]:
    """A temporary file's name beside ``target``, removed on the way out if it is still there
    (the copy failed, or was never renamed into place)."""
    try:
        fd, temporary = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
        )
    except OSError as exc:
        raise HeraldError(f"cannot write beside {target}: {exc.strerror}") from exc
    os.close(fd)
    try:
        yield Path(temporary)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def copy_store(
    source: str, destination: str, *, before_rename: Callable[[Path], None] | None = None
) -> int:
    """Copy the SQLite store ``source`` (which may be being written) to ``destination`` by way
    of a checked temporary file beside it; ``before_rename`` runs on the destination just
    before the copy takes its name. Returns how many events the copy holds.

    The copy is a history of its own (``Store.history``): a backup, and each restore of it.

    Raises:
        HeraldError: ``source`` is missing or not a herald store, or the copy cannot be written
            or fails its check; ``destination`` is then left as it was.
    """
    target = Path(destination)
    with _beside(target) as temporary:
        expected = Hub.copy_sqlite_store(source, str(temporary))
        _sync(str(temporary))
        if before_rename is not None:
            before_rename(target)
        os.replace(temporary, target)
        _sync(str(target.parent))
    return expected


def _remove_stale_files(store: Path) -> None:
    for suffix in STALE_BESIDE_STORE:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(store.with_name(store.name + suffix))


def _sync(path: str) -> None:
    """Flush a file, or a directory's entries (a rename), to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
