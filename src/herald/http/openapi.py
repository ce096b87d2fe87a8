"""``GET /openapi.json``: the OpenAPI 3.1 document of the app, made by walking its routes and
reading each one's description (``herald.http.described``). Bodies and queries are described by
the input models that check them, answers by the shapes of ``herald.answers`` that the code
building them is typed with: nothing in it is written twice."""

from __future__ import annotations

import copy
import inspect
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import anyio.to_thread
from pydantic import Field, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

import herald
from herald import answers
from herald.http.described import JSON, NO_KEY, Answer, Key, Operation, described, operation_of
from herald.http.io import json_response
from herald.http.services import serving_app
from herald.inputs.fields import NullIsDefault, whole
from herald.inputs.listing import AgentName
from herald.inputs.refusals import Input, says
from herald.inputs.topics import TOPIC_GLOB_PATTERN
from herald.validation import TYPE_PATTERN

REF = "#/components/schemas/{model}"

KEYS: dict[Key, dict[str, str]] = {
    "admin": {
        "type": "http",
        "scheme": "bearer",
        "description": "The admin key herald serve was given (HERALD_ADMIN_KEY): every route.",
    },
    "agent": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "herald_agent_...",
        "description": "An agent's key: drains, acknowledges and answers its own events.",
    },
    "publisher": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "herald_pub_...",
        "description": "A publisher key (POST /v1/keys): only publishes, within its scope.",
    },
    "metrics": {
        "type": "http",
        "scheme": "bearer",
        "description": "The metrics token (herald serve --metrics-token): only GET /metrics.",
    },
}

PATH_PARAMETERS: dict[str, tuple[Any, str]] = {
    "agent_id": (AgentName, "The agent's id (agt_...) or its handle."),
    "id_or_handle": (AgentName, "The agent's id (agt_...) or its handle."),
    "event_id": (str, "The event's id (evt_...)."),
    "endpoint_id": (str, "The endpoint's id (end_...)."),
    "key_id": (str, "The publisher key's id (key_...)."),
    "file": (str, "A file of the web console, by name."),
    "topic": (
        Annotated[str, Field(pattern=whole(TOPIC_GLOB_PATTERN))],
        "A topic's name (1-128 letters, digits and _ . : / -, such as repo/herald) or, where"
        " an agent subscribes, a glob of names (repo/*).",
    ),
    "name": (
        Annotated[str, Field(pattern=whole(TYPE_PATTERN))],
        "The event type's name: 1-128 letters, digits and _ . : -.",
    ),
}
"""Each path parameter's type and meaning, by name."""

TAGS = {
    "mcp": "herald's MCP server, for agents' MCP clients (streamable HTTP).",
    "reference": "What this page and the OpenAPI document are made of.",
    "console": (
        "The web console's page and files. They hold no data: the console reads it from the"
        " admin API with the key it is signed in with."
    ),
}
"""What a group of routes is, where its module's docstring does not say it for users."""

ERRORS: dict[int, str] = {
    401: "No key, or a key herald does not know.",
    403: "A key that may not do this (the message says what it may do).",
    404: "What the path names does not exist, or is not visible to this key.",
    408: "The body stopped arriving, or did not arrive whole in time; the connection is closed.",
    409: "It clashes with what exists (a handle already taken, say).",
    413: "The body, an event or a batch is over its limit.",
    422: "The body or query is malformed: the message names the field and what to send.",
    429: "The key is over one of its limits; nothing was done. Retry after Retry-After.",
    503: "The store cannot be reached; nothing was done. Retry after Retry-After.",
}
_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before trying again.",
        "schema": {"type": "integer", "minimum": 1},
    }
}


@dataclass(frozen=True)
class Undescribed:
    """A route the document leaves out, and what to add to describe it."""

    method: str
    path: str
    fix: str


def routes_of(routes: Sequence[BaseRoute]) -> Iterator[tuple[Route, str]]:
    """Each (route, method) the app serves, HEAD aside (a GET's twin)."""
    for route in routes:
        if isinstance(route, Route):
            for method in sorted(route.methods or ()):
                if method != "HEAD":
                    yield route, method


def undescribed(routes: Sequence[BaseRoute]) -> list[Undescribed]:
    """The routes (and those of their path parameters) that nothing describes."""
    missing = []
    for route, method in routes_of(routes):
        operation = operation_of(route.endpoint, method)
        unknown = sorted(set(route.param_convertors) - set(PATH_PARAMETERS))
        endpoint = route.endpoint
        if operation is None:
            name = getattr(endpoint, "__qualname__", None) or type(endpoint).__qualname__
            fix = f"add @described(...) (herald.http.described) to {endpoint.__module__}.{name}"
            missing.append(Undescribed(method, route.path, fix))
        elif unknown:
            fix = f"add {', '.join(unknown)} to PATH_PARAMETERS of herald.http.openapi"
            missing.append(Undescribed(method, route.path, fix))
    missing += [
        Undescribed("*", repr(route), "mount only Routes: herald.http.openapi walks them")
        for route in routes
        if not isinstance(route, Route)
    ]
    return missing


def document(routes: Sequence[BaseRoute]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the routes that are described."""
    schemas = Schemas()
    paths: dict[str, dict[str, Any]] = {}
    tags: dict[str, str] = {}
    names: set[str] = set()
    for route, method in routes_of(routes):
        operation = operation_of(route.endpoint, method)
        if operation is None or set(route.param_convertors) - set(PATH_PARAMETERS):
            continue
        tag = operation.tag or "other"
        tags.setdefault(tag, TAGS.get(tag) or _tag_description(route.endpoint))
        handler = str(getattr(route.endpoint, "__name__", "route"))
        name = _operation_id(operation.name or handler, names)
        # path_format: the path without its parameters' convertors ({topic:path} is {topic})
        paths.setdefault(route.path_format, {})[method.lower()] = _operation(
            operation, route, tag, name, schemas
        )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "herald",
            "version": herald.__version__,
            "summary": "Get every event to every AI agent, over whatever its client can take.",
            "description": (
                "Each route takes a key as `Authorization: Bearer <key>`: the admin key, an"
                " agent's key or a publisher key (see each route's security). Every error is"
                ' `{"error": {"code": ..., "message": ...}}`: the code for programs, the message'
                " for people, saying what to do."
            ),
        },
        "tags": [{"name": name, "description": text} for name, text in tags.items()],
        "paths": paths,
        "components": {"schemas": schemas.named, "securitySchemes": KEYS},
    }


class Schemas:
    """The document's named schemas, each added once, and the schema of each shape."""

    def __init__(self) -> None:
        self.named: dict[str, Any] = {}
        self._made: dict[Any, dict[str, Any]] = {}

    def of(self, shape: Any) -> dict[str, Any]:
        """The schema of ``shape`` (a class of its own is named, and referred to); None: any."""
        if shape is None:
            return {}
        if shape not in self._made:  # the same shapes come again and again (Error above all)
            schema = self.inline(shape)
            if "$ref" not in schema and _is_class(shape):
                self._add(shape.__name__, schema)
                schema = {"$ref": REF.format(model=shape.__name__)}
            self._made[shape] = schema
        return copy.deepcopy(self._made[shape])

    def inline(self, shape: Any) -> dict[str, Any]:
        """The schema of ``shape`` itself; the shapes it is made of are named. (An input
        model's docstring is for herald's code: its fields and its route say what to send.)"""
        schema = TypeAdapter(shape).json_schema(ref_template=REF, schema_generator=_Generator)
        inputs = _input_models()
        _as_input(inputs.get(getattr(shape, "__name__", "")), schema)
        for name, definition in schema.pop("$defs", {}).items():
            _as_input(inputs.get(name), definition)
            self._add(name, definition)
        return schema

    def _add(self, name: str, schema: dict[str, Any]) -> None:
        known = self.named.setdefault(name, schema)
        if known != schema:
            raise ValueError(f"two shapes are named {name}: give one another name")


class _Generator(GenerateJsonSchema):
    """pydantic's JSON Schema, without the title it makes of each field's name, nor a null
    default where null is not taken (a field that may be left out, not sent as null); null
    where it is taken as the default (``NullIsDefault``), which MCP tools' schemas leave out."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def function_before_schema(
        self, schema: core_schema.BeforeValidatorFunctionSchema
    ) -> JsonSchemaValue:
        found = super().function_before_schema(schema)
        if schema["function"]["function"] is NullIsDefault.func and not _takes_null(found):
            return {"anyOf": [found, {"type": "null"}]}  # null is taken, as the default
        return found

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        found = super().default_schema(schema)
        if found.get("default", ...) is None and not _takes_null(found):
            del found["default"]
        return found


def _takes_null(schema: JsonSchemaValue) -> bool:
    kinds = schema.get("anyOf", [schema])
    return any(kind.get("type") == "null" or kind == {} for kind in kinds)


def _input_models() -> dict[str, type[Input]]:
    found: dict[str, type[Input]] = {}
    todo: list[type[Input]] = [Input]
    while todo:
        for model in todo.pop().__subclasses__():
            found[model.__name__] = model
            todo.append(model)
    return found


def _as_input(model: type[Input] | None, schema: dict[str, Any]) -> None:
    """An input model's schema as the document shows it: each field that has no description
    says what it must be (the words its refusal ends with), and the model's docstring, written
    for herald's code, is left out."""
    if model is None:
        return
    schema.pop("description", None)
    properties = schema.get("properties", {})
    for name, field in model.model_fields.items():
        said = says(model, name)
        found = properties.get(field.alias or name)
        if said and found is not None and "description" not in found:
            found["description"] = said[:1].upper() + said[1:] + "."


def _is_class(shape: Any) -> bool:
    return isinstance(shape, type) and shape.__module__ != "builtins"


def _operation(
    operation: Operation, route: Route, tag: str, name: str, schemas: Schemas
) -> dict[str, Any]:
    described: dict[str, Any] = {"operationId": name, "summary": operation.summary, "tags": [tag]}
    if operation.description:
        described["description"] = operation.description
    described["security"] = [{key: []} for key in operation.keys]
    parameters = [_path_parameter(name) for name in route.param_convertors]
    if operation.query is not None:
        parameters += _query_parameters(schemas.inline(operation.query))
    if parameters:
        described["parameters"] = parameters
    if operation.body is not None:
        described["requestBody"] = {
            "required": operation.body_required,
            "content": {JSON: {"schema": schemas.of(operation.body)}},
        }
    described["responses"] = _responses(operation, schemas)
    return described


def _responses(operation: Operation, schemas: Schemas) -> dict[str, Any]:
    responses = {
        str(status): _response(answer, schemas, status)
        for status, answer in sorted(operation.answers.items())
    }
    for status in sorted(_errors(operation)):
        if str(status) not in responses:
            error = Answer(ERRORS[status], {JSON: answers.Error})
            responses[str(status)] = _response(error, schemas, status)
    return responses


def _errors(operation: Operation) -> set[int]:
    errors = set(operation.errors)
    if operation.keys != NO_KEY:
        errors |= {401, 403}
    if operation.body is not None:
        errors |= {408, 413, 422}
    if operation.query is not None:
        errors.add(422)
    if operation.uses_store:
        errors.add(503)
    return errors


def _response(answer: Answer, schemas: Schemas, status: int = 200) -> dict[str, Any]:
    response: dict[str, Any] = {"description": answer.says}
    if answer.content:
        response["content"] = {
            media: {"schema": schemas.of(shape)} for media, shape in answer.content.items()
        }
    if status in (429, 503):
        response["headers"] = _RETRY_AFTER
    return response


def _path_parameter(name: str) -> dict[str, Any]:
    kind, meaning = PATH_PARAMETERS[name]
    schema = TypeAdapter(kind).json_schema(schema_generator=_Generator)
    return {"name": name, "in": "path", "required": True, "description": meaning, "schema": schema}


def _query_parameters(model: dict[str, Any]) -> list[dict[str, Any]]:
    """A query model's fields, each a parameter."""
    required = set(model.get("required", ()))
    parameters = []
    for name, each in model["properties"].items():
        schema = _without_null(each)
        parameter = {"name": name, "in": "query", "required": name in required}
        if "description" in schema:
            parameter["description"] = schema.pop("description")
        parameters.append({**parameter, "schema": schema})
    return parameters


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter's schema: a query cannot send null, only leave the parameter out."""
    rest = {key: value for key, value in schema.items() if key != "anyOf"}
    if rest.get("default", ...) is None:
        del rest["default"]
    kinds = [kind for kind in schema.get("anyOf", ()) if kind != {"type": "null"}]
    if not kinds:
        return rest
    return {**rest, **kinds[0]} if len(kinds) == 1 else {**rest, "anyOf": kinds}


def _operation_id(name: str, taken: set[str]) -> str:
    unique, n = name, 2
    while unique in taken:
        unique, n = f"{name}_{n}", n + 1
    taken.add(unique)
    return unique


def _tag_description(endpoint: Any) -> str:
    module = sys.modules.get(getattr(endpoint, "__module__", ""))
    return inspect.cleandoc(module.__doc__ or "").split("\n\n", 1)[0] if module else ""


@described(
    "This document",
    keys=NO_KEY,
    answers={200: Answer("The OpenAPI 3.1 document of every route.", {JSON: dict[str, Any]})},
    uses_store=False,
    tag="reference",
)
async def openapi_json(request: Request) -> Response:
    return json_response(await cached_document(request))


async def cached_document(request: Request) -> dict[str, Any]:
    """The document of the app serving ``request``, made once (its routes do not change), and
    in a thread: the other requests need not wait for it."""
    app = serving_app(request)
    state = app.state
    found: dict[str, Any] | None = getattr(state, "openapi", None)
    if found is None:
        found = await anyio.to_thread.run_sync(document, app.routes)
        state.openapi = found
    return found


ROUTES = [Route("/openapi.json", openapi_json, methods=["GET"])]
