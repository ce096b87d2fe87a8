"""``Hub.publish``'s keyword arguments checked in plain Python, beside the full check that names
every fault: the quick check takes only what the full check takes, as the same event."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from herald.errors import InvalidInput, TooLarge
from herald.inputs.events import parse_new_event
from herald.inputs.keyword_event import quick_new_event
from herald.models import NewEvent
from herald.validation import MAX_DEPTH, MAX_EVENT_BYTES
from tests.http.hostile import datas, strings, ttls


def fully_checked(arguments: dict[str, Any]) -> NewEvent:
    """The full check, as ``Hub.publish`` calls it."""
    raw = {key: arguments[key] for key in ("to", "type", "text", "data", "dedupe_key", "ttl_s")}
    return parse_new_event({**raw, "reply": None, "from": arguments["sender"]})


def quickly_checked(arguments: dict[str, Any]) -> NewEvent | None:
    return quick_new_event(**arguments)


ROOM = MAX_EVENT_BYTES - len("a" + "t" + "hi")
"""The bytes an event to "a" of type "t" saying "hi" leaves its data: {"big":"..."} is 10 more
than its string."""


def same_event(quick: NewEvent, full: NewEvent) -> bool:
    """The same event; its data's JSON text may be spelled otherwise (1e-7, 1e-07)."""
    same_value = json.loads(quick.data_json) == json.loads(full.data_json)
    return same_value and replace(quick, data_json="") == replace(full, data_json="")


def nested(levels: int) -> Any:
    value: Any = {}
    for _ in range(levels - 1):
        value = {"k": value}
    return value


ODD: list[Any] = [
    True, 1, 1.5, None, b"bytes", ("tuple",), {1: "int key"}, {"k": float("nan")},
    {"k": float("inf")}, {"k": object()}, {"k": "\x00"}, {"k": "\\u0000"}, {"\ud800": 1},
    nested(MAX_DEPTH), nested(MAX_DEPTH + 1), [nested(MAX_DEPTH - 1)], [nested(MAX_DEPTH)],
    {"big": "x" * (ROOM - 10)}, {"big": "x" * (ROOM - 9)},
    {"big": "é" * ((ROOM - 10) // 2)}, {"big": "é" * ((ROOM - 8) // 2)},
    {"k": {1: "nested int key"}}, {"k": [float("-inf")]}, {"k": (1, 2)},
    {"k": {"s": "\ud800"}}, [[[]]],
]  # fmt: skip


JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=6),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
JSON_DATA = st.one_of(
    st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=3), st.lists(JSON_VALUES, max_size=3)
)


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A good value three times in four, so that whole events are taken often."""
    return st.integers(0, 3).flatmap(lambda draw: bad if draw == 3 else good)


ARGUMENTS = st.fixed_dictionaries(
    {
        "to": mostly(
            st.sampled_from(["a", "b-1", "x" * 64]),
            st.one_of(st.sampled_from(["A", "", "x" * 65]), strings),
        ),
        "type": mostly(
            st.sampled_from(["t", "dm.received", "a:b"]),
            st.one_of(st.sampled_from(["a b", ""]), strings),
        ),
        "text": mostly(
            st.text(min_size=1, max_size=8),
            st.one_of(st.sampled_from(["", "\x00", "\ud800"]), strings),
        ),
        "data": mostly(st.one_of(st.none(), JSON_DATA), st.one_of(datas, st.sampled_from(ODD))),
        "dedupe_key": mostly(
            st.one_of(st.none(), st.text(min_size=1, max_size=8)),
            st.one_of(strings, st.just("k" * 257)),
        ),
        "ttl_s": mostly(
            st.one_of(st.none(), st.integers(1, 10**6), st.floats(0.001, 1e6)),
            st.one_of(ttls(), st.sampled_from([0, -1, True, float("nan")])),
        ),
        "sender": mostly(st.sampled_from([None, "a"]), st.sampled_from(["x:y", 7])),
    }
)


@settings(
    max_examples=200,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(ARGUMENTS)
def test_the_quick_check_takes_only_what_the_full_check_takes_as_the_same_event(
    arguments: dict[str, Any],
) -> None:
    quick = quickly_checked(arguments)
    try:
        full = fully_checked(arguments)
    except (InvalidInput, TooLarge, TypeError):  # TypeError: data JSON cannot hold
        assert quick is None
        return
    assert quick is None or same_event(quick, full)


@pytest.mark.parametrize("data", ODD)
def test_odd_data_is_left_to_the_full_check_or_taken_as_it_takes_it(data: Any) -> None:
    arguments = {"to": "a", "type": "t", "text": "hi", "data": data}
    given = {"dedupe_key": None, "ttl_s": None, "sender": None, **arguments}
    quick = quickly_checked(given)
    try:
        full = fully_checked(given)
    except (InvalidInput, TooLarge, TypeError):
        assert quick is None
        return
    assert quick is None or same_event(quick, full)  # None: the full check takes it


@pytest.mark.parametrize(
    "odd",
    [
        {"text": "\ud800"}, {"text": "é\ud800"}, {"text": ""}, {"text": "\x00"}, {"text": b"hi"},
        {"dedupe_key": "\udfff"}, {"dedupe_key": "é\x00"}, {"dedupe_key": ""},
        {"dedupe_key": "k" * 257}, {"dedupe_key": "é" * 256}, {"to": "A"}, {"to": "a\n"},
        {"type": "t\n"}, {"sender": "x:y"}, {"sender": ""}, {"ttl_s": True}, {"ttl_s": 0},
        {"ttl_s": float("nan")}, {"ttl_s": 365 * 86400 + 1}, {"ttl_s": "60"},
        {"text": "é" * (ROOM // 2 - 3), "data": None}, {"text": "é" * (ROOM // 2 - 1)},
        {"dedupe_key": "é" * 256, "text": "x" * (ROOM - 512 - 2)},
        {"dedupe_key": "é" * 256, "text": "x" * (ROOM - 512 + 1)},
    ],
)  # fmt: skip
def test_odd_arguments_are_left_to_the_full_check_or_taken_as_it_takes_them(
    odd: dict[str, Any],
) -> None:
    given = {"to": "a", "type": "t", "text": "hi", "data": None, "dedupe_key": None,
             "ttl_s": None, "sender": None, **odd}  # fmt: skip
    quick = quickly_checked(given)
    try:
        full = fully_checked(given)
    except (InvalidInput, TooLarge, TypeError):
        assert quick is None
        return
    assert quick is not None and same_event(quick, full)


def test_the_quick_check_takes_a_plain_event_as_the_full_check_makes_it() -> None:
    for arguments in (
        {"to": "bench", "type": "bench.tick", "text": "hello", "data": {"n": 1}},
        {"to": "a", "type": "t", "text": "é😀", "data": [1, {"k": None}], "dedupe_key": "k"},
        {"to": "a", "type": "t", "text": "t", "ttl_s": 60, "sender": "b-1"},
        {"to": "a", "type": "t", "text": "deep", "data": nested(MAX_DEPTH), "ttl_s": 1.5},
        {"to": "a", "type": "t", "text": "numbers", "data": {"big": 2**70, "f": 1e-7, "b": True}},
    ):
        given = {"data": None, "dedupe_key": None, "ttl_s": None, "sender": None, **arguments}
        quick = quickly_checked(given)
        assert quick is not None
        assert same_event(quick, fully_checked(given))


def test_the_data_is_copied_as_the_full_check_copies_it() -> None:
    data = {"n": [1]}
    quick = quick_new_event("a", "t", "hi", data, None, None, None)
    assert quick is not None and quick.data == data and quick.data is not data
