"""A diurnal arrival rate: a periodic piecewise-linear curve over a day, its cumulative
intensity and the inverse of it, vectorised (traffic.py draws diurnal arrivals by
time-rescaling a unit-rate Poisson process through `invert`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from infraplan.serving.traffic import ArrivalSpec

DAY_S = 86_400.0
HOUR_S = 3_600.0


class DiurnalCurve:
    """A periodic piecewise-linear rate over a day, its cumulative intensity and inverse.

    Knots at 0 h, each curve hour and 24 h; the rates at 0 h and 24 h interpolate between
    the last point and the first one of the next day, so the curve wraps around midnight.
    """

    def __init__(self, arrival: ArrivalSpec):
        hours = np.array([h for h, _ in arrival.curve])
        rates = np.array([r for _, r in arrival.curve])
        wrapped_h = np.concatenate([[hours[-1] - 24], hours, [hours[0] + 24]])
        wrapped_r = np.concatenate([[rates[-1]], rates, [rates[0]]])
        knots_h = np.unique(np.concatenate([[0.0], hours, [24.0]]))
        self.t_s = knots_h * HOUR_S
        self.rate = np.interp(knots_h, wrapped_h, wrapped_r)
        # segments under a microsecond (hours 1e-12 apart) count as flat: no inf slopes
        self.dt_s = np.diff(self.t_s)
        self.slope = np.divide(np.diff(self.rate), self.dt_s, out=np.zeros_like(self.dt_s),
                               where=self.dt_s > 1e-6)
        # the trapezoid rule is exact on a linear segment
        area = self.dt_s * (self.rate[:-1] + self.rate[1:]) / 2
        self.cum = np.concatenate([[0.0], np.cumsum(area)])
        self.per_day = float(self.cum[-1])

    def cumulative(self, t_s: np.ndarray) -> np.ndarray:
        """Lambda(t) = integral of the rate from 0 to t."""
        days = np.floor(t_s / DAY_S)
        u = t_s - days * DAY_S
        i = np.clip(np.searchsorted(self.t_s, u, side="right") - 1, 0, len(self.t_s) - 2)
        du = u - self.t_s[i]
        return days * self.per_day + self.cum[i] + self.rate[i] * du + self.slope[i] * du**2 / 2

    def invert(self, y: np.ndarray) -> np.ndarray:
        """t with Lambda(t) = y, vectorised: whole days, then the segment, then solve
        r0*tau + slope*tau^2/2 = d for tau."""
        days = np.floor(y / self.per_day)
        rem = np.clip(y - days * self.per_day, 0.0, self.per_day)
        # side="right" skips segments of zero rate (equal cumulative knots)
        i = np.clip(np.searchsorted(self.cum, rem, side="right") - 1, 0, len(self.cum) - 2)
        d, r0, slope = rem - self.cum[i], self.rate[i], self.slope[i]
        # tau = (-r0 + sqrt(r0^2 + 2 slope d)) / slope, rewritten as 2d / (r0 + sqrt(...)):
        # no cancellation when slope -> 0 (it becomes d / r0), and defined when slope = 0
        root = r0 + np.sqrt(np.maximum(r0**2 + 2 * slope * d, 0.0))
        tau = np.divide(2 * d, root, out=np.zeros_like(root), where=root > 0)
        return days * DAY_S + self.t_s[i] + np.minimum(tau, self.dt_s[i])
