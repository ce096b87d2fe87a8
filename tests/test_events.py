"""Event ids and the checks on what publishers send."""

from __future__ import annotations

import time
from typing import Any

import pytest

from herald.errors import InvalidInput
from herald.ids import new_id, new_ids
from herald.inputs.events import parse_new_event


def test_ids_are_unique_and_sort_by_creation_time() -> None:
    earlier = [new_id("evt_") for _ in range(1000)]
    deadline = time.monotonic() + 1
    while (later := new_id("evt_"))[4:13] == earlier[-1][4:13] and time.monotonic() < deadline:
        pass  # wait for the next millisecond, without sleeping
    assert len(set(earlier)) == 1000
    assert all(len(i) == 30 and i.startswith("evt_") for i in earlier)
    assert max(earlier) < later


FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


@pytest.mark.parametrize(
    ("reply", "fragment"),
    [
        ({"type": "array"}, "form schema"),
        ({"type": "object", "properties": {}}, "at least one"),
        ({"type": "object", "properties": {"x": {"type": "object"}}}, "flat"),
        ({"type": "object", "properties": {"x": {"type": "string", "pattern": "a"}}}, "pattern"),
        ({"type": "object", "properties": {"x": {"type": "string", "format": "ip"}}}, "format"),
        ({"type": "object", "properties": {"x": {"type": "string", "enum": [1]}}}, "enum"),
        ({**FORM, "required": ["missing"]}, "required"),
        ({**FORM, "$defs": {}}, "unsupported"),
    ],
)
def test_a_reply_form_must_be_what_elicitation_can_show(reply: Any, fragment: str) -> None:
    with pytest.raises(InvalidInput, match=fragment):
        parse_new_event({"to": "alice", "type": "q", "text": "?", "reply": reply})


def test_a_valid_reply_form_makes_the_event_interactive() -> None:
    new = parse_new_event(
        {"to": "alice", "type": "q", "text": "?", "reply": {**FORM, "required": ["ok"]}}
    )
    assert (
        new.reply_schema_json
        == '{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}'
    )


def test_ids_made_in_one_process_always_increase() -> None:
    ids = [new_id("evt_") for _ in range(5000)]
    assert ids == sorted(ids) and len(set(ids)) == 5000


def test_an_id_reads_as_its_millisecond_and_random_bits_in_crockford_base32() -> None:
    before = time.time_ns() // 1_000_000
    body = new_id("evt_")[4:]
    after = time.time_ns() // 1_000_000
    value = int(body.translate(str.maketrans(CROCKFORD, BASE32)), 32) >> 2
    assert before <= value >> 80 <= after
    assert body[-1] in "048CGMRW"  # the last digit's two low bits are padding


def test_ids_made_together_count_up_between_those_made_before_and_after() -> None:
    before = new_id("evt_")
    ids = new_ids("evt_", 1000)
    after = new_id("evt_")
    values = [int(i[4:].translate(str.maketrans(CROCKFORD, BASE32)), 32) >> 2 for i in ids]
    # 1,000 in a row: the low bits wrap at least three times, each wrap a new run of digits
    assert values == list(range(values[0], values[0] + 1000))
    assert before < ids[0] and ids[-1] < after
    assert all(len(i) == 30 and i.startswith("evt_") and i[-1] in "048CGMRW" for i in ids)
    assert new_ids("evt_", 0) == []


CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
BASE32 = "0123456789ABCDEFGHIJKLMNOPQRSTUV"
"""Crockford's digits, and Python's ``int(..., 32)``'s for the same values."""
