"""An input's JSON Schema as an MCP client gets it: self-contained, closed, no nulls."""

from __future__ import annotations

import json

from herald.inputs.agents import NewAgentInput
from herald.inputs.channel import InboxInput
from herald.inputs.schema import tool_schema


def test_a_nested_model_is_inlined_and_closed() -> None:
    schema = tool_schema(NewAgentInput)
    assert "$ref" not in json.dumps(schema) and "$defs" not in schema
    delivery = schema["properties"]["delivery"]
    assert delivery["type"] == "object" and delivery["additionalProperties"] is False
    assert delivery["properties"]["channel"] == {"type": "boolean"}


def test_an_optional_field_is_its_type_alone_and_keeps_a_real_default() -> None:
    assert tool_schema(InboxInput) == {
        "type": "object",
        "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}},
        "additionalProperties": False,
    }
    assert tool_schema(NewAgentInput)["properties"]["webhook_url"] == {"type": "string"}
