"""A publish body's batch, and a batch a dry run passed, taken again from the same bytes."""

from __future__ import annotations

import datetime
import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from herald import json_input
from herald.errors import InvalidInput, TooLarge
from herald.inputs.events import (
    CheckedBatches,
    parse_publish,
    read_publish,
    spread,
)
from herald.models import NewEvent, Priority
from tests.http.hostile import bodies, datas, either, forms, objects, ttls

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
    {"to": "a", "type": "t", "text": "asks", "reply": FORM, "priority": "low"},
    {"to": "a", "type": "t", "text": "at once", "priority": "urgent"},
    {"to": "a", "type": "t", "text": "nulls", "data": None, "dedupe_key": None, "ttl_s": None},
    {"to": "a", "type": "t", "text": "more nulls", "reply": None, "from": None},
]


def test_a_batch_a_dry_run_passed_is_taken_again_as_its_check_made_it() -> None:
    for body in (json.dumps(VARIED).encode(), json.dumps(VARIED, ensure_ascii=False).encode()):
        checked = CheckedBatches()
        checked.remember(body)
        dry_run = read_publish(body)  # what the dry run made of it
        assert dry_run is not None
        assert checked.parsed(body) == dry_run[0]  # data_json and all


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


# One pass over a publish body, beside the full checks that name every fault.

ONE_PASS_EVENTS = objects(
    {
        "to": either(st.sampled_from(["a", "b-1"])),
        "type": either(st.sampled_from(["t", "dm.received", "a:b"])),
        "text": either(st.text(min_size=1, max_size=12)),
        "data": datas,
        "dedupe_key": either(st.text(min_size=1, max_size=10)),
        "ttl_s": ttls(),
        "reply": forms(),
        "from": either(st.sampled_from(["a", "x:y"])),
        "priority": either(st.sampled_from(["low", "normal", "high", "urgent", None])),
    },
    required=("to", "type", "text"),
)


def _fully_checked(body: bytes) -> tuple[list[NewEvent], bool]:
    events, batch, lists = parse_publish(json_input.loads(body))
    assert lists is None  # none of these bodies has a list of handles
    return events, batch


def _same_events(one_pass: list[NewEvent], full: list[NewEvent]) -> None:
    assert len(one_pass) == len(full)
    for fast, checked in zip(one_pass, full, strict=True):
        # The same event; its data's JSON text may be spelled otherwise (1e-7, 1e-07).
        assert replace(fast, data_json="", reply_schema_json="") == replace(
            checked, data_json="", reply_schema_json=""
        )
        assert json.loads(fast.data_json) == json.loads(checked.data_json)
        assert json.loads(fast.reply_schema_json or "null") == json.loads(
            checked.reply_schema_json or "null"
        )


@settings(
    max_examples=200,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(bodies(st.one_of(ONE_PASS_EVENTS, st.lists(ONE_PASS_EVENTS, max_size=4))))
def test_one_pass_takes_only_what_the_full_checks_take_as_the_same_events(body: bytes) -> None:
    one_pass = read_publish(body)
    try:
        full = _fully_checked(body)
    except (InvalidInput, TooLarge):
        assert one_pass is None
        return
    if one_pass is not None:
        assert one_pass[1] == full[1]
        _same_events(one_pass[0], full[0])


EVENT = '{"to": "a", "type": "t", "text": "hi", "data": %s}'


@pytest.mark.parametrize(
    "body",
    [
        '{"to": "a", "to": "b", "type": "t", "text": "hi"}',
        EVENT % '{"k": 1, "k": 2}',
        EVENT % '{"k": "a:b", "k": "c"}',  # a colon in a string does not hide the key twice
        EVENT % '{"k": 1, "\\u006b": 2}',
        "[" + EVENT % '{"k": {"x": 1, "x": 1}}' + "]",
        EVENT % ("[" * 65 + "]" * 65),
        "[" + EVENT % ("[" * 99 + "]" * 99) + "]",  # 101 levels deep in all
        EVENT % '{"k": NaN}',
        EVENT % '{"k": 1e400}',
        EVENT % '{"k": "\\u0000"}',
        EVENT % '{"k": "\\ud800"}',
        EVENT % ('{"k": ' + "9" * 4301 + "}"),
    ],
)
def test_one_pass_leaves_to_the_full_checks_what_they_refuse(body: str) -> None:
    raw = body.encode()
    assert read_publish(raw) is None
    with pytest.raises(InvalidInput):
        _fully_checked(raw)


@pytest.mark.parametrize(
    "body",
    [
        EVENT % '{"url": "https://example.com:8080/a", "at": "12:30"}',
        EVENT % ("[" * 64 + "]" * 64),  # as deep as data may be
        "[" + EVENT % ("[" * 64 + "]" * 64) + "]",
        EVENT % '{"é": "😀", "n": [1, 2.5, -0.0, 1e-7, 10000000000000000000000]}',
        '{"to": "a", "type": "a:b", "text": "x:y", "from": "a", "dedupe_key": "k:1"}',
    ],
)
def test_one_pass_takes_well_formed_bodies_as_the_full_checks_do(body: str) -> None:
    raw = body.encode()
    one_pass = read_publish(raw)
    assert one_pass is not None
    _same_events(one_pass[0], _fully_checked(raw)[0])


def test_an_event_for_a_list_is_left_to_the_full_checks_which_spread_it_over_its_handles() -> None:
    raw = b'[{"to": "a", "type": "t", "text": "1"}, {"to": ["b", "c"], "type": "t", "text": "2"}]'
    assert read_publish(raw) is None
    events, batch, lists = parse_publish(json_input.loads(raw))
    assert batch and lists == {1: ["b", "c"]}
    assert [(e.to, e.text) for e in spread(events, lists)] == [("a", "1"), ("b", "2"), ("c", "2")]
    single, batch, lists = parse_publish({"to": ["c", "b"], "type": "t", "text": "x"})
    assert (
        not batch
        and lists == {0: ["c", "b"]}
        and [e.to for e in spread(single, lists)]
        == [
            "c",
            "b",
        ]
    )


@pytest.mark.parametrize("body", [EVENT % "{}", "[" + EVENT % "{}" + "]"])
def test_a_null_priority_is_taken_as_normal_whichever_pass_reads_it(body: str) -> None:
    raw = body.replace('"text"', '"priority": null, "text"').encode()
    one_pass = read_publish(raw)
    full = _fully_checked(raw)[0]
    assert full[0].priority is Priority.NORMAL
    if one_pass is not None:
        _same_events(one_pass[0], full)


def test_a_body_after_a_byte_order_mark_is_left_to_the_full_checks_which_take_it() -> None:
    raw = ("\ufeff" + EVENT % "{}").encode()
    assert read_publish(raw) is None
    assert _fully_checked(raw)[0][0].text == "hi"


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("2026-12-08T09:00:00+01:00", "2026-12-08T08:00:00+00:00"),
        ("2026-12-08t09:00:00z", "2026-12-08T09:00:00+00:00"),  # RFC 3339 allows lower case
        ("2026-12-08 09:00:00.250Z", "2026-12-08T09:00:00.250000+00:00"),
    ],
)
def test_deliver_at_takes_rfc_3339_as_it_is_written(written: str, meant: str) -> None:
    ((event,), _, _) = parse_publish({"to": "a", "type": "t", "text": "x", "deliver_at": written})
    assert event.deliver_at == datetime.datetime.fromisoformat(meant).timestamp() * 1000


@pytest.mark.parametrize(
    "written",
    ["2026-W50-2T09:00:00Z", "2026-12-08T09:00Z", "20261208T090000Z", "2026-12-08T09:00:00+0100"],
)
def test_deliver_at_refuses_what_rfc_3339_is_not(written: str) -> None:
    with pytest.raises(InvalidInput, match=r"event\.deliver_at must be an RFC 3339 time"):
        parse_publish({"to": "a", "type": "t", "text": "x", "deliver_at": written})
