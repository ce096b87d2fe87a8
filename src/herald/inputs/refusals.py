"""From pydantic's ``ValidationError`` to herald's ``InvalidInput``: one refusal, naming the value
at fault by its path in the body (``event.to``, ``events[3].type``) and saying what to send.

A field says what it must be with ``Says`` in its annotation; a validator that refuses raises
``refuse(...)`` (or runs one of herald's own checks through ``refused_by``), whose text follows the
path. The first fault is reported, unknown fields before the rest, as herald's checks always have.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, ClassVar, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

from herald.errors import InvalidInput, TooLarge

_REFUSED = "herald_refused"
_TOO_LARGE = "herald_too_large"
_NOT_AN_OBJECT = frozenset({"model_type", "model_attributes_type", "dict_type"})


@dataclass(frozen=True)
class Says:
    """What a field must be, in words (``"must be a non-empty string"``): the end of every
    refusal of the field. Put it in the field's ``Annotated[...]``; the last one given counts."""

    text: str


class Input(BaseModel):
    """A body or a tool's arguments, as herald takes them: no field it does not name, and no
    value taken for another type ("1" is not 1, true is not a number)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)

    where: ClassVar[str] = "body"
    """What a refusal calls the whole: ``event``, ``message``, ``ack``."""
    shape: ClassVar[str] = "a JSON object"
    """What it must be, said when it is not an object."""
    item: ClassVar[str] = "field"
    """What its members are called when one is unknown: a field, a key, an argument."""


M = TypeVar("M", bound=Input)
T = TypeVar("T")


def refuse(tail: str, *, too_large: bool = False) -> PydanticCustomError:
    """The refusal a validator raises. ``tail`` follows the path of the value it checked: it
    starts with a space (``" holds a NUL character"``) or a dot (``".properties.x must ..."``)."""
    return PydanticCustomError(_TOO_LARGE if too_large else _REFUSED, "{tail}", {"tail": tail})


def refused_by(check: Callable[[Any, str], Any], value: Any, name: str) -> Any:
    """Run one of herald's checks, which raise ``InvalidInput`` messages that begin with
    ``name``, inside a validator: its refusal is turned into one relative to the value's path.

    Raises:
        PydanticCustomError: the check refused ``value``.
    """
    try:
        return check(value, name)
    except InvalidInput as exc:
        tail = exc.message[len(name) :] if _begins_with(exc.message, name) else f": {exc.message}"
        raise refuse(tail, too_large=isinstance(exc, TooLarge)) from exc


def parse(model: type[M], raw: Any, where: str | None = None) -> M:
    """``raw`` checked as ``model``; ``where`` names it in refusals (``model.where`` if not).

    Raises:
        InvalidInput: the first fault, named by its path (TooLarge where the size is at fault).
    """
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise invalid_input(exc, model, where or model.where) from exc


def checked(adapter: TypeAdapter[T], model: type[Input], raw: Any, where: str) -> T:
    """``raw`` checked by ``adapter``, a type made of ``model`` (such as a list of it, checked
    in one call however long): a refusal names an item of a list by its index (``events[3]``).

    Raises:
        InvalidInput: the first fault of the first item at fault (TooLarge: its size).
    """
    try:
        return adapter.validate_python(raw)
    except ValidationError as exc:
        raise invalid_input(exc, model, where) from exc


def invalid_input(exc: ValidationError, model: type[Input], where: str) -> InvalidInput:
    """The refusal that names the first fault of ``exc`` (raised checking ``model``, called
    ``where``) and says what to send."""
    errors = exc.errors(include_url=False, include_input=False)
    first = _first(errors)
    path, owner, field, reached = _locate(first["loc"], model, where)
    kind = first["type"]
    if kind == "extra_forbidden":
        return _unknown(errors, first, path, reached or owner)
    if kind in (_REFUSED, _TOO_LARGE):
        message = path + str((first.get("ctx") or {})["tail"])
        return TooLarge(message) if kind == _TOO_LARGE else InvalidInput(message)
    if kind == "string_unicode":
        return InvalidInput(f"{path} holds what JSON text cannot carry: an unpaired surrogate")
    if kind in _NOT_AN_OBJECT and reached is not None:
        return InvalidInput(f"{path} must be {reached.shape}")
    # A field that is a model of its own says what to send by the model's shape.
    shape = f"must be {reached.shape}" if reached is not None and field is not None else None
    said = says(owner, field) or shape or f"is malformed: {first['msg']}"
    return InvalidInput(f"{path} is required and {said}" if kind == "missing" else f"{path} {said}")


def _first(errors: Sequence[ErrorDetails]) -> ErrorDetails:
    """The first fault; an unknown field first among those of the same item of a list."""
    first = errors[0]
    item = first["loc"][:1] if first["loc"] and isinstance(first["loc"][0], int) else ()
    for error in errors:
        if error["type"] == "extra_forbidden" and error["loc"][: len(item)] == item:
            return error
    return first


def _locate(
    loc: tuple[int | str, ...], model: type[Input], where: str
) -> tuple[str, type[Input], str | None, type[Input] | None]:
    """The path of a fault (up to the last field it names), the model that field is in, the
    field, and the model expected at the end of the path (None if not a model). Parts of ``loc``
    that are not fields (a union's member, an index inside a field) are not places in the body."""
    path, owner, field = where, model, None
    current: type[Input] | None = model
    items: type[Input] | None = None  # the model of each item of the field reached, a list
    for part in loc:
        if isinstance(part, int) and (field is None or items is not None):
            path += f"[{part}]"
            if items is not None:
                current, items = items, None
        elif isinstance(part, str) and current is not None and (name := _field(current, part)):
            path, owner, field = f"{path}.{part}", current, name
            annotation = current.model_fields[name].annotation
            current, items = _model_in(annotation), _items_in(annotation)
        else:
            current = None if isinstance(part, int) else current
    return path, owner, field, current


def _field(model: type[Input], key: str) -> str | None:
    for name, info in model.model_fields.items():
        if (info.alias or name) == key:
            return name
    return None


def _model_in(annotation: Any) -> type[Input] | None:
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, Input):
            return candidate
    return None


def _items_in(annotation: Any) -> type[Input] | None:
    """The model of each item of a field that is a list of them (or None)."""
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if getattr(candidate, "__origin__", None) is list:
            return _model_in(get_args(candidate)[0])
    return None


def says(model: type[Input], field: str | None) -> str | None:
    """What a field of ``model`` must be, in the words of its ``Says``, if it has one."""
    if field is None:
        return None
    info = model.model_fields[field]
    # An optional field's words are in its type, a member of ``X | None``.
    members = [getattr(member, "__metadata__", ()) for member in get_args(info.annotation)]
    said = [m.text for m in (*chain(*members), *info.metadata) if isinstance(m, Says)]
    return said[-1] if said else None


def _unknown(
    errors: Sequence[ErrorDetails], first: ErrorDetails, path: str, owner: type[Input]
) -> InvalidInput:
    where = first["loc"][:-1]
    names = [
        str(e["loc"][-1])
        for e in errors
        if e["type"] == "extra_forbidden" and e["loc"][:-1] == where
    ]
    allowed = ", ".join(sorted(info.alias or name for name, info in owner.model_fields.items()))
    return InvalidInput(
        f"{path} has unknown {owner.item}(s) {', '.join(sorted(names))}; allowed: {allowed}"
    )


def _begins_with(message: str, name: str) -> bool:
    return message.startswith(name) and message[len(name) : len(name) + 1] in (" ", ".")
