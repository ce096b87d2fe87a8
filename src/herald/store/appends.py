"""How a batch of events is stored, the same on every backend: which events repeat a dedupe key
(answered with the event that has it, stored before or earlier in the batch), which are new, and
the seq each new one gets. The backends only read and write the rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass

from herald.errors import NoSuchHandle
from herald.feed import PublishedRange
from herald.ids import new_ids
from herald.models import Event, NewEvent, Published

DedupeKey = tuple[str, str]
"""An agent's id and a dedupe key: an event is stored once per pair."""


def no_agent(handle: str) -> NoSuchHandle:
    return NoSuchHandle(handle)


def unknown_addressee(events: Sequence[NewEvent], agents: Mapping[str, str]) -> NoSuchHandle | None:
    """The error for the first event whose addressee is not among ``agents`` (ids by handle)."""
    for new in events:
        if new.to not in agents:
            return no_agent(new.to)
    return None


def dedupe_keys(events: Sequence[NewEvent], agents: Mapping[str, str]) -> list[DedupeKey | None]:
    """Each event's dedupe key with its agent's id (None for an event without one)."""
    return [
        (agents[new.to], new.dedupe_key) if new.dedupe_key is not None else None for new in events
    ]


@dataclass(frozen=True)
class AppendPlan:
    """What to do with each event of a batch: store it, or answer it with another's event."""

    size: int
    fresh: list[tuple[int, str]]
    """The position in the batch and the agent's id of each event to store, in batch order."""
    repeats: dict[int, DedupeKey]
    """The position of each event not to store: the key whose event answers it."""

    @property
    def added(self) -> Counter[str]:
        """How many events each agent gets: what its last seq advances by."""
        return Counter(agent_id for _, agent_id in self.fresh)

    def numbered(
        self, events: Sequence[NewEvent], first_seqs: Mapping[str, int], nows: Sequence[int]
    ) -> list[Event]:
        """The events to store, each given its agent's next seq in batch order, from the first
        seq reserved for the agent, and published at its time in ``nows``."""
        next_seq = dict(first_seqs)
        stored = []
        for event_id, (index, agent_id) in zip(
            new_ids("evt_", len(self.fresh)), self.fresh, strict=True
        ):
            seq, next_seq[agent_id] = next_seq[agent_id], next_seq[agent_id] + 1
            stored.append(events[index].stored(event_id, agent_id, seq, nows[index]))
        return stored

    def published(
        self, first_seqs: Mapping[str, int], added: Mapping[str, int]
    ) -> tuple[PublishedRange, ...]:
        """What ``numbered`` stores, as the journal names it (``journal.published``): one run of
        seqs per agent, its ``added`` events from its first seq reserved, read from the plan
        rather than from each event."""
        return tuple(
            PublishedRange(agent_id, first, first + added[agent_id] - 1)
            for agent_id, first in sorted(first_seqs.items())
        )

    def answers(
        self, stored: Sequence[Event], earlier: Mapping[DedupeKey, Event]
    ) -> list[Published]:
        """The answer to each event of the batch: those stored (as ``numbered`` made them, in
        order) are created; a repeat gets the event that has its key, stored before (``earlier``)
        or in this batch."""
        if not self.repeats:  # the usual batch: every event new, no key to look up
            return [Published(e, True) for e in stored]  # created; a keyword costs a tenth
        by_key = dict(earlier)
        by_key.update(((e.agent_id, e.dedupe_key), e) for e in stored if e.dedupe_key is not None)
        created = iter(stored)
        return [
            Published(by_key[self.repeats[index]], created=False)
            if index in self.repeats
            else Published(next(created), created=True)
            for index in range(self.size)
        ]


def plan_append(
    events: Sequence[NewEvent], agents: Mapping[str, str], stored_keys: Container[DedupeKey]
) -> AppendPlan:
    """Plan a batch, its addressees' ids by handle and the dedupe keys already stored known:
    of the events sharing a key, only the first is stored, and none if the key is stored."""
    fresh: list[tuple[int, str]] = []
    repeats: dict[int, DedupeKey] = {}
    seen: set[DedupeKey] = set()
    for index, (new, key) in enumerate(zip(events, dedupe_keys(events, agents), strict=True)):
        if key is not None:
            if key in seen or key in stored_keys:
                repeats[index] = key
                continue
            seen.add(key)
        fresh.append((index, agents[new.to]))
    return AppendPlan(len(events), fresh, repeats)


def one_each(agent_ids: Sequence[str]) -> AppendPlan:
    """The plan of one event stored once for each of ``agent_ids`` (each once), none with a
    dedupe key: a topic's publish. Every copy is new, the n-th is the n-th agent's; so the
    event itself stands for each copy (``numbered`` reads only its fields, never its ``to``)."""
    return AppendPlan(len(agent_ids), list(enumerate(agent_ids)), {})


def first_seqs(last_seqs: Mapping[str, int], added: Mapping[str, int]) -> dict[str, int]:
    """The first seq reserved for each agent, from its last seq once advanced by ``added``."""
    return {agent_id: last - added[agent_id] + 1 for agent_id, last in last_seqs.items()}
