"""One process at a time on a SQLite store: ``herald serve`` holds ``<db>.lock`` for as long as
it runs, and ``herald restore`` while it replaces the file.

SQLite lets a second process open the file, but herald's delivery (who is connected, what is
leased to whom) lives in the serving process: a second server would deliver beside it blindly.
The lock is ``flock`` on a file beside the store, so the OS drops it when its holder exits, even
by a crash or SIGKILL, and no stale lock is ever left to clear by hand. Readers (``herald
backup``) do not take it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from herald.errors import StoreInUse, StoreUnavailable


def lock_path(db_path: str) -> Path:
    """The lock file of a SQLite store, beside the file it names (symbolic links followed, so
    two names of one file share one lock)."""
    db = Path(db_path).resolve()
    return db.with_name(db.name + ".lock")


@contextlib.contextmanager
def hold_store(db_path: str, *, otherwise: str) -> Iterator[None]:
    """Hold the store's lock while inside.

    Raises:
        StoreInUse: another process holds it; the message names the file and that process's
            pid, then says ``otherwise`` (what the user should do instead).
        StoreUnavailable: the lock file cannot be opened (no such directory, no permission).
    """
    path = lock_path(db_path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreUnavailable(f"cannot open the lock file {path}: {exc.strerror}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreInUse(f"{db_path} is in use by {_holder(fd)}; {otherwise}") from None
        # Only a refused process reads it, to name whom it waits for.
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)  # closing drops the lock


def _holder(fd: int) -> str:
    pid = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return f"another herald (pid {pid})" if pid.isdigit() else "another herald"
