"""herald.json_input: what JSON from outside may hold, refused with the path at fault."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herald import json_input
from herald.errors import InvalidInput
from tests.http.hostile import encode, values


def refusal(body: bytes) -> str:
    with pytest.raises(InvalidInput) as refused:
        json_input.loads(body)
    return refused.value.message


def nested(depth: int) -> bytes:
    return b'{"a":' * (depth - 1) + b"[]" + b"}" * (depth - 1)


def test_nesting_is_taken_up_to_the_limit_and_refused_past_it_with_its_path() -> None:
    assert json_input.loads(nested(json_input.MAX_DEPTH))
    message = refusal(nested(json_input.MAX_DEPTH + 1))
    assert "deeper than 100 levels" in message and message.startswith("$.a.a.a")


def test_nesting_too_deep_for_the_parser_is_refused_not_raised() -> None:
    assert "deeper than 100 levels" in refusal(b"[" * 100_000 + b"]" * 100_000)


@pytest.mark.parametrize(
    ("body", "path", "fragment"),
    [
        (b'{"consumer": "\\ud800"}', "$.consumer", "unpaired surrogate"),
        (b'{"ids": ["a", "x\\udfffy"]}', "$.ids[1]", "unpaired surrogate"),
        (b'{"data": {"k": "a\\u0000"}}', "$.data.k", "NUL"),
        (b'{"data": {"\\u0000": 1}}', "a key in $.data", "NUL"),
        (b'{"a b": [{"\\ud800": 1}]}', 'a key in $["a b"][0]', "unpaired surrogate"),
        (b'{"cursor": ' + b"1" * 4301 + b"}", "$.cursor", "4301 digits"),
        (b'{"n": -' + b"1" * 4301 + b"}", "$.n", "4301 digits"),
        (b'{"minimum": NaN}', "$.minimum", "NaN"),
        (b'{"minimum": -Infinity}', "$.minimum", "NaN"),
        (b'{"minimum": 1e999}', "$.minimum", "NaN"),
        (b'"\\u0000"', "$", "NUL"),
    ],
)
def test_what_json_cannot_carry_to_the_store_is_refused_naming_its_path(
    body: bytes, path: str, fragment: str
) -> None:
    message = refusal(body)
    assert message.startswith(f"{path} ") and fragment in message, message
    message.encode("ascii")  # whatever was sent, the message can be answered


@pytest.mark.parametrize(
    "body",
    [
        b'{"text": "\\ud83d\\ude00 caf\\u00e9 \xc3\xa9"}',
        b'{"n": ' + b"9" * 4300 + b"}",
        b'{"n": 1e308, "m": -0.0}',
        b'{"a": "\\\\u0000 is spelled, not sent"}',
        b"\xef\xbb\xbf[]",
    ],
)
def test_what_json_carries_is_taken(body: bytes) -> None:
    assert json_input.loads(body) == json.loads(body.decode("utf-8-sig"))


@pytest.mark.parametrize("body", [b"{", b"\xff", '{"a": "é"}'.encode("utf-16"), b"[1] x"])
def test_what_is_not_json_in_utf_8_is_refused(body: bytes) -> None:
    assert "not valid JSON" in refusal(body)


def test_values_parsed_elsewhere_are_checked_alike() -> None:
    json_input.check({"ids": ["evt_1"], "data": {"n": [1.5, None, True]}}, "arguments")
    for value, path in [
        ({"ids": ["\x00"]}, "arguments.ids[0]"),
        ({"x": float("nan")}, "arguments.x"),
        ("\ud800", "arguments"),
    ]:
        with pytest.raises(InvalidInput, match=f"^{re.escape(path)} "):
            json_input.check(value, "arguments")


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(st.one_of(values, st.lists(values, max_size=3)))
def test_any_body_is_either_refused_or_can_be_stored_and_answered(value: Any) -> None:
    try:
        parsed = json_input.loads(encode(value))
    except InvalidInput as refused:
        refused.message.encode("utf-8")
        return
    text = json.dumps(parsed, ensure_ascii=False, allow_nan=False)
    assert "\x00" not in text and "\\u0000" not in text
    text.encode("utf-8")


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        (b'{"to": "a", "to": "b"}', '$ has the key "to" more than once'),
        (b'[0, {"a b": {"x": 1, "x": 1}}]', '$[1]["a b"] has the key "x" more than once'),
        (b'{"\\u00e9": 1, "\xc3\xa9": 2}', '$ has the key "\\u00e9" more than once'),
        (b'{"n": ' + b"9" * 5000 + b', "n": 1}', '$ has the key "n" more than once'),
    ],
)
def test_a_key_given_twice_is_refused_naming_it_and_its_object(body: bytes, refused: str) -> None:
    assert refusal(body).startswith(refused)


def test_a_key_given_twice_is_found_in_the_raw_text_of_a_message() -> None:
    message = b'{"params": {"arguments": {"to": "a", "to": "b"}}}'
    found = json_input.duplicate_key(message)
    assert found is not None and found.startswith('$.params.arguments has the key "to"')
    assert json_input.duplicate_key(b'{"to": "a", "To": "b"}') is None
    assert json_input.duplicate_key(b"not json") is None
