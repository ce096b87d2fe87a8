"""The rules every store backend keeps the same way, written once above them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from herald.models import Finished


@dataclass(frozen=True)
class EndpointNote:
    """An endpoint's health after a batch of attempts: the last attempt decides."""

    endpoint_id: str
    ok: bool
    error: str | None
    recovered: bool
    """An attempt in the batch succeeded, so a failure after it starts a new failing span."""
    disable_reason: str | None
    disable_failing_since: int | None


def endpoint_notes(finished: Sequence[Finished]) -> list[EndpointNote]:
    """One note per endpoint of a batch, sorted by endpoint id: every process updates endpoint
    rows in that order, so two batches cannot deadlock."""
    notes: dict[str, EndpointNote] = {}
    for item in finished:
        endpoint_id = item.delivery.endpoint_id
        before = notes.get(endpoint_id)
        notes[endpoint_id] = EndpointNote(
            endpoint_id,
            item.endpoint_ok,
            None if item.endpoint_ok else item.attempt.error,
            item.endpoint_ok or (before is not None and before.recovered),
            item.disable_reason or (before.disable_reason if before else None),
            None if item.endpoint_ok else item.disable_failing_since,
        )
    return [notes[key] for key in sorted(notes)]
