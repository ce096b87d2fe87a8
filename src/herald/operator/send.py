"""``herald send --file``: a JSON lines file of events, published in batches with a progress
bar. Each event without a ``dedupe_key`` gets one from its line's number and content, so sending
the file again (after an interruption, or with a refused line fixed, or more lines added at its
end) stores only what did not arrive."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from herald.operator.api import AdminApi, OperatorError
from herald.operator.output import Output

BATCH = 1000
"""Events per request: the most ``POST /v1/events`` takes at once."""


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every event of the file, each with a dedupe key, or an error naming the first bad line;
    nothing is sent before the whole file is read."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise OperatorError(f"cannot read {path}: {exc.strerror}") from exc
    events = []
    for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as exc:
            raise OperatorError(f"{path}:{number}: not JSON ({exc.msg}); nothing was sent") from exc
        if not isinstance(event, dict):
            raise OperatorError(
                f"{path}:{number}: an event is a JSON object ({{to, type, text, ...}});"
                " nothing was sent"
            )
        # The line's number first: keys of one file then grow in order, which keeps the hub's
        # index of them cheap to add to (random keys cost it a third of its rate).
        digest = hashlib.sha256(line.strip().encode()).hexdigest()[:16]
        event.setdefault("dedupe_key", f"line-{number:09d}-{digest}")
        events.append({"line": number, "event": event})
    return events


def send_file(api: AdminApi, path: Path, out: Output) -> None:
    events = read_events(path)
    stored = repeated = 0
    columns = (
        TextColumn("sending"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=out.console, disable=out.as_json, transient=True) as bar:
        task = bar.add_task("send", total=len(events))
        for start in range(0, len(events), BATCH):
            batch = events[start : start + BATCH]
            try:
                answer = api.post("/v1/events", [item["event"] for item in batch])
            except OperatorError as exc:
                first, last = batch[0]["line"], batch[-1]["line"]
                raise OperatorError(
                    f"lines {first}-{last} were refused ({exc.message}); the lines before"
                    f" {first} were sent: fix the file and send it again (nothing is sent twice)"
                ) from exc
            receipts = answer["events"]
            repeated += sum(1 for receipt in receipts if receipt["duplicate"])
            stored += sum(1 for receipt in receipts if not receipt["duplicate"])
            bar.advance(task, len(batch))
    out.record(
        {"file": str(path), "events": len(events), "stored": stored, "already_there": repeated},
        "sent",
    )
