"""The admin's live feed, as the hub reads it (``hub.feed``): the journal's rows in the
journal's order, each turned into its items (``herald.feed`` says what they are), a page at a
time.

That order is one for every reader and every resume, each item is given exactly once, and
each agent's events come in seq order. It is the commit order on SQLite; on PostgreSQL it is
the order of the writing transactions' ids, which is not quite the commit order (of two
transactions whose work does not depend on each other, the one that took its id first may
commit second): a row is read only once every transaction that could still come before it has
ended, so none is ever passed over (``store/postgres/journal.py``).

Each reader reads the store at its own pace, one page in hand at a time: a slow reader holds
nothing of anyone else's and slows no publisher (nothing waits for it), and one that went away
resumes from its cursor. Readers wait for a wake-up: a commit in this process that wrote a
journal row, another process's publish (the hub's listeners), or the poll of their caller."""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from herald.errors import InvalidInput
from herald.feed import (
    ACK_WAY,
    AttemptRef,
    EndpointChange,
    EventHead,
    ExpiredRef,
    FeedCursor,
    FeedItem,
    FeedMatch,
    FeedResume,
    ItemRef,
    JournalPosition,
    JournalRow,
    LoopGuardTrip,
    PublishedRef,
    feed_id,
    item_data,
)
from herald.store import Store
from herald.times import iso_ms

ROW_PAGE = 100
"""Journal rows one read of the store takes for a reader."""
ITEM_PAGE = 500
"""The most items one ``FeedReader.read`` gives: events are read for them in one query."""
TYPE_SCAN = 5000
"""The most journal rows ``FeedReader.read_newest`` looks through for items of a type."""
AHEAD = (
    "Last-Event-ID (or ?after=) {cursor} is ahead of anything this herald's stream gave;"
    " leave it out to start from now"
)
START = FeedCursor(JournalPosition(0, 0))
"""Before the journal's first row, on both stores."""

Ref = tuple[JournalRow, int, ItemRef]
"""An item still to be read: its row, its index in the row, what it names."""


class Feed:
    """The feed part of the hub: where readers start, and their wake-ups."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._history: str | None = None
        self._changed = asyncio.Event()
        self._taken = False
        store.add_journal_listener(self.wake)

    def wake(self) -> None:
        """Something was journaled: wake every reader waiting on ``changed()``. Called after
        every commit that journals: with no reader since the last, there is no one to wake."""
        if self._taken:
            changed, self._changed, self._taken = self._changed, asyncio.Event(), False
            changed.set()

    def changed(self) -> asyncio.Event:
        """Set at the next wake-up. Take it before a read, wait on it once the read found
        nothing more: a commit in between is not missed."""
        self._taken = True
        return self._changed

    async def history(self) -> str:
        """The store's history, which every item's id names (``Store.history``). Read once: a
        store is restored only while no herald serves it."""
        if self._history is None:
            self._history = await self._store.history()
        return self._history

    async def open(self, after: FeedResume | FeedCursor | None, match: FeedMatch) -> FeedReader:
        """A reader of the items after ``after`` (None: from now) that ``match``: what a client
        sent, or a place a reader of this hub's feed was at (in this history). A cursor older
        than the journal keeps starts at the oldest it keeps, with a ``gap`` item first; so
        does one from another history of the store (given before a restore, when the journal's
        places were handed out again, or before ids named their history): it is no place in
        this one, and taking it as one could pass over items without a word.

        Raises:
            InvalidInput: ``after`` is past anything this store's journal gave.
        """
        history = await self.history()
        if isinstance(after, FeedCursor):
            after = FeedResume(after, history)
        bounds = await self._store.journal_bounds()
        if after is None:
            return FeedReader(self._store, history, FeedCursor(bounds.head), match)
        oldest = START if bounds.horizon is None else FeedCursor(bounds.horizon)
        if after.history != history:
            gap = FeedItem("gap", oldest, _gap(str(after), feed_id(history, oldest), lost=False))
            return FeedReader(self._store, history, oldest, match, gap)
        if after.cursor.row > bounds.ceiling:
            raise InvalidInput(AHEAD.format(cursor=after))
        if after.cursor.key < oldest.key:
            gap = FeedItem("gap", oldest, _gap(str(after), feed_id(history, oldest), lost=True))
            return FeedReader(self._store, history, oldest, match, gap)
        return FeedReader(self._store, history, after.cursor, match)


class FeedReader:
    """One client's place in the feed. ``cursor`` is where it has read to (items it was given,
    or that its match left out); ``caught_up`` says the last read reached the journal's end."""

    def __init__(
        self,
        store: Store,
        history: str,
        cursor: FeedCursor,
        match: FeedMatch,
        gap: FeedItem | None = None,
    ) -> None:
        self._store = store
        self.history = history
        """The store's history, which the items' ids name (``id_of``)."""
        self.cursor = cursor
        self.match = match
        self.caught_up = False
        self._gap = gap
        self._rows: deque[JournalRow] = deque()
        self._end: JournalPosition | None = None
        """Where the journal ended when a read of it came back short: the reader is there once
        it has taken the rows that read gave."""

    def id_of(self, cursor: FeedCursor) -> str:
        """The id of the place ``cursor`` (an item's), as the client sends it back to go on
        after it."""
        return feed_id(self.history, cursor)

    async def read(self, limit: int = ITEM_PAGE) -> list[FeedItem]:
        """The next items (at most ``limit`` read, fewer once the match filters them), oldest
        first; none when the journal has nothing after ``cursor`` yet.

        Raises:
            StoreUnavailable: the store failed.
        """
        items = [self._gap] if self._gap is not None else []
        self._gap = None
        refs = await self._next_refs(limit)
        return items + await self._items(refs)

    async def read_newest(self, limit: int) -> list[FeedItem]:
        """The newest items after ``cursor``, at most ``limit``, for a reader that keeps up
        with a person rather than with the hub (the console's live tail): when more came, a
        ``skipped`` item comes first, and its ``after`` is where to read back what it left out.
        The reader is caught up afterwards.

        Only the journal's newest rows are read: ``limit`` of them without a type to match, so
        a busy hub costs such a reader no more than a quiet one; with a type, which is known
        only from each event, up to ``TYPE_SCAN`` rows, from the newest back until ``limit``
        items match.

        Raises:
            StoreUnavailable: the store failed.
        """
        start = self.cursor
        gap = [self._gap] if self._gap is not None else []
        self._gap = None
        self._rows.clear()
        self._end = None
        self.caught_up = True
        scan = limit if self.match.type_glob is None else max(limit, TYPE_SCAN)
        # One row more than it looks at: if that one comes back, it and what lies before it
        # are passed over.
        page = await self._store.read_journal(
            self.cursor.row,
            scan + 1,
            inclusive=self.cursor.item is not None,
            agent_id=self.match.agent_id,
            newest=True,
        )
        rows = page.rows[1:] if len(page.rows) > scan else page.rows
        refs = _newest_first(rows, self.cursor)
        kept: list[FeedItem] = []
        passed_to = None
        while passed_to is None and len(kept) < limit:
            need = limit - len(kept)
            chunk = list(
                itertools.islice(refs, need if self.match.type_glob is None else ITEM_PAGE)
            )
            if not chunk:
                break
            found = await self._items(chunk[::-1])
            if len(found) > need:  # matches left out: the skipped item ends with the newest
                passed_to = found[-need - 1].cursor
            kept = found[-need:] + kept
        if passed_to is None and (newest_left := next(refs, None)) is not None:
            passed_to = FeedCursor(newest_left[0].at, newest_left[1])
        if passed_to is None and len(page.rows) > scan:
            passed_to = FeedCursor(page.rows[0].at)
        if rows:
            self.cursor = FeedCursor(rows[-1].at)
        if len(page.rows) <= scan and page.end > self.cursor.row:
            self.cursor = FeedCursor(page.end)
        if passed_to is None:
            return gap + kept
        skipped = _skipped(self.id_of(start), self.id_of(passed_to))
        return [*gap, FeedItem("skipped", passed_to, skipped), *kept]

    async def _next_refs(self, limit: int) -> list[Ref]:
        refs: list[Ref] = []
        self.caught_up = False
        while len(refs) < limit:
            if not self._rows:
                if self._end is not None:
                    self.caught_up = True
                    if self._end > self.cursor.row:
                        self.cursor = FeedCursor(self._end)
                    self._end = None
                    break
                await self._fetch()
                continue
            row = self._rows[0]
            start = 0
            if row.at == self.cursor.row and self.cursor.item is not None:
                start = self.cursor.item + 1
            stop = min(row.entry.size, start + limit - len(refs))
            refs += [(row, index, ref) for index, ref in row.entry.items(start, stop)]
            if stop >= row.entry.size:
                self._rows.popleft()
                self.cursor = FeedCursor(row.at)
            else:
                self.cursor = FeedCursor(row.at, stop - 1)
        return refs

    async def _fetch(self) -> None:
        # A cursor inside a row (a client resuming) reads that row again, for the rest of it.
        page = await self._store.read_journal(
            self.cursor.row,
            ROW_PAGE,
            inclusive=self.cursor.item is not None,
            agent_id=self.match.agent_id,
        )
        self._rows.extend(page.rows)
        if len(page.rows) < ROW_PAGE:
            self._end = page.end

    async def _items(self, refs: list[Ref]) -> list[FeedItem]:
        """The items ``refs`` name that still exist and the match keeps, read in one query (and
        one for the handles of endpoints' agents)."""
        ids = [ref.event_id for _, _, ref in refs if isinstance(ref, AttemptRef | ExpiredRef)]
        ranges = _ranges([ref for _, _, ref in refs if isinstance(ref, PublishedRef)])
        owners = list(
            {ref.agent_id for _, _, ref in refs if isinstance(ref, EndpointChange | LoopGuardTrip)}
        )
        heads = await self._store.feed_events(ids, ranges) if ids or ranges else []
        handles = await self._store.agent_handles(owners) if owners else {}
        by_id = {head.id: head for head in heads}
        by_seq = {(head.agent_id, head.seq): head for head in heads}
        items = []
        for row, index, ref in refs:
            cursor = FeedCursor(row.at, index)
            if isinstance(ref, EndpointChange | LoopGuardTrip):
                handle = handles.get(ref.agent_id)
                if handle is not None and self.match.keeps(ref.agent_id, None):
                    items.append(_agent_item(row, cursor, ref, handle))
                continue
            if isinstance(ref, PublishedRef):
                head = by_seq.get((ref.agent_id, ref.seq))
            else:
                head = by_id.get(ref.event_id)
            if head is not None and self.match.keeps(head.agent_id, head):
                items.append(_event_item(row, cursor, ref, head))
        return items


def _newest_first(rows: list[JournalRow], after: FeedCursor) -> Iterator[Ref]:
    """The items of ``rows`` after ``after``, the newest first."""
    for row in reversed(rows):
        first = 0
        if row.at == after.row and after.item is not None:
            first = after.item + 1
        for index, ref in reversed(list(row.entry.items(first, row.entry.size))):
            yield row, index, ref


def _ranges(refs: Sequence[PublishedRef]) -> list[tuple[str, int, int]]:
    """Published events named by agent and seq, as runs of consecutive seqs."""
    ranges: list[tuple[str, int, int]] = []
    for ref in sorted(set(refs), key=lambda r: (r.agent_id, r.seq)):
        if ranges and ranges[-1][0] == ref.agent_id and ranges[-1][2] == ref.seq - 1:
            ranges[-1] = (ref.agent_id, ranges[-1][1], ref.seq)
        else:
            ranges.append((ref.agent_id, ref.seq, ref.seq))
    return ranges


def _event_item(row: JournalRow, cursor: FeedCursor, ref: ItemRef, head: EventHead) -> FeedItem:
    fields: dict[str, Any] = {"event": head.to_json()}
    kind = "published"
    if isinstance(ref, ExpiredRef):
        kind = "expired"
    elif isinstance(ref, AttemptRef) and ref.group.way == ACK_WAY:
        kind = "acked"
        fields["by"] = ref.group.session
    elif isinstance(ref, AttemptRef):
        kind = "attempt"
        group = ref.group
        fields |= {
            "way": group.way,
            "outcome": group.outcome,
            "session": group.session,
            "endpoint": group.endpoint_id,
            "error": group.error,
            "next_attempt_at": iso_ms(group.next_at) if group.next_at is not None else None,
        }
    data = item_data(kind, row.written_at, head.agent_id, head.handle, **fields)
    return FeedItem(kind, cursor, data)


def _agent_item(
    row: JournalRow, cursor: FeedCursor, change: EndpointChange | LoopGuardTrip, handle: str
) -> FeedItem:
    """An item about an agent rather than an event: an endpoint's change, a loop guard trip."""
    if isinstance(change, LoopGuardTrip):
        data = item_data(
            "loop_guard",
            row.written_at,
            change.agent_id,
            handle,
            to=change.to,
            thread=change.thread,
            limit=change.limit,
            maximum=change.maximum,
        )
        return FeedItem("loop_guard", cursor, data)
    data = item_data(
        "endpoint",
        row.written_at,
        change.agent_id,
        handle,
        endpoint={"id": change.endpoint_id, "kind": change.kind},
        state=change.state,
        reason=change.reason,
    )
    return FeedItem("endpoint", cursor, data)


def _skipped(after: str, resumes_after: str) -> dict[str, Any]:
    return {
        "kind": "skipped",
        "after": after,
        "resumes_after": resumes_after,
        "message": (
            f"more happened after {after} than this reader asked to be sent: the items up to"
            f" {resumes_after} were left out (read them with after={after})"
        ),
    }


def _gap(after: str, resumes_after: str, *, lost: bool) -> dict[str, Any]:
    """What a ``gap`` item says: what followed ``after`` was pruned (``lost``), or ``after``
    is from another history of the store."""
    why = (
        f"what followed {after} is no longer kept (the journal is pruned with the events'"
        " retention)"
        if lost
        else f"{after} is from another history of this store (given before a restore, or"
        " before ids named their history): it is no place in this one"
    )
    return {
        "kind": "gap",
        "after": after,
        "resumes_after": resumes_after,
        "message": f"{why}; the stream goes on from the oldest it keeps",
    }
