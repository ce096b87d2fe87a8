"""``herald send --file``: a JSON lines file of events, published in batches with a progress
bar. Each event without a ``dedupe_key`` gets one from its line's number and content, so sending
the file again (after an interruption, or with a refused line fixed, or more lines added at its
end) stores only what did not arrive.

The whole file is checked before anything is sent: a line that is not a JSON object is named
and nothing is sent. Each line is sent as it is written, its key added to its text, rather than
parsed and written again; and the next batch is on its way while the answer to the last is read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from herald.operator.api import AdminApi, OperatorError
from herald.operator.output import Output

BATCH = 1000
"""Events per request: the most ``POST /v1/events`` takes at once."""
JSON_SPACE = " \t\n\r"
"""The whitespace JSON allows around a value (``str.strip`` would take more)."""

_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Batch:
    """Lines ``first`` to ``last`` of the file (blank lines skipped), as one request's body."""

    first: int
    last: int
    events: int
    body: bytes


def read_batches(path: Path, size: int = BATCH) -> list[Batch]:
    """Every event of the file, each with a dedupe key, in bodies of ``size`` events; or an
    error naming the first bad line: nothing is sent before the whole file is read."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise OperatorError(f"cannot read {path}: {exc.strerror}") from exc
    batches = []
    numbers: list[int] = []
    texts: list[str] = []
    for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        numbers.append(number)
        texts.append(_keyed(path, number, line, stripped))
        if len(texts) == size:
            batches.append(_batch(numbers, texts))
            numbers, texts = [], []
    if texts:
        batches.append(_batch(numbers, texts))
    return batches


def _keyed(path: Path, number: int, line: str, stripped: str) -> str:
    """The line's event as JSON text, with a dedupe key added unless it has one (from the
    line ``stripped`` of its whitespace, as the keys have always been made)."""
    text = line.strip(JSON_SPACE)
    try:
        event, end = _DECODER.raw_decode(text)
    except json.JSONDecodeError:
        event, end = None, -1
    if end != len(text):  # json.loads says what is wrong, where in the line as written
        try:
            json.loads(line)
        except json.JSONDecodeError as exc:
            problem = f"not JSON ({exc.msg})"
            raise OperatorError(f"{path}:{number}: {problem}; nothing was sent") from exc
    if not isinstance(event, dict):
        raise OperatorError(
            f"{path}:{number}: an event is a JSON object ({{to, type, text, ...}});"
            " nothing was sent"
        )
    if "dedupe_key" in event:
        return text
    # The line's number first: keys of one file then grow in order, which keeps the hub's
    # index of them cheap to add to (random keys cost it a third of its rate). A key is made
    # of letters, digits and -: it needs no escaping, and the object's closing brace is the
    # last character of its text.
    digest = hashlib.sha256(stripped.encode()).hexdigest()[:16]
    key = f'"dedupe_key":"line-{number:09d}-{digest}"}}'
    return f"{text[:-1]},{key}" if event else f"{{{key}"


def _batch(numbers: list[int], texts: list[str]) -> Batch:
    body = f"[{','.join(texts)}]".encode()
    return Batch(numbers[0], numbers[-1], len(texts), body)


def send_file(api: AdminApi, path: Path, out: Output) -> None:
    batches = read_batches(path)
    events = sum(batch.events for batch in batches)
    stored = repeated = 0
    with _progress(out, events) as advance:
        for batch, receipts in _send_in_turn(api, batches):
            already_there = sum(1 for receipt in receipts if receipt["duplicate"])
            repeated += already_there
            stored += len(receipts) - already_there
            advance(batch.events)
    out.record(
        {"file": str(path), "events": events, "stored": stored, "already_there": repeated},
        "sent",
    )


@contextmanager
def _progress(out: Output, total: int) -> Iterator[Callable[[int], None]]:
    """A bar of the events sent, for people; none with ``--json`` (nor rich to import)."""
    if out.as_json:
        yield lambda _: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("sending"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=out.console, transient=True) as bar:
        task = bar.add_task("send", total=total)
        yield lambda sent: bar.advance(task, sent)


def _send_in_turn(
    api: AdminApi, batches: list[Batch]
) -> Iterator[tuple[Batch, list[dict[str, Any]]]]:
    """Each batch and the hub's receipts for its events, sent one at a time on one connection:
    a batch is sent once the one before it is stored, so that when one fails every line before
    it has arrived and none after it has been sent. The next batch leaves (from a thread) while
    the answer to the last is read here."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="herald-send") as sender:
        sending: Future[bytes] | None = None
        for index, batch in enumerate(batches):
            if sending is None:
                sending = sender.submit(api.post_body, "/v1/events", batch.body)
            try:
                answer = sending.result()
            except OperatorError as exc:
                raise OperatorError(
                    f"lines {batch.first}-{batch.last} were refused ({exc.message}); the lines"
                    f" before {batch.first} were sent: fix the file and send it again (nothing"
                    " is sent twice)"
                ) from exc
            sending = None
            if index + 1 < len(batches):
                sending = sender.submit(api.post_body, "/v1/events", batches[index + 1].body)
            yield batch, json.loads(answer)["events"]
