"""Payload schemas: what an operator may declare for an event type, and the refusal of data
that is not valid against one, naming the path at fault."""

from __future__ import annotations

import json
from typing import Any

import pytest

from herald.errors import InvalidInput, TooLarge
from herald.payload_schemas import check_payload_schema, compile_schema, json_path

ITEMS = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {"type": "object", "properties": {"count": {"type": "integer"}}},
        }
    },
}


def nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_a_valid_schema_is_taken_as_compact_json() -> None:
    assert json.loads(check_payload_schema(ITEMS, "payload_schema")) == ITEMS
    with_refs = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.com/build",
        "$defs": {"count": {"$anchor": "count", "type": "integer", "minimum": 0}},
        "properties": {"a": {"$ref": "#/$defs/count"}, "b": {"$ref": "#count"}},
        "examples": [{"$ref": "http://example.com/only-a-value"}],
    }
    check_payload_schema(with_refs, "payload_schema")


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        (True, "payload_schema must be a JSON Schema object"),
        ([], "payload_schema must be a JSON Schema object"),
        ({"type": "nope"}, "payload_schema.type is not valid JSON Schema (draft 2020-12)"),
        (
            {"properties": {"n": {"minimum": "1"}}},
            "payload_schema.properties.n.minimum is not valid JSON Schema (draft 2020-12):"
            " '1' is not of type 'number'",
        ),
        ({"pattern": "("}, "payload_schema.pattern is not valid JSON Schema"),
        ({"$schema": "http://json-schema.org/draft-07/schema#"}, "payload_schema.$schema must"),
        ({"$ref": "https://example.com/s.json"}, "points outside it: herald fetches nothing"),
        ({"$ref": "#/$defs/missing"}, "'#/$defs/missing' that points to nothing in it"),
        ({"properties": {"a": {"$id": "https://example.com/a"}}}, "an $id below its top"),
        ({"pattern": "(" * 2000 + ")" * 2000}, "a regular expression Python cannot compile"),
        ({"pattern": "a{4294967296}"}, "a regular expression Python cannot compile"),
        ({"const": "\x00"}, "NUL character"),
        ({"const": float("nan")}, "holds what JSON text cannot carry"),
        (nested(40), "nests deeper than 64 levels"),
    ],
)
def test_what_is_not_a_usable_schema_is_refused_by_name(schema: Any, fragment: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_payload_schema(schema, "payload_schema")
    assert fragment in refused.value.message


def test_a_schema_over_64_kib_is_too_large() -> None:
    big = {"description": "x" * (64 * 1024)}
    with pytest.raises(TooLarge, match="the limit is 65536"):
        check_payload_schema(big, "payload_schema")


def test_invalid_data_is_refused_naming_its_path_and_the_type() -> None:
    validator = compile_schema(ITEMS)
    validator.check({"items": [{"count": 3}]}, "event.data", "build.failed")
    with pytest.raises(InvalidInput) as refused:
        validator.check({"items": [{"count": "x"}]}, "event.data", "build.failed")
    assert refused.value.message == (
        "event.data.items[0].count: 'x' is not of type 'integer'"
        " (event type build.failed declares a payload_schema)"
    )


def test_a_number_too_large_to_check_is_refused_not_failed_on() -> None:
    validator = compile_schema({"multipleOf": 0.1})
    with pytest.raises(InvalidInput, match=r"event\.data holds a number too large to check"):
        validator.check(10**400, "event.data", "t")


def test_a_long_value_at_fault_is_cut_short_in_the_refusal() -> None:
    validator = compile_schema({"type": "integer"})
    with pytest.raises(InvalidInput) as refused:
        validator.check("x" * 10_000, "event.data", "t")
    assert len(refused.value.message) < 500
    assert refused.value.message.endswith(
        "is not of type 'integer' (event type t declares a payload_schema)"
    )


def test_a_path_names_odd_keys_in_brackets() -> None:
    assert json_path(["items", 0, "count"]) == ".items[0].count"
    assert json_path(["odd key", "$defs", "a.b"]) == '["odd key"].$defs["a.b"]'
    assert json_path([]) == ""
