"""An MCP tool's ``inputSchema``, made from the model that checks its arguments: what a client is
told is what herald takes.

Made for what MCP clients read: no ``$ref`` to resolve (``$defs`` are inlined), no titles
(pydantic makes them from the field names), and an optional field written as its type alone:
a null is taken as the field left out, but no client needs to be told it may send one.
"""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from herald.inputs.refusals import Input


class _ToolSchema(GenerateJsonSchema):
    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def tool_schema(model: type[Input]) -> dict[str, Any]:
    """The JSON Schema of ``model``'s arguments, as an MCP tool advertises it."""
    schema = model.model_json_schema(schema_generator=_ToolSchema)
    definitions = schema.pop("$defs", {})
    for key in ("title", "description"):
        schema.pop(key, None)  # the tool has its own name and description
    inlined = _inline(schema, definitions)
    assert isinstance(inlined, dict)
    return inlined


def _inline(value: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = definitions[ref.removeprefix("#/$defs/")]
            target = {k: v for k, v in target.items() if k not in ("title", "description")}
            rest = {k: v for k, v in value.items() if k != "$ref"}
            return _inline({**target, **rest}, definitions)
        return {
            key: _inline(item, definitions)
            for key, item in value.items()
            if not (key == "default" and item is None)
        }
    if isinstance(value, list):
        return [_inline(item, definitions) for item in value]
    return value
