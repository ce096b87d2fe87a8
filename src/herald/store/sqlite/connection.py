"""The writer's connection to a SQLite store, with what it remembers of the file between its
transactions so that later ones need no statement to know it: the push windows open
(``OpenWindows``). One process serves the file (``herald.serving_lock``) and this connection
writes every change, so what it wrote or read stays true until it changes it; whatever a
transaction, or a part of one, undoes, it forgets (``undone``), to be read from the file again.
"""

from __future__ import annotations

import sqlite3
from typing import Any

REMEMBERED_WINDOWS = 100_000
"""The most windows remembered (one per agent and rule): past it they are read again."""

WindowKey = tuple[str, str]
"""An agent's id and the name of one of its rules (``Hold.rule``)."""
Window = tuple[str, int, int]
"""A window's id, when it opened and when it ends (ms since the epoch)."""


class OpenWindows:
    """The last window of each agent's rule this connection opened or read, until it is
    closed. Only an answer for a time within the window's span is taken from here; any other
    is read from the file."""

    def __init__(self) -> None:
        self._windows: dict[WindowKey, Window] = {}
        self._keys: dict[str, WindowKey] = {}

    def open_at(self, agent_id: str, rule: str, at: int) -> str | None:
        """The id of the agent's window of ``rule`` remembered open at ``at`` (None: none is
        remembered; the file may hold one)."""
        window = self._windows.get((agent_id, rule))
        if window is not None and window[1] <= at < window[2]:
            return window[0]
        return None

    def remember(self, agent_id: str, rule: str, window: Window) -> None:
        if len(self._windows) >= REMEMBERED_WINDOWS:
            self.forget_all()
        key = (agent_id, rule)
        replaced = self._windows.get(key)
        if replaced is not None:
            self._keys.pop(replaced[0], None)
        self._windows[key] = window
        self._keys[window[0]] = key

    def closed(self, window_id: str) -> None:
        key = self._keys.pop(window_id, None)
        if key is not None:
            del self._windows[key]

    def forget_all(self) -> None:
        self._windows.clear()
        self._keys.clear()


class WriterConnection(sqlite3.Connection):
    """The worker's connection (made by ``sqlite3.connect(factory=WriterConnection)``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open_windows = OpenWindows()

    def undone(self) -> None:
        """A rollback (of the transaction or to a savepoint) undid what was written since:
        forget all that is remembered, as some of it may have been written then."""
        self.open_windows.forget_all()
