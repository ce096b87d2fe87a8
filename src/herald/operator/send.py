"""``herald send --file``: a JSON lines file of events, published in batches with a progress
bar. A batch holds at most 1,000 events as stored: a line whose ``to`` is a list of handles
counts one for each. Each event without a ``dedupe_key`` gets one from its line's number and
content, so sending the file again (after an interruption, or with a refused line fixed, or
more lines added at its end) stores only what did not arrive.

Every line is checked before anything is sent: here, that it is a JSON object; then by the hub,
each batch as a dry run (``POST /v1/events?dry_run=true``: every check of a publish, nothing
stored). A refusal names the lines at fault by their numbers, and nothing is sent. Each batch is
made once (its lines as written, each with its key added to its text rather than parsed and
written again), while the hub checks the one before it and the rest of the file is read; once
all are checked, the same bytes are sent, which the hub takes without checking their fields
again. Dry runs store nothing, so two are on their way at once (the hub checks one while the
next arrives); the batches themselves go one at a time, each once the one before it is
answered.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from herald.operator.api import AdminApi, HubRefused, OperatorError
from herald.operator.output import Output

BATCH = 1000
"""Events stored per request, one for each handle of a list: the most ``POST /v1/events``
takes at once."""
PUBLISH = "/v1/events"
CHECK = "/v1/events?dry_run=true"
"""The hub checks each event as it would publish it, and stores nothing."""
MOST_NAMED = 10
"""The lines at fault one refusal names; looking for more stops there."""
_INDEX = re.compile(r"\bevents\[(\d+)\]")
_DUPLICATE = re.compile(rb'"duplicate"\s*:\s*(true|false)')
"""A receipt's flag, with the whitespace JSON allows around its colon."""
CHECKS_AT_ONCE = 2
"""Dry runs on their way at once, each on a connection of its own."""
JSON_SPACE = " \t\n\r"
"""The whitespace JSON allows around a value (``str.strip`` would take more)."""

_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class EventLines:
    """The lines of a file that hold events: for each, its number, its JSON text (whitespace
    around it taken off), whether the event has a ``dedupe_key`` of its own, and how many
    events the hub stores of it (one for each handle of a list).

    (Lists rather than an object per line: objects for 100,000 lines, and the garbage
    collector's walks over them, made reading the file a quarter slower.)"""

    numbers: list[int]
    texts: list[str]
    keyed: list[bool]
    copies: list[int]

    def __len__(self) -> int:
        return len(self.numbers)

    def part(self, start: int, stop: int | None = None) -> EventLines:
        return EventLines(
            self.numbers[start:stop],
            self.texts[start:stop],
            self.keyed[start:stop],
            self.copies[start:stop],
        )

    def without(self, index: int) -> EventLines:
        def left(items: list[Any]) -> list[Any]:
            return items[:index] + items[index + 1 :]

        return EventLines(left(self.numbers), left(self.texts), left(self.keyed), left(self.copies))

    def extend(self, other: EventLines) -> None:
        self.numbers.extend(other.numbers)
        self.texts.extend(other.texts)
        self.keyed.extend(other.keyed)
        self.copies.extend(other.copies)


def _no_lines() -> EventLines:
    return EventLines([], [], [], [])


@dataclass(frozen=True)
class Batch:
    """Lines ``first`` to ``last`` of the file (blank lines skipped), as one request's body."""

    first: int
    last: int
    events: int
    body: bytes
    numbers: Sequence[int] = ()
    """The number of each event's line."""


def read_lines(path: Path) -> EventLines:
    """Every event of the file (``read_parts``, all together); or an error naming the first
    line that is not one."""
    lines = _no_lines()
    for part in read_parts(path):
        lines.extend(part)
    return lines


def read_parts(path: Path, size: int = BATCH) -> Iterator[EventLines]:
    """The events of the file as they are read (so that the first are checked while the rest
    are read), in parts of as many lines as make at most ``size`` events stored (a line over
    that is a part alone, for the hub to refuse by its number); at the first line that is not
    an event, an error naming it."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise OperatorError(f"cannot read {path}: {exc.strerror}") from exc
    part = _no_lines()
    in_part = 0  # the events stored of the part's lines
    decode = _DECODER.raw_decode
    for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
        text = line.strip(JSON_SPACE)
        try:
            event, end = decode(text)
        except json.JSONDecodeError:
            event, end = None, -1
        if end == len(text) and isinstance(event, dict):
            copies = _copies(event)
            if in_part + copies > size and in_part:
                yield part
                part, in_part = _no_lines(), 0
            part.numbers.append(number)
            part.texts.append(text)
            part.keyed.append("dedupe_key" in event)
            part.copies.append(copies)
            in_part += copies
        elif line.strip():  # not blank: not an event
            raise _not_an_event(path, number, line)
    if len(part):
        yield part


def _copies(event: dict[str, Any]) -> int:
    """The events the hub stores of ``event``: one for each handle of a list (a list that is
    not one the hub takes counts as it is, to be refused by the hub)."""
    to = event.get("to")
    return (len(to) or 1) if isinstance(to, list) else 1


def _not_an_event(path: Path, number: int, line: str) -> OperatorError:
    try:
        json.loads(line)  # what is wrong, where in the line as written
    except json.JSONDecodeError as exc:
        return OperatorError(f"{path}:{number}: not JSON ({exc.msg}); nothing was sent")
    return OperatorError(
        f"{path}:{number}: an event is a JSON object ({{to, type, text, ...}}); nothing was sent"
    )


def in_batches(lines: EventLines, size: int = BATCH) -> Iterator[Batch]:
    """The bodies to send, each of as many lines as make at most ``size`` events stored (a
    line over that alone), each event with a dedupe key; each made when it is asked for."""
    start = in_batch = 0
    for index, copies in enumerate(lines.copies):
        if in_batch + copies > size and in_batch:
            yield batch_of(lines.part(start, index))
            start, in_batch = index, 0
        in_batch += copies
    if start < len(lines):
        yield batch_of(lines.part(start))


def batch_of(lines: EventLines) -> Batch:
    """One body of all ``lines``, each event with a dedupe key."""
    numbers = lines.numbers
    keyed = map(_keyed, numbers, lines.texts, lines.keyed)
    body = f"[{','.join(keyed)}]".encode()
    return Batch(numbers[0], numbers[-1], len(numbers), body, numbers)


def _keyed(number: int, text: str, keyed: bool) -> str:
    """The event of line ``number`` as JSON text, with a dedupe key unless it has one.

    The key is the line's number, then the start of the SHA-256 of the line without the
    whitespace around it (``str.strip``'s, as keys have always been made; for a line that holds
    an object that is ``text``): a file sent again gets the same keys. The number first: keys
    of one file then grow in order, which keeps the hub's index of them cheap to add to (random
    keys cost it a third of its rate). A key is made of letters, digits and -: it needs no
    escaping, and goes before the object's closing brace."""
    if keyed:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    key = f'"dedupe_key":"line-{number:09d}-{digest}"}}'
    if text[1:].lstrip(JSON_SPACE) == "}":  # {}: the hub will say what it lacks
        return f"{{{key}"
    return f"{text[:-1]},{key}"


def send_file(api: AdminApi, path: Path, out: Output) -> None:
    total = 0 if out.as_json else _lines_in(path)  # what the bar counts to, for people
    batches = check_every_line(api, path, read_parts(path), out, total)
    events = sum(batch.events for batch in batches)
    stored = repeated = 0
    with _progress(out, events, "sending") as advance:
        for batch, answer in _in_turn(api, PUBLISH, iter(batches)):
            receipts, already_there = _receipts(batch, answer)
            repeated += already_there
            stored += receipts - already_there
            advance(batch.events)
    out.record(
        {"file": str(path), "events": events, "stored": stored, "already_there": repeated},
        "sent",
    )


def _lines_in(path: Path) -> int:
    """The lines of the file, blank ones too (the events are known once it is read)."""
    try:
        return path.read_bytes().count(b"\n") + 1
    except OSError:
        return 0  # read_parts says why


def check_every_line(
    api: AdminApi, path: Path, parts: Iterator[EventLines], out: Output, total: int = 0
) -> list[Batch]:
    """Have the hub check every event, a batch (a part of the file) at a time as the file is
    read, storing none; returns the batches checked, to be sent as they are (the hub, given the
    same bytes again, does not check their fields again).

    Raises:
        OperatorError: the file holds a line that is not an event; or naming each line the hub
            refused (up to ``MOST_NAMED``) by its number and why; or what else stopped the
            check. Either way nothing was sent.
    """
    checked: list[Batch] = []
    refused: list[EventLines] = []  # looked into once every batch is checked
    read: list[EventLines] = []

    def batches() -> Iterator[Batch]:
        for part in parts:
            read.append(part)
            yield batch_of(part)

    with _progress(out, total, "checking") as advance:
        for index, (batch, answer) in enumerate(_checks(api, batches())):
            if isinstance(answer, HubRefused) and _fault_of(answer, batch.events) is not None:
                refused.append(read[index])
            elif isinstance(answer, HubRefused):
                raise _not_checked(path, batch, answer)
            elif isinstance(answer, BaseException):
                raise answer
            else:
                _only_checked(api, batch, answer)
                checked.append(batch)
            advance(batch.events)
    faults: list[tuple[int, str]] = []
    for lines in refused:  # which lines of a batch: each is looked for in turn
        for fault in _refused_lines(api, path, lines):
            faults.append(fault)
            if len(faults) == MOST_NAMED:
                raise OperatorError(
                    _named(faults) + f" ({MOST_NAMED} lines refused, and there may be"
                    " more); nothing was sent: fix them and send again"
                )
    if faults:
        raise OperatorError(_named(faults) + "; nothing was sent: fix them and send again")
    return checked


def _only_checked(api: AdminApi, batch: Batch, answer: bytes) -> None:
    if not answer.startswith(b'{"checked"'):
        raise OperatorError(
            f"the hub at {api.url} stored lines {batch.first}-{batch.last} rather than only"
            " checking them: it is older than this herald command; send the file with a"
            " herald of its own version (nothing is stored twice)"
        )


def _named(faults: list[tuple[int, str]]) -> str:
    return "; ".join(said for _, said in sorted(faults))


def _refused_lines(api: AdminApi, path: Path, lines: EventLines) -> Iterator[tuple[int, str]]:
    """Each line of ``lines`` (one batch's) the hub refuses, as ``(number, "path:number: why")``:
    the hub names one event at fault, and the batch is checked again without it."""
    while len(lines):
        batch = batch_of(lines)
        try:
            answer = api.post_body(CHECK, batch.body)
        except HubRefused as exc:
            index = _fault_of(exc, len(lines))
            if index is None:
                raise _not_checked(path, batch, exc) from exc
            number = lines.numbers[index]
            yield number, f"{path}:{number}: {_INDEX.sub('event', exc.reason, count=1)}"
            lines = lines.without(index)
            continue
        _only_checked(api, batch, answer)
        return


def _fault_of(refusal: HubRefused, events: int) -> int | None:
    """The event at fault a refusal of a batch of ``events`` names; None if it names none, or
    the hub failed (5xx)."""
    return None if refusal.status >= 500 else _index_in(refusal.reason, events)


def _not_checked(path: Path, batch: Batch, refusal: HubRefused) -> OperatorError:
    lines_of = f"lines {batch.first}-{batch.last}"
    return OperatorError(
        f"{path}: {lines_of} could not be checked ({refusal.message}); nothing was sent"
    )


def _index_in(reason: str, events: int) -> int | None:
    """The event a refusal names, in a batch of ``events``; None if it names none."""
    found = _INDEX.search(reason)
    if found is not None:
        return int(found[1])
    return 0 if events == 1 else None  # one event alone is called "event", not by its index


@contextmanager
def _progress(out: Output, total: int, doing: str) -> Iterator[Callable[[int], None]]:
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

    columns = (TextColumn(doing), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=out.console, transient=True) as bar:
        task = bar.add_task("send", total=total)
        yield lambda sent: bar.advance(task, sent)


def _checks(
    api: AdminApi, batches: Iterator[Batch]
) -> Iterator[tuple[Batch, bytes | OperatorError]]:
    """Each batch and the hub's answer to its dry run (or the refusal), in the batches' order;
    ``CHECKS_AT_ONCE`` of them on their way at once, and the next batch made meanwhile. (A dry
    run stores nothing: which of them the hub answers first does not matter.)"""
    waiting: deque[tuple[Batch, Future[bytes]]] = deque()
    with ThreadPoolExecutor(CHECKS_AT_ONCE, "herald-check") as posting:
        try:
            for batch in batches:
                if len(waiting) > CHECKS_AT_ONCE:  # one more made, ready to go
                    yield _answer_of(*waiting.popleft())
                waiting.append((batch, posting.submit(api.post_body, CHECK, batch.body)))
            while waiting:
                yield _answer_of(*waiting.popleft())
        finally:
            for _, posted in waiting:
                posted.cancel()


def _answer_of(batch: Batch, posted: Future[bytes]) -> tuple[Batch, bytes | OperatorError]:
    try:
        return batch, posted.result()
    except OperatorError as exc:
        return batch, exc


def _in_turn(
    api: AdminApi, path: str, batches: Iterator[Batch]
) -> Iterator[tuple[Batch, bytes | BaseException]]:
    """Each batch and the hub's answer to it (or what stopped it: nothing is sent after it),
    posted to ``path`` one at a time on one connection: a batch is sent once the one before it
    is answered, so that when one fails every line before it has arrived and none after it has
    been sent. (The batches are made and checked already: there is nothing left to do while the
    hub stores one, so no thread of its own sends them.)"""
    for batch in batches:
        try:
            answer = api.post_body(path, batch.body)
        except BaseException as exc:  # told to the caller, and nothing more is sent
            yield batch, exc
            return
        yield batch, answer


def _receipts(batch: Batch, answer: bytes | BaseException) -> tuple[int, int]:
    """How many receipts the hub's answer to ``batch`` holds, and how many of them say
    ``"duplicate": true`` (an event stored before).

    Counted in the answer's bytes rather than from the answer decoded, which made 1,000
    objects a batch to read two numbers from them (a millisecond a batch while the hub waited
    for the next one). Exact: a receipt's values are an id (letters and digits), a number and a
    boolean, so no string of the answer can hold a quote, and each ``"duplicate"`` is a key."""
    if isinstance(answer, OperatorError):
        # Checked already: a refusal now is the hub's (an agent deleted since, say).
        index = None
        if isinstance(answer, HubRefused) and answer.status < 500:
            index = _index_in(answer.reason, batch.events)
        at = f" at line {batch.numbers[index]}" if index is not None else ""
        raise OperatorError(
            f"lines {batch.first}-{batch.last} were refused{at} ({answer.message}); the lines"
            f" before {batch.first} were sent: fix the file and send it again (nothing is sent"
            " twice)"
        ) from answer
    if isinstance(answer, BaseException):
        raise answer
    flags = _DUPLICATE.findall(answer)
    return len(flags), flags.count(b"true")
