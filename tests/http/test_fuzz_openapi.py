"""schemathesis, driven by herald's own OpenAPI document, against a real ``herald serve`` on
SQLite: requests made from each route's documented parameters and body (valid ones, and ones
the document says are not), each sent with the key the route documents. No answer may be a 5xx,
have a status or a content type the route does not document, or a body that is not the
documented schema of its status; what the document calls invalid must be refused.

The budget is bounded: schemathesis's coverage phase (the boundary values of each parameter and
field, valid and not) and ``HERALD_FUZZ_EXAMPLES`` drawn requests per route, derandomized (the
same requests every run; ``HERALD_FUZZ_RANDOM=1`` draws new ones). The routes whose answer never
ends (an agent's event stream, the admin's feed, an MCP session's stream) are left out: their
own tests drive them."""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from herald.http.app import create_app
from herald.http.openapi import document
from herald.hub import Hub
from tests.http.fuzzing import TYPED, World, world_on

EXAMPLES = int(os.environ.get("HERALD_FUZZ_EXAMPLES", "5"))
DOCUMENT = document(create_app(Hub.from_url("sqlite:///never-opened.db")).routes)
ENDLESS = sorted(
    operation["operationId"]
    for methods in DOCUMENT["paths"].values()
    for operation in methods.values()
    if set(operation["responses"].get("200", {}).get("content", {})) == {"text/event-stream"}
)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
REFUSALS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "429"]
"""What invalid data may be answered with: any refusal herald gives (413 for a body or a batch
over its limit among them)."""
CONFIG = schemathesis.Config.from_dict(
    {
        "checks": {"negative_data_rejection": {"expected-statuses": REFUSALS}},
        # One method no route has, for each path: test_api covers 405 on every route.
        "phases": {"coverage": {"unexpected-methods": ["trace"]}},
    }
)
schema = schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG).exclude(operation_id=ENDLESS)
SESSION = requests.Session()
"""One connection for every request: the budget goes to requests, not to handshakes."""
_turn = itertools.count()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with world_on("sqlite", tmp_path_factory.mktemp("fuzz-openapi")) as opened:
        yield opened


def test_every_route_is_fuzzed_but_those_that_never_end() -> None:
    fuzzed = {result.ok().label for result in schema.get_all_operations()}
    documented = sum(len(methods) for methods in DOCUMENT["paths"].values())
    # A new route whose answer never ends is left out too: name it here, and test it apart.
    assert ENDLESS == ["feed", "mcp_get", "stream_events"]
    assert len(fuzzed) == documented - len(ENDLESS) == len(FUZZED)
    assert all(callable(globals().get(f"test_fuzzed_{name}")) for name in FUZZED)


def _fuzz(case: schemathesis.Case, world: World) -> None:
    operation = DOCUMENT["paths"][case.operation.path][case.operation.method.lower()]
    valid = case.meta is None or case.meta.generation.mode == GenerationMode.POSITIVE
    if valid and next(_turn) % 2:
        _aim(case, world)
    headers = {}
    if operation["security"]:
        (kind,) = operation["security"][0]  # the first key the route takes
        key = world.alice.key if kind == "agent" else world.keys[kind]
        headers["authorization"] = f"Bearer {key}"
    base_url = str(world.http.base_url)
    case.call_and_validate(base_url=base_url, headers=headers, checks=CHECKS, session=SESSION)


def _fuzz_test(operation_id: str) -> Callable[[schemathesis.Case, World], None]:
    """A test of its own for one route. (One function parametrized by schemathesis over every
    route would do, but its items then share one node id on pytest 9.2, which gives them their
    function's name without the route: pytest-xdist, which tells tests apart by node id, would
    run one of them.)"""

    def test(case: schemathesis.Case, world: World) -> None:
        """No answer is a server error or contradicts the document."""
        _fuzz(case, world)

    fuzzed = schema.include(operation_id=operation_id).parametrize()
    return fuzzed(
        settings(
            max_examples=EXAMPLES,
            derandomize=not os.environ.get("HERALD_FUZZ_RANDOM"),
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )(test)
    )


FUZZED = [
    operation["operationId"]
    for methods in DOCUMENT["paths"].values()
    for operation in methods.values()
    if operation["operationId"] not in ENDLESS
]
"""In the document's order, the order they ran in as one function's items."""
for _operation_id in FUZZED:
    globals()[f"test_fuzzed_{_operation_id}"] = _fuzz_test(_operation_id)


def _aim(case: schemathesis.Case, world: World) -> None:
    """Make half the valid requests name what exists (an agent, an event, a declared type, a
    publisher key), so that they reach past the lookup; a DELETE names something made for it.
    (An invalid request is left as it was made: its path may be what makes it invalid.)"""
    doomed = case.operation.method.upper() == "DELETE"
    real = {
        "agent_id": _new_agent(world) if doomed else world.target.handle,
        "id_or_handle": world.target.handle,
        "event_id": world.events[0],
        "name": _new_type(world) if doomed else TYPED,
        "key_id": _new_key(world) if doomed else None,
    }
    for name in list(case.path_parameters or {}):
        if real.get(name) is not None:
            case.path_parameters[name] = real[name]
    # A body's agent: alice for an event (the publisher key may publish to her only), bob for
    # what alice writes; the event she answers is hers.
    to = world.bob.handle if case.operation.path.startswith("/channel/") else world.alice.handle
    for item in case.body if isinstance(case.body, list) else [case.body]:
        if isinstance(item, dict):
            item.update(
                {k: v for k, v in (("to", to), ("event_id", world.events[-1])) if k in item}
            )


def _new_agent(world: World) -> str:
    return world.new_agent("doomed").handle


def _new_type(world: World) -> str:
    name = f"doomed.{uuid.uuid4().hex[:8]}"
    world.admin("PUT", f"/v1/event-types/{name}", json={"description": "to delete"})
    return name


def _new_key(world: World) -> str:
    made = world.admin("POST", "/v1/keys", json={"name": "doomed", "scopes": ["publish"]})
    return str(made.json()["id"])
