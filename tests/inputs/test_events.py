"""A publish body's batch, and a batch a dry run passed, taken again from the same bytes."""

from __future__ import annotations

import json
from typing import Any

from herald.inputs.events import CheckedBatches, parse_batch

FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
VARIED: list[dict[str, Any]] = [
    {"to": "a", "type": "t", "text": "plain"},
    {
        "to": "a",
        "type": "t.x",
        "text": 'é 😀 "quoted"',
        "data": {"k": [1, 2.5, {"z": None}], "s": "é", "big": 2**70},
        "dedupe_key": "k1",
        "ttl_s": 60,
    },
    {"to": "b-1", "type": "t", "text": "a float", "ttl_s": 1.5, "data": [1, "two"], "from": "x"},
    {"to": "a", "type": "t", "text": "asks", "reply": FORM},
    {"to": "a", "type": "t", "text": "nulls", "data": None, "dedupe_key": None, "ttl_s": None},
    {"to": "a", "type": "t", "text": "more nulls", "reply": None, "from": None},
]


def test_a_batch_a_dry_run_passed_is_taken_again_as_its_check_made_it() -> None:
    for body in (json.dumps(VARIED).encode(), json.dumps(VARIED, ensure_ascii=False).encode()):
        checked = CheckedBatches()
        checked.remember(body)
        assert checked.parsed(body) == parse_batch(json.loads(body))  # data_json and all


def test_only_the_same_bytes_lately_checked_are_taken_without_a_check() -> None:
    checked = CheckedBatches(most=2)
    bodies = [json.dumps([{**VARIED[0], "text": f"n{n}"}]).encode() for n in range(3)]
    checked.remember(bodies[0])
    assert checked.parsed(bodies[0] + b" ") is None  # other bytes, even the same events
    assert checked.parsed(bodies[1]) is None
    checked.remember(bodies[1])
    checked.remember(bodies[0])  # remembered again: the latest
    checked.remember(bodies[2])
    assert checked.parsed(bodies[1]) is None  # the oldest of three, forgotten
    assert checked.parsed(bodies[0]) is not None and checked.parsed(bodies[2]) is not None
