"""Token-length distributions for generated requests, and the spec base the traffic specs share.

`SpecModel` is a frozen pydantic model that refuses unknown keys and turns every validation
problem into one `InputError` naming the dotted path from its origin:
`traffic.arrival.rate_per_s must be > 0 (got -1)`, `traffic.input.vlaue is not a known
key; did you mean 'value'?`. It does so for `Model.model_validate(dict)`; `Model(...)` and
a spec nested in another pydantic model raise pydantic's ValidationError as usual (a custom
`__init__` would be called for nested specs too and garble the outer model's message).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal, get_args, get_origin

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from infraplan.errors import InputError, close_matches
from infraplan.spec_checks import StrictNumbers


class FieldError(InputError):
    """Raised by a model validator about one field: the field extends the error's path."""

    def __init__(self, field: str, detail: str, *, fix: str | None = None):
        self.field, self.detail = field, detail
        super().__init__(f"{field} {detail}", fix=fix)


class SpecModel(StrictNumbers):
    """Frozen, no unknown keys, `model_validate` errors as one InputError (see the top)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    origin: ClassVar[str] = "spec"
    # kind -> (fields the kind requires, fields it also accepts); fields in no kind's
    # entries (min, max, ...) apply to every kind
    kind_fields: ClassVar[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {}

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any):  # type: ignore[override]
        try:
            return super().model_validate(obj, **kwargs)
        except ValidationError as exc:
            raise InputError(describe_errors(exc, cls, cls.origin)) from None

    @model_validator(mode="after")
    def _fields_of_kind(self):
        if not self.kind_fields:
            self._check()
            return self
        kind = self.kind  # type: ignore[attr-defined]
        required, optional = self.kind_fields[kind]
        for name in required:
            if getattr(self, name) is None:
                raise FieldError(name, f"is required for kind {kind!r}")
        for other, (req, opt) in self.kind_fields.items():
            for name in (*req, *opt):
                if name in self.model_fields_set and name not in (*required, *optional):
                    uses = ", ".join((*required, *optional)) or "none of the kind-specific fields"
                    raise FieldError(name, f"does not apply to kind {kind!r} (it uses: {uses})",
                                     fix=f"remove {name} or set kind: {other}")
        self._check()
        return self

    def _check(self) -> None:
        """Cross-field checks of a subclass; they run after the kind's fields are known."""


_PHRASES = {"greater_than": "must be > {gt}", "greater_than_equal": "must be >= {ge}",
            "less_than": "must be < {lt}", "less_than_equal": "must be <= {le}"}


def describe_errors(exc: ValidationError, model: type[BaseModel], origin: str) -> str:
    """One clause per problem, '; '-joined, each starting with the dotted field path."""
    clauses, listed = [], set()  # the valid keys are listed once per mapping
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        error, got = err.get("ctx", {}).get("error"), err.get("input")
        shown = "" if isinstance(got, (dict, list, tuple)) else f" (got {got!r})"
        if isinstance(error, FieldError):
            loc.append(error.field)
            text = error.detail if error.fix is None else f"{error.detail}; to fix: {error.fix}"
        elif err["type"] == "extra_forbidden":
            known = list(_model_at(model, loc[:-1]).model_fields)
            close = close_matches(loc[-1], known)
            text = "is not a known key" + (f"; did you mean {close[0]!r}?" if close else
                                           "" if tuple(loc[:-1]) in listed else
                                           f"; valid keys: {', '.join(known)}")
            if not close:
                listed.add(tuple(loc[:-1]))
        elif err["type"] == "missing":
            text = "is required"
        elif err["type"] == "literal_error":
            field = _model_at(model, loc[:-1]).model_fields.get(loc[-1])
            choices = _literal_choices(getattr(field, "annotation", None))
            close = close_matches(str(got), choices)
            text = f"must be one of {', '.join(map(repr, choices))}{shown}" + (
                f"; did you mean {close[0]!r}?" if close else "")
        else:
            phrase = _PHRASES.get(err["type"])
            text = (phrase.format(**{k: _num(v) for k, v in err["ctx"].items()}) if phrase
                    else err["msg"].removeprefix("Value error, ")
                    .replace("Input should be", "must be", 1)) + shown
        clauses.append(f"{'.'.join([origin, *loc])} {text}")
    return "; ".join(clauses)


def _literal_choices(annotation: Any) -> list[str]:
    """The values of a Literal annotation, looked for inside `Literal[...] | None` too."""
    if get_origin(annotation) is Literal:
        return [str(c) for c in get_args(annotation)]
    return [c for arg in get_args(annotation) for c in _literal_choices(arg)]


def _num(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


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


# Tokens in one request at most: a thousand times the longest context of any model (a
# million tokens), far below where int64 arithmetic or float64 rounding would go wrong.
MAX_TOKENS = 10**9


class LengthSpec(SpecModel):
    """A distribution of token counts per request (prompt or completion)."""

    origin: ClassVar[str] = "length"
    kind_fields: ClassVar = {"fixed": (("value",), ()), "uniform": (("low", "high"), ()),
                             "lognormal": (("mean",), ("sigma",))}

    kind: Literal["fixed", "uniform", "lognormal"]
    value: int | None = Field(default=None, ge=1, le=MAX_TOKENS,
                              description="fixed: every request's length")
    low: int | None = Field(default=None, ge=1, le=MAX_TOKENS,
                            description="uniform: smallest length")
    high: int | None = Field(default=None, ge=1, le=MAX_TOKENS,
                             description="uniform: largest length (inclusive)")
    mean: float | None = Field(default=None, gt=0, le=MAX_TOKENS, allow_inf_nan=False,
                               description="lognormal: mean length (of the distribution, "
                                           "not of the underlying normal)")
    sigma: float = Field(default=1.0, gt=0, allow_inf_nan=False, description="lognormal: standard "
                         "deviation of the underlying normal (0.5 narrow, 1.0 wide tail)")
    min: int = Field(default=1, ge=1, le=MAX_TOKENS,
                     description="lengths below are raised to this")
    max: int | None = Field(default=None, ge=1, le=MAX_TOKENS, description="lengths above are "
                            "cut to this (e.g. the context length)")

    def _check(self) -> None:
        if self.kind == "uniform" and self.high < self.low:
            raise FieldError("high", f"must be >= low ({self.low}) (got {self.high})")
        if self.max is not None and self.max < self.min:
            raise FieldError("max", f"must be >= min ({self.min}) (got {self.max})")


def draw_lengths(spec: LengthSpec, rng: np.random.Generator, n: int) -> np.ndarray:
    """n lengths (int64): drawn, rounded half up, clipped to [min, max]."""
    if spec.kind == "fixed":
        x = np.full(n, float(spec.value))
    elif spec.kind == "uniform":
        x = rng.integers(spec.low, spec.high, size=n, endpoint=True).astype(np.float64)
    else:
        # If ln X ~ Normal(mu, sigma) then E[X] = exp(mu + sigma^2 / 2), so this mu makes the
        # mean of the lengths `mean` (their median is exp(mu), below the mean).
        mu = math.log(spec.mean) - spec.sigma**2 / 2
        x = rng.lognormal(mu, spec.sigma, size=n)
    high = MAX_TOKENS if spec.max is None else spec.max  # caps an unclipped lognormal tail
    # floor(x + 0.5) rounds half up (np.round rounds half to even)
    return np.clip(np.floor(x + 0.5), spec.min, high).astype(np.int64)
