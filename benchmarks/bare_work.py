"""What the bare endpoint's requests ask of its store, and its answers, in plain Python: a
publish (events as ``json.loads`` gave them, numbered once each agent's seqs are reserved) and a
drain step (acknowledge to the cursor, lease the next events)."""

from __future__ import annotations

import datetime
import json
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

LEASE_MS = 30_000
Row = tuple[Any, ...]


class Publish:
    """Events to store, each to the agent its ``to`` names; ``receipts`` once ``rows`` ran."""

    def __init__(self, events: list[dict[str, Any]], now: int) -> None:
        self.events = events
        self.now = now
        self.counts = Counter(event["to"] for event in events)
        self.receipts: list[dict[str, Any]] = []
        self._agents: dict[str, str] = {}
        self._next_seq: dict[str, int] = {}

    def reserved(self, handle: str, agent_id: str, last_seq: int) -> None:
        """The agent's seqs up to ``last_seq`` are this publish's last ``counts[handle]``."""
        self._agents[handle] = agent_id
        self._next_seq[handle] = last_seq - self.counts[handle] + 1

    def rows(self) -> Iterator[Row]:
        """Each event's row of the events table (pending), in order."""
        for event in self.events:
            handle = event["to"]
            seq = self._next_seq[handle]
            self._next_seq[handle] = seq + 1
            event_id = f"evt_{uuid.uuid4().hex}"
            self.receipts.append({"id": event_id, "seq": seq, "duplicate": False})
            yield (
                event_id, self._agents[handle], seq, event["type"], event["text"],
                json.dumps(event.get("data")), event.get("dedupe_key"), self.now, self.now,
            )  # fmt: skip


@dataclass(frozen=True)
class Drain:
    """One drain step of an agent: acknowledge up to ``cursor``, lease the next ``limit``."""

    handle: str
    cursor: int
    limit: int
    consumer: str
    now: int

    @property
    def lease_until(self) -> int:
        return self.now + LEASE_MS


def drained(rows: Sequence[Row], cursor: int) -> dict[str, Any]:
    """The answer to a drain step: the events leased (rows of id, agent_id, seq, type, text,
    data, dedupe_key, created_at, status), and the cursor to send next."""
    events = [
        {
            "id": event_id, "agent": agent_id, "seq": seq, "type": kind, "text": text,
            "data": json.loads(data), "dedupe_key": dedupe_key, "created_at": iso(created_at),
            "expires_at": None, "from": None, "reply_to": None, "reply": None, "status": status,
        }
        for event_id, agent_id, seq, kind, text, data, dedupe_key, created_at, status in rows
    ]  # fmt: skip
    return {"events": events, "cursor": events[-1]["seq"] if events else cursor}


def iso(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return moment.isoformat(timespec="milliseconds")
