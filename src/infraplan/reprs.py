"""Short reprs for results that hold arrays.

A simulation keeps one number per request (a million of them in the benchmark) and a step
model keeps a table per batch size; the default dataclass repr printed all of them, so
`ip.plan_serving(scenario)` typed at a REPL wrote megabytes. These reprs keep every field
but show an array as its length, type and range.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

_SHOWN_ITEMS = 8  # lists up to this long print in full
_SHOWN_CHARS = 60  # a dict's text longer than twice this prints its start and its length


def short(value: object, *, in_dict: bool = False) -> str:
    """repr(value), except arrays and long numeric lists become a one-line summary, and in a
    dict (a result's JSON) a long text (formula, source, note) is cut to its start and a
    float printed to 6 significant digits."""
    if isinstance(value, np.ndarray):
        return _summary(value, f"array of {_shape(value)} {value.dtype}")
    if isinstance(value, (list, tuple)) and len(value) > _SHOWN_ITEMS \
            and all(isinstance(v, (int, float)) for v in value):
        return _summary(np.asarray(value, dtype=float),
                        f"{type(value).__name__} of {len(value)} numbers")
    if in_dict and isinstance(value, str) and len(value) > 2 * _SHOWN_CHARS:
        return f"{value[:_SHOWN_CHARS] + '...'!r} ({len(value):,} characters)"
    if in_dict and isinstance(value, float):
        return f"{value:.6g}"  # a figure of the JSON to 6 significant digits, as arrays' 4
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {short(v, in_dict=True)}"
                               for k, v in value.items()) + "}"
    if in_dict and isinstance(value, list):
        return "[" + ", ".join(short(v, in_dict=True) for v in value) + "]"
    return repr(value)


def _shape(values: np.ndarray) -> str:
    return " x ".join(str(n) for n in values.shape) or "0-d"


def _summary(values: np.ndarray, what: str) -> str:
    """'<array of 1000 float64, 0.5 to 3.2>': NaNs (never started, dropped) left out."""
    finite = values[np.isfinite(values)] if values.dtype.kind in "fc" else values.ravel()
    if finite.size == 0 or values.dtype.kind not in "iuf":
        return f"<{what}>"
    return f"<{what}, {finite.min():.4g} to {finite.max():.4g}>"


def compact_repr(self) -> str:
    """A dataclass's repr with `short` values: assign as `__repr__ = compact_repr`."""
    parts = (f"{f.name}={short(getattr(self, f.name))}" for f in fields(self) if f.repr)
    return f"{type(self).__name__}({', '.join(parts)})"
