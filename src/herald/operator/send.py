"""``herald send --file``: a JSON lines file of events, published in batches with a progress
bar. Each event without a ``dedupe_key`` gets one from its line's content (and, for lines alike,
which of them it is), so sending the file again (after an interruption, or with a refused line
fixed, or more lines added) stores only what did not arrive."""

from __future__ import annotations

import hashlib
import json
import queue
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from herald.operator.api import AdminApi, OperatorError
from herald.operator.output import Output

BATCH = 1000
"""Events per request: the most ``POST /v1/events`` takes at once."""
IN_FLIGHT = 4
"""Batches sent at once."""


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every event of the file, each with a dedupe key, or an error naming the first bad line;
    nothing is sent before the whole file is read."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise OperatorError(f"cannot read {path}: {exc.strerror}") from exc
    seen: Counter[str] = Counter()
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
        digest = hashlib.sha256(line.strip().encode()).hexdigest()[:32]
        seen[digest] += 1
        event.setdefault("dedupe_key", f"line-{digest}-{seen[digest]}")
        events.append({"line": number, "event": event})
    return events


def send_file(api: AdminApi, path: Path, out: Output) -> None:
    events = read_events(path)
    batches = [events[start : start + BATCH] for start in range(0, len(events), BATCH)]
    stored = repeated = 0
    columns = (
        TextColumn("sending"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    refused: list[tuple[int, int, str]] = []
    # A few batches in flight at once, each on a connection of its own: the hub commits one
    # while the next is on its way. Order does not matter: each event has its dedupe key.
    with (
        Progress(*columns, console=out.console, disable=out.as_json, transient=True) as bar,
        ThreadPoolExecutor(max_workers=IN_FLIGHT) as pool,
    ):
        task = bar.add_task("send", total=len(events))
        clients = queue.SimpleQueue[AdminApi]()
        for _ in range(IN_FLIGHT):
            clients.put(api.another())

        def send(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
            client = clients.get()
            try:
                answer = client.post("/v1/events", [item["event"] for item in batch])
            finally:
                clients.put(client)
            receipts: list[dict[str, Any]] = answer["events"]
            return receipts

        sending = {pool.submit(send, batch): batch for batch in batches}
        for done in as_completed(sending):
            batch = sending[done]
            try:
                receipts = done.result()
            except OperatorError as exc:
                refused.append((batch[0]["line"], batch[-1]["line"], exc.message))
                continue
            repeated += sum(1 for receipt in receipts if receipt["duplicate"])
            stored += sum(1 for receipt in receipts if not receipt["duplicate"])
            bar.advance(task, len(batch))
        while not clients.empty():
            clients.get().close()
    if refused:
        first, last, why = min(refused)
        raise OperatorError(
            f"lines {first}-{last} were refused ({why}); {len(refused)} batch(es) of"
            f" {len(batches)} were not sent: fix the file and send it again (what arrived is"
            " not sent twice)"
        )
    out.record(
        {"file": str(path), "events": len(events), "stored": stored, "already_there": repeated},
        "sent",
    )
