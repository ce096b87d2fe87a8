"""What the operator's commands print: tables for people (rich), or JSON lines with ``--json``
for scripts, one object per line (rich is then not even imported: scripts start sooner)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


class Output:
    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    @cached_property
    def console(self) -> Console:
        from rich.console import Console

        return Console(highlight=False, soft_wrap=True)

    def rows(self, rows: Iterable[dict[str, Any]], columns: Sequence[str], title: str) -> None:
        """A list of objects: a table of these columns, or each whole object as a JSON line."""
        if self.as_json:
            for row in rows:
                _json_line(row)
            return
        from rich.table import Table

        table = Table(title=title, title_justify="left")
        for column in columns:
            table.add_column(column, overflow="fold")  # an id cut short is no id
        for row in rows:
            table.add_row(*(_cell(row.get(column)) for column in columns))
        self.console.print(table)

    def record(self, record: dict[str, Any], title: str) -> None:
        """One object: its fields, one per line, or a JSON line."""
        if self.as_json:
            _json_line(record)
            return
        from rich.table import Table

        table = Table(title=title, title_justify="left", show_header=False)
        table.add_column("field", style="bold")
        table.add_column("value", overflow="fold")
        for name, value in record.items():
            table.add_row(name, _cell(value))
        self.console.print(table)

    def note(self, text: str) -> None:
        """A line for people (on stderr with --json, so that stdout stays JSON lines)."""
        if self.as_json:
            print(text, file=sys.stderr)
        else:
            self.console.print(text)


def _json_line(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, separators=(",", ":")), flush=True)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
