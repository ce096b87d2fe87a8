"""``Hub.publish``'s keyword arguments checked in plain Python, beside the full check that names
every fault: the quick check takes only what the full check takes, as the same event."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from herald.errors import InvalidInput, TooLarge
from herald.inputs.events import parse_new_event
from herald.inputs.keyword_event import quick_new_event
from herald.models import NewEvent
from herald.validation import MAX_DEPTH
from tests.http.hostile import datas, strings, ttls


def fully_checked(arguments: dict[str, Any]) -> NewEvent:
    """The full check, as ``Hub.publish`` calls it."""
    raw = {key: arguments[key] for key in ("to", "type", "text", "data", "dedupe_key", "ttl_s")}
    return parse_new_event({**raw, "reply": None, "from": arguments["sender"]})


def quickly_checked(arguments: dict[str, Any]) -> NewEvent | None:
    return quick_new_event(**arguments)


def nested(levels: int) -> Any:
    value: Any = {}
    for _ in range(levels - 1):
        value = {"k": value}
    return value


ODD: list[Any] = [
    True, 1, 1.5, None, b"bytes", ("tuple",), {1: "int key"}, {"k": float("nan")},
    {"k": float("inf")}, {"k": object()}, {"k": "\x00"}, {"k": "\\u0000"}, {"\ud800": 1},
    nested(MAX_DEPTH), nested(MAX_DEPTH + 1), [nested(MAX_DEPTH - 1)], [nested(MAX_DEPTH)],
    {"big": "x" * 262_000}, {"big": "é" * 131_000},
]  # fmt: skip
ARGUMENTS = st.fixed_dictionaries(
    {
        "to": st.one_of(st.sampled_from(["a", "b-1", "A", "", "x" * 64, "x" * 65]), strings),
        "type": st.one_of(st.sampled_from(["t", "dm.received", "a:b", "a b", ""]), strings),
        "text": st.one_of(st.sampled_from(["hi", "", "\x00", "\ud800", "é😀"]), strings),
        "data": st.one_of(datas, st.sampled_from(ODD)),
        "dedupe_key": st.one_of(st.none(), strings, st.sampled_from(["k", "k" * 257])),
        "ttl_s": st.one_of(st.none(), ttls(), st.sampled_from([1, 0, -1, True, float("nan")])),
        "sender": st.one_of(st.none(), st.sampled_from(["a", "x:y", 7])),
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
    assert quick is None or quick == full


def test_the_quick_check_takes_a_plain_event_as_the_full_check_makes_it() -> None:
    for arguments in (
        {"to": "bench", "type": "bench.tick", "text": "hello", "data": {"n": 1}},
        {"to": "a", "type": "t", "text": "é😀", "data": [1, {"k": None}], "dedupe_key": "k"},
        {"to": "a", "type": "t", "text": "t", "ttl_s": 60, "sender": "b-1"},
        {"to": "a", "type": "t", "text": "deep", "data": nested(MAX_DEPTH), "ttl_s": 1.5},
    ):
        given = {"data": None, "dedupe_key": None, "ttl_s": None, "sender": None, **arguments}
        quick = quickly_checked(given)
        assert quick is not None
        assert quick == fully_checked(given)


def test_the_data_is_copied_as_the_full_check_copies_it() -> None:
    data = {"n": [1]}
    quick = quick_new_event("a", "t", "hi", data, None, None, None)
    assert quick is not None and quick.data == data and quick.data is not data
