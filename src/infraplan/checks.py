"""One check for the plain numbers library functions take (reliability, TCO): a finite
real (or an integer) within bounds, else an InputError that names the argument, the bad
value and the range.

NaN fails every comparison, so `x <= 0` alone lets it through; infinity passes `x > 0`.
Both are refused here, once, instead of in a wall of ifs per function.
"""

from __future__ import annotations

import math
import numbers

from infraplan.errors import InputError


def check_number(name: str, value, *, gt: float | None = None, ge: float | None = None,
                 lt: float | None = None, le: float | None = None, integer: bool = False,
                 fix: str | None = None) -> float:
    """`value` if it is a finite number (an integer when `integer`) with value > gt, >= ge,
    < lt and <= le (each bound optional); else InputError naming `name`."""
    kind = numbers.Integral if integer else numbers.Real
    ok = isinstance(value, kind) and not isinstance(value, bool) and math.isfinite(value) \
        and (gt is None or value > gt) and (ge is None or value >= ge) \
        and (lt is None or value < lt) and (le is None or value <= le)
    if not ok:
        bounds = [f"{op} {bound:,g}" for op, bound in ((">", gt), (">=", ge), ("<", lt),
                                                       ("<=", le)) if bound is not None]
        what = "an integer" if integer else "a finite number"
        raise InputError(f"{name} must be {what}{' ' if bounds else ''}{' and '.join(bounds)}, "
                         f"got {value!r}", fix=fix)
    return value
