"""The checks on what comes in (events, reply forms, delivery overrides) refuse anything JSON can
hold with InvalidInput, never with another error (which the API would answer with a 500)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from herald import json_input
from herald.capabilities import parse_overrides
from herald.errors import InvalidInput
from herald.inputs.events import parse_new_event
from herald.validation import check_form_schema
from tests.http.hostile import TAKEN, either, encode, forms, objects, ttls

# Drawn from what herald's JSON parser takes (only that reaches the checks), in its hostile shapes.
values = TAKEN.values
texts = st.text(TAKEN.characters, min_size=1, max_size=10)

# Every draw reaches the checks (none is thrown away), so fewer suffice: the faults these tests
# were shown to find (a form's properties or a property not an object) show up within 25.
CHECKS = settings(max_examples=100, derandomize=True, database=None, deadline=None)
HALF_CHECKS = settings(CHECKS, max_examples=50)
"""For a check whose input is drawn in two tests (event-shaped, and any JSON): each is a test of
its own, so that the suite's processes run them side by side."""

events = objects(
    {
        "to": either(st.sampled_from(["alice", "bob"]), TAKEN),
        "type": either(st.sampled_from(["t", "dm.received"]), TAKEN),
        "text": either(texts, TAKEN),
        "data": values,
        "dedupe_key": TAKEN.strings,
        "ttl_s": ttls(TAKEN),
        "reply": forms(TAKEN),
        "from": either(st.just("bob"), TAKEN),
    },
    required=("to", "type", "text"),
    kinds=TAKEN,
)


def as_received(value: Any) -> Any:
    """The value as an HTTP body reaches the checks: parsed and checked by json_input (which
    takes everything drawn here: a refusal is a fault of the strategies)."""
    return json_input.loads(encode(value))


@HALF_CHECKS
@given(forms(TAKEN))
def test_a_reply_form_is_taken_or_refused_with_invalid_input(schema: Any) -> None:
    _taken_or_refused_as_a_form(schema)


@HALF_CHECKS
@given(values)
def test_any_json_is_taken_or_refused_as_a_reply_form_with_invalid_input(schema: Any) -> None:
    _taken_or_refused_as_a_form(schema)


def _taken_or_refused_as_a_form(schema: Any) -> None:
    try:
        check_form_schema(as_received(schema), "reply")
    except InvalidInput as refused:
        assert refused.message


@HALF_CHECKS
@given(events)
def test_an_event_is_taken_or_refused_with_invalid_input(event: Any) -> None:
    _taken_or_refused_as_an_event(event)


@HALF_CHECKS
@given(values)
def test_any_json_is_taken_or_refused_as_an_event_with_invalid_input(event: Any) -> None:
    _taken_or_refused_as_an_event(event)


def _taken_or_refused_as_an_event(event: Any) -> None:
    try:
        parse_new_event(as_received(event))
    except InvalidInput as refused:
        assert refused.message


@CHECKS
@given(st.one_of(st.dictionaries(st.sampled_from(["channel", "ack_timeout_s"]), values), values))
def test_delivery_overrides_are_taken_or_refused_with_invalid_input(delivery: Any) -> None:
    try:
        parse_overrides(as_received(delivery))
    except InvalidInput as refused:
        assert refused.message
