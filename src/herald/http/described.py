"""What each route is, said beside its handler: ``@described(...)`` names its summary, the keys
it takes, the input model of its body or query, and the shape of each answer by status.
``herald.http.openapi`` makes ``/openapi.json`` of these, walking the app's routes; a route
without one is left out of it, and ``tests/http/test_openapi.py`` says which.

The errors every route of a kind may give are not listed by each: 401 and 403 where a key is
needed, 422 where there is a body or a query (and 413 for a body), 503 where the store is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from herald.inputs.refusals import Input

Key = Literal["admin", "agent", "publisher", "metrics"]
ADMIN_ONLY: tuple[Key, ...] = ("admin",)
AGENT_ONLY: tuple[Key, ...] = ("agent",)
NO_KEY: tuple[Key, ...] = ()

JSON = "application/json"
EVENT_STREAM = "text/event-stream"


@dataclass(frozen=True)
class Answer:
    """One answer of a route: what it means, and its body in each media type it may come in
    (a type pydantic can describe: a shape of ``herald.answers``; None: any). No content: no
    body."""

    says: str
    content: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Operation:
    summary: str
    keys: tuple[Key, ...]
    """The keys that may call it, any one of them; none: no key is needed."""
    answers: Mapping[int, Answer]
    body: Any = None
    """What the JSON body must be (an input model, or a type made of them); None: no body."""
    body_required: bool = True
    query: type[Input] | None = None
    errors: tuple[int, ...] = ()
    """The statuses of herald's errors it may answer with, beside those of its kind."""
    uses_store: bool = True
    """It reads or writes the store, so it answers 503 while the store is unavailable."""
    description: str | None = None
    tag: str | None = None
    """The group it is listed in; the module of its handler when not given."""
    name: str | None = None
    """Its ``operationId``; its handler's name when not given (an ASGI class must give one)."""


T = TypeVar("T")
_DESCRIBED: dict[tuple[object, str | None], Operation] = {}


def described(
    summary: str,
    *,
    keys: tuple[Key, ...],
    answers: Mapping[int, Any],
    method: str | None = None,
    body: Any = None,
    body_required: bool = True,
    query: type[Input] | None = None,
    errors: tuple[int, ...] = (),
    uses_store: bool = True,
    description: str | None = None,
    tag: str | None = None,
    name: str | None = None,
) -> Callable[[T], T]:
    """Describe a handler (every method it is routed for), or, with ``method``, one method of
    an ASGI endpoint class. ``answers`` maps each status to a shape of ``herald.answers`` (the
    JSON it answers with), to None (no body), or to an ``Answer``."""

    def attach(endpoint: T) -> T:
        _DESCRIBED[(endpoint, method)] = Operation(
            summary,
            keys,
            {status: _answer(shape) for status, shape in answers.items()},
            body,
            body_required,
            query,
            errors,
            uses_store,
            description,
            tag or getattr(endpoint, "__module__", "").rpartition(".")[2],
            name,
        )
        return endpoint

    return attach


def operation_of(endpoint: object, method: str) -> Operation | None:
    """The description of ``method`` on a route's endpoint (a handler, or an instance of an
    ASGI endpoint class, or one that wraps a handler: ``__wrapped__``), if it has one."""
    wrapped = getattr(endpoint, "__wrapped__", None)
    for owner in (endpoint, type(endpoint), wrapped, type(wrapped)):
        for key in ((owner, method), (owner, None)):
            found = _DESCRIBED.get(key)
            if found is not None:
                return found
    return None


def _answer(shape: Any) -> Answer:
    if isinstance(shape, Answer):
        return shape
    if shape is None:
        return Answer("No content.")
    said = shape.__doc__ if isinstance(shape, type) and shape.__module__ != "builtins" else None
    return Answer(_first_line(said) or "OK.", {JSON: shape})


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n\n", 1)[0].replace("\n", " ")
