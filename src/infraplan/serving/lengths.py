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
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import ConfigDict, Field, ValidationError, model_validator

from infraplan.errors import InputError
from infraplan.spec_checks import FieldError, StrictNumbers, describe_errors, given


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
            raise InputError(describe_errors(exc, cls, root=cls.origin)) from None

    @model_validator(mode="after")
    def _fields_of_kind(self):
        if not self.kind_fields:
            self._check()
            return self
        kind = self.kind  # type: ignore[attr-defined]
        required, optional = self.kind_fields[kind]
        missing = [name for name in required if getattr(self, name) is None]
        if missing:
            raise FieldError(missing[0], f"is required for kind {kind!r}",
                             fix=self._missing_fix(kind, missing))
        for other, (req, opt) in self.kind_fields.items():
            for name in (*req, *opt):
                if given(self, name) and name not in (*required, *optional):
                    uses = ", ".join((*required, *optional)) or "none of the kind-specific fields"
                    raise FieldError(name, f"does not apply to kind {kind!r} (it uses: {uses})",
                                     fix=f"remove {name} or set kind: {other}")
        self._check()
        return self

    def _check(self) -> None:
        """Cross-field checks of a subclass; they run after the kind's fields are known."""

    def _missing_fix(self, kind: str, missing: list[str]) -> str:
        pronoun = "them" if len(missing) > 1 else "it"
        return f"set {' and '.join(missing)} (kind {kind!r} needs {pronoun})"


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

    def _missing_fix(self, kind: str, missing: list[str]) -> str:
        fix = super()._missing_fix(kind, missing)
        if kind == "uniform" and {"min", "max"} & self.model_fields_set:
            # min/max are valid keys of every kind, so a uniform range written with them
            # passes the unknown-key check and only surfaces here
            fix += "; min and max only clip the drawn lengths, the uniform range is low..high"
        return fix

    def _check(self) -> None:
        if self.kind == "uniform" and self.high < self.low:
            raise FieldError("high", f"must be >= low ({self.low}) (got {self.high})")
        if self.max is not None and self.max < self.min:
            raise FieldError("max", f"must be >= min ({self.min}) (got {self.max})")
        # min and max clip the tails; lengths clipped to min..max average within it, so a
        # stated mean outside it cannot be what the simulation draws (mean 1000, max 10)
        centre = self.mean_before_clipping()
        high = MAX_TOKENS if self.max is None else self.max
        if not self.min <= centre <= high:
            below = centre < self.min
            bound, value = ("min", self.min) if below else ("max", high)
            name = {"fixed": "value", "lognormal": "mean"}.get(self.kind,
                                                                "low" if below else "high")
            stated = f"{centre:g}" if self.kind != "uniform" else \
                f"{self.low:,}..{self.high:,} (mean {centre:g})"
            raise FieldError(name, f"{stated} is {'below' if below else 'above'} {bound} "
                                   f"({value:,}): lengths clipped to min..max cannot average "
                                   f"{centre:g}",
                             fix=f"{'lower' if below else 'raise'} {bound}, or set "
                                 f"{'low..high' if self.kind == 'uniform' else name} "
                                 "within min..max")

    def mean_before_clipping(self) -> float:
        if self.kind == "fixed":
            return float(self.value)
        if self.kind == "uniform":
            return (self.low + self.high) / 2
        return self.mean


def expected_length(spec: LengthSpec) -> float:
    """The mean of the lengths `draw_lengths` draws from `spec`: clipped to [min, max].

    fixed and uniform are exact (integers, clipped). A lognormal X clipped to [a, b] has
    E = a P(X < a) + E[X; a <= X <= b] + b P(X > b), with P(X < c) = Phi((ln c - mu) / s)
    and E[X; X <= c] = mean Phi((ln c - mu - s^2) / s) (the partial expectation of a
    lognormal). The draws are also rounded to whole tokens: E[clip(round X)] is a + the sum
    over k in [a, b) of P(X >= k + 1/2), the midpoint rule of the integral that E[clip X]
    is, so the two differ by far less than a token for any length a request has."""
    low, high = spec.min, MAX_TOKENS if spec.max is None else spec.max
    if spec.kind == "fixed":
        return float(min(max(spec.value, low), high))
    if spec.kind == "uniform":
        n = spec.high - spec.low + 1
        below = max(0, min(spec.high, low - 1) - spec.low + 1)  # raised to min
        above = max(0, spec.high - max(spec.low, high + 1) + 1)  # cut to max
        a, b = max(spec.low, low), min(spec.high, high)
        inside = (a + b) * (b - a + 1) / 2 if a <= b else 0.0
        return (below * low + above * high + inside) / n
    s = spec.sigma
    mu = math.log(spec.mean) - s**2 / 2

    def phi(z: float) -> float:  # the standard normal CDF
        return 0.5 * math.erfc(-z / math.sqrt(2))

    def z(c: float) -> float:
        return (math.log(c) - mu) / s

    partial = spec.mean * (phi(z(high) - s) - phi(z(low) - s))
    return low * phi(z(low)) + partial + high * (1 - phi(z(high)))


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
