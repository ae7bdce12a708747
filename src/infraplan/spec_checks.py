"""Checks every spec model shares, and the one way their problems are described.

Pydantic's lax mode reads `true` as 1 where a number is expected (`replicas: true` would run
one replica). A YAML or JSON boolean is never a count or a price, so it is refused; strings
stay accepted, because PyYAML reads `tokens: 1e10` (no dot) as the string '1e10'. A whole
number past MAX_WHOLE_NUMBER is refused too, where the field sets no tighter bound itself.

`describe_errors` turns a pydantic ValidationError into one clause per problem, each naming
the dotted path of its field: `training.seq_len must be >= 1 (got 0)`, `traffic.input.vlaue
is not a known key; did you mean 'value'?`.
"""

from __future__ import annotations

import types
from datetime import date
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from infraplan.errors import InputError, close_matches

_NUMBERS = (int, float)

# The largest whole number a spec field takes: 2^53, the last integer a float64 holds exactly.
# A count past it (a 400-digit lora_rank, a seed past int64) overflows float or NumPy
# arithmetic far from its field; no real count, size or seed comes near it.
MAX_WHOLE_NUMBER = 2**53


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


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _first(value: Any, unfit) -> Any:
    """The first item of a value (a number, a list or a mapping of them) that is `unfit`."""
    if isinstance(value, (list, tuple)):
        items = value
    elif isinstance(value, dict):
        items = value.values()
    else:
        return value if unfit(value) else None
    return next((bad for v in items if (bad := _first(v, unfit)) is not None), None)


def _own_upper_bound(field: Any) -> bool:
    """A field with an le/lt bound of its own (on the field itself, not on its items)."""
    return any(hasattr(m, "le") or hasattr(m, "lt") for m in field.metadata)


def unfit_numbers(model: type[BaseModel], data: Any) -> tuple[str, str] | None:
    """(field, problem) for the first numeric field of `model` given a boolean or a whole
    number past MAX_WHOLE_NUMBER (where the field has no bound of its own), else None."""
    if not isinstance(data, dict):
        return None
    for name, value in data.items():
        field = model.model_fields.get(name) if isinstance(name, str) else None
        if field is None or not _numeric(field.annotation):
            continue
        if (flag := _first(value, lambda v: isinstance(v, bool))) is not None:
            return name, f"must be a number, not a true/false value (got {flag!r})"
        huge = None if _own_upper_bound(field) else _first(
            value, lambda v: _whole(v) and abs(v) > MAX_WHOLE_NUMBER)
        if huge is not None:
            return name, f"must be at most {MAX_WHOLE_NUMBER:,} (2^53) (got {shown_value(huge)})"
    return None


def shown_value(value: Any) -> str:
    """A value as an error message echoes it: repr, but a number or text too long to read
    as its size (Python refuses to print an integer past 4,300 digits at all)."""
    if _whole(value) and value.bit_length() > 64:
        return f"a whole number of about {value.bit_length() * 0.30103:,.0f} digits"
    if isinstance(value, str) and len(value) > 80:
        return f"{value[:40]!r}... ({len(value):,} characters)"
    return repr(value)


def given(spec: BaseModel, name: str) -> bool:
    """`name` was given to `spec`, and to something other than its default. Checks that
    refuse a field in some context ask this, not model_fields_set alone: a spec written
    back by model_dump() holds every field at its default, and must validate again."""
    return (name in spec.model_fields_set
            and getattr(spec, name) != type(spec).model_fields[name].default)


class FieldError(InputError):
    """Raised by a model validator about one field: the field extends the error's path."""

    def __init__(self, field: str, detail: str, *, fix: str | None = None):
        self.field, self.detail = field, detail
        super().__init__(f"{field} {detail}", fix=fix)


class StrictNumbers(BaseModel):
    """Base of the spec models: no booleans for numbers, no whole number past 2^53, no NaN
    or infinity in floats (a `.inf` price or token count would only fail later, far from
    its field)."""

    model_config = ConfigDict(allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _plain_numbers(cls, data: Any) -> Any:
        problem = unfit_numbers(cls, data)
        if problem:
            raise FieldError(*problem)
        return data


_PHRASES = {"greater_than": "must be > {gt}", "greater_than_equal": "must be >= {ge}",
            "less_than": "must be < {lt}", "less_than_equal": "must be <= {le}"}


def _length_phrase(err: dict) -> str:
    """pydantic says "Tuple should have at most 2 items after validation, not 3"."""
    ctx, got = err["ctx"], err["ctx"].get("actual_length")
    if err["type"] == "too_short" and ctx["min_length"] == 1:
        return "must not be empty"
    bound, n = (("at most", ctx["max_length"]) if err["type"] == "too_long"
                else ("at least", ctx["min_length"]))
    return f"must have {bound} {n} item{'s' * (n != 1)}" + (f", not {got}" if got is not None
                                                          else "")


def describe_errors(exc: ValidationError, model: type[BaseModel], root: str = "") -> str:
    """One clause per problem, '; '-joined, each starting with the field's dotted path
    (under `root`, the name of `model` in its document, if it has one)."""
    clauses, listed = [], set()  # the valid keys are listed once per mapping
    errors = exc.errors()
    for err in errors:
        loc = [str(p) for p in err["loc"]]
        if err["type"] in ("too_long", "too_short") and any(
                other["loc"][:len(loc)] == err["loc"] and len(other["loc"]) > len(loc)
                for other in errors):
            continue  # pydantic counts only the items that validated: an echo of theirs
        error, got = err.get("ctx", {}).get("error"), err.get("input")
        shown = "" if isinstance(got, (dict, list, tuple)) else f" (got {shown_value(got)})"
        if isinstance(error, FieldError):
            loc.append(error.field)
            text = error.detail if error.fix is None else f"{error.detail}; to fix: {error.fix}"
        elif isinstance(error, InputError):  # a field validator's: the value before the fix
            echo = "" if shown.removeprefix(" (got ").removesuffix(")") in error.message \
                else shown
            text = f"{error.message}{echo}"
            if error.fix is not None:
                text += (" To fix: " if text.endswith(("?", ".")) else "; to fix: ") + error.fix
        elif err["type"] == "extra_forbidden":
            parent = _model_at(model, loc[:-1])
            known = list(parent.model_fields)
            close = close_matches(loc[-1], known)
            homes = [name for name, sub in _submodels(parent).items()
                     if loc[-1] in sub.model_fields]
            if homes and not close:  # `traffic.rate_per_s`: a key of traffic.arrival
                moved = [".".join(p for p in (root, *loc[:-1], home, loc[-1]) if p)
                         for home in homes]
                text = f"is not a key here; it belongs under {' or '.join(moved)}"
            else:
                text = "is not a known key" + (
                    f"; did you mean {close[0]!r}?" if close else
                    "" if tuple(loc[:-1]) in listed else f"; valid keys: {', '.join(known)}")
            if not close and not homes:
                listed.add(tuple(loc[:-1]))
        elif err["type"] == "model_type" and not isinstance(got, dict):
            text = _not_a_mapping(_model_at(model, loc), loc[-1] if loc else "", got)
        elif err["type"] in ("tuple_type", "list_type"):
            # pydantic: 'Input should be a valid tuple'; a single value wants brackets
            item = got if isinstance(got, str) else shown_value(got)
            text = ("must be a list, not a mapping of keys" if isinstance(got, dict) else
                    f"must be a list{shown}" + (f"; to fix: write it in brackets, {loc[-1]}: "
                                                f"[{item}]" if loc else ""))
        elif err["type"] == "missing":
            text = "is required"
        elif err["type"] == "invalid_key":  # `1: 2`: YAML read the key as a number
            text = f"is not a known key (keys are names; YAML read this one as " \
                   f"{_yaml_reading(got) or type(got).__name__})"
        elif err["type"] == "string_type" and (reading := _yaml_reading(got)):  # a date
            echo = got.isoformat() if isinstance(got, date) else shown_value(got)
            text = f"must be text (got {echo}); to fix: quote it, as YAML reads it as {reading}"
        elif err["type"] in ("too_long", "too_short"):
            text = _length_phrase(err)
        elif err["type"] == "literal_error":
            named = [p for p in loc if not p.isdigit()]  # an item of a list: its list's field
            field = _model_at(model, named[:-1]).model_fields.get(named[-1]) if named else None
            choices = _literal_choices(getattr(field, "annotation", None))
            words = [str(c) for c in choices]
            listed_choices = ", ".join(repr(c) if isinstance(c, str) else str(c) for c in choices)
            if isinstance(got, str) and got in words:  # `zero: '3'` is text, not the number
                hint = f"; write {got} without quotes"
            else:
                close = close_matches(got if isinstance(got, str) else shown_value(got), words)
                hint = f"; did you mean {close[0]!r}?" if close else ""
            text = f"must be one of {listed_choices}{shown}{hint}"
        else:
            phrase = _PHRASES.get(err["type"])
            text = (phrase.format(**{k: _num(v) for k, v in err["ctx"].items()}) if phrase
                    else err["msg"].removeprefix("Value error, ")
                    .replace("Input should be", "must be", 1)) + shown
        clauses.append(f"{'.'.join(p for p in (root, *loc) if p) or 'the top level'} {text}")
    return "; ".join(clauses)


def _yaml_reading(value: Any) -> str | None:
    """What YAML read an unquoted scalar as when it is not text, else None."""
    if isinstance(value, bool):
        return "a true/false value"
    if isinstance(value, (int, float)):
        return "a number"
    return "a date" if isinstance(value, date) else None  # datetime is a date too


def _literal_choices(annotation: Any) -> list[Any]:
    """The values of a Literal annotation, looked for inside `Literal[...] | None` too;
    booleans as YAML writes them (text), numbers as numbers."""
    if get_origin(annotation) is Literal:
        return [str(c).lower() if isinstance(c, bool) else c for c in get_args(annotation)]
    return [c for arg in get_args(annotation) for c in _literal_choices(arg)]


def _num(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _submodels(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The fields of `model` that hold a spec model of their own, by name."""
    return {name: sub for name in model.model_fields
            if (sub := _model_at(model, [name])) is not model}


def _not_a_mapping(sub: type[BaseModel], field: str, got: Any) -> str:
    """A single value where a mapping of keys belongs (`arrival: poisson`): the keys it
    takes, and where a value that names one of its choices goes."""
    keys = list(sub.model_fields)
    one = "a list" if isinstance(got, (list, tuple)) else \
        f"a single value (got {shown_value(got)})"
    text = (f"must be a mapping of keys ({', '.join(keys[:4])}{', ...' * (len(keys) > 4)}), "
            f"not {one}")
    chosen = next((name for name, f in sub.model_fields.items()
                   if got in _literal_choices(f.annotation)), None)
    if chosen is not None:
        text += f"; to fix: write {field}: {{{chosen}: {got}, ...}}"
    return text


def _model_at(model: type[BaseModel], path: list[str]) -> type[BaseModel]:
    """The (sub)model at a path of field names; `X | None` fields are followed into X."""
    for part in path:
        field = model.model_fields.get(part)
        annotation = getattr(field, "annotation", None)
        options = get_args(annotation) if get_origin(annotation) is not None else (annotation,)
        sub = [t for t in options if isinstance(t, type) and issubclass(t, BaseModel)]
        if not sub:
            return model
        model = sub[0]
    return model
