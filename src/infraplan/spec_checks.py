"""Checks every spec model shares, before pydantic coerces the input.

Pydantic's lax mode reads `true` as 1 where a number is expected (`replicas: true` would run
one replica). A YAML or JSON boolean is never a count or a price, so it is refused; strings
stay accepted, because PyYAML reads `tokens: 1e10` (no dot) as the string '1e10'.
"""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, model_validator

_NUMBERS = (int, float)


def _numeric(annotation: Any) -> bool:
    """int, float, `X | None` of them, or a container (tuple, dict values) of them."""
    if annotation in _NUMBERS:
        return True
    origin = get_origin(annotation)
    if origin is Literal:  # ZeRO stages: Literal[0, 1, 2, 3]
        return all(isinstance(a, int) and not isinstance(a, bool) for a in get_args(annotation))
    if origin in (Union, types.UnionType, tuple, dict):
        args = [a for a in get_args(annotation) if a not in (type(None), Ellipsis)]
        if origin is dict:
            args = args[1:]  # the values, not the keys
        return bool(args) and any(_numeric(a) or _numeric_metadata(a) for a in args)
    return _numeric_metadata(annotation)


def _numeric_metadata(annotation: Any) -> bool:
    """Annotated[int, ...] and pydantic's constrained ints (PositiveInt)."""
    base = getattr(annotation, "__origin__", None)
    return base in _NUMBERS


def _has_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_bool(v) for v in value)
    if isinstance(value, dict):
        return any(_has_bool(v) for v in value.values())
    return False


def boolean_numbers(model: type[BaseModel], data: Any) -> str | None:
    """A message naming the first numeric field of `model` given a boolean, else None."""
    if not isinstance(data, dict):
        return None
    for name, value in data.items():
        field = model.model_fields.get(name) if isinstance(name, str) else None
        if field is not None and _numeric(field.annotation) and _has_bool(value):
            return f"{name} must be a number, not a true/false value (got {value!r})"
    return None


class StrictNumbers(BaseModel):
    """Base of the spec models: no booleans for numbers, no NaN or infinity in floats (a
    `.inf` price or token count would only fail later, far from its field)."""

    model_config = ConfigDict(allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_numbers(cls, data: Any) -> Any:
        problem = boolean_numbers(cls, data)
        if problem:
            raise ValueError(problem)
        return data
