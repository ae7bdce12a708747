"""Request generation for the serving simulator: when requests arrive and how long they are.

A `TrafficSpec` names an arrival process and two length distributions (lengths.py);
`generate` turns it into `Requests`, vectorised and deterministic for a seed. Arrivals:

- offline: every request at t = 0 (a batch job);
- poisson: exponential inter-arrival times at `rate_per_s`;
- gamma: gamma inter-arrival times, mean 1/rate, coefficient of variation `cv` (> 1 bursty);
- diurnal: a Poisson process whose rate follows a periodic 24-hour curve;
- trace: a CSV `arrival_s,input_len,output_len` replayed as is (optionally time-scaled).
"""

from __future__ import annotations

import csv
import io
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator

from infraplan.errors import InputError
from infraplan.files import read_user_file
from infraplan.reprs import compact_repr
from infraplan.serving.diurnal import DAY_S, HOUR_S, DiurnalCurve
from infraplan.serving.lengths import (MAX_TOKENS, FieldError, LengthSpec, SpecModel,
                                      draw_lengths)

# About 130 bytes a request from traffic to summary (three 8-byte arrays here, six in the
# simulator's RequestBook, the arrival times as a list, the result arrays): 50M requests
# measured 6.9 GB peak and 568 s (simulate serve, 2 replicas, on 2 cores, 2026-11-25).
# Larger runs are a mistake in the rate or the duration.
MAX_REQUESTS = 50_000_000
TRACE_COLUMNS = ("arrival_s", "input_len", "output_len")
# Simulated time at most: arrivals later than this come from a mistyped rate (1e-306/s) or
# time scale, and past about 1e308 s they overflow to inf.
MAX_HORIZON_S = 1e9
# what shortens the arrivals of each kind (offline arrives at once)
HORIZON_FIXES = {
    "poisson": "raise traffic.arrival.rate_per_s, or lower traffic.num_requests",
    "gamma": "raise traffic.arrival.rate_per_s, or lower traffic.num_requests",
    "diurnal": "raise the rates of traffic.arrival.curve, or lower traffic.num_requests",
    "trace": "lower traffic.arrival.time_scale (it multiplies the trace's times)"}


@dataclass(frozen=True)
class Requests:
    """Requests sorted by arrival: times in seconds, token counts per request."""

    arrival_s: np.ndarray  # float64, sorted non-decreasing, >= 0
    input_tokens: np.ndarray  # int64, >= 1
    output_tokens: np.ndarray  # int64, >= 1

    __repr__ = compact_repr

    def __post_init__(self):
        for name, dtype in (("arrival_s", np.float64), ("input_tokens", np.int64),
                            ("output_tokens", np.int64)):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=dtype))
        if not (self.arrival_s.shape == self.input_tokens.shape == self.output_tokens.shape
                and self.arrival_s.ndim == 1):
            raise InputError("Requests: arrival_s, input_tokens and output_tokens must be "
                             "1-D arrays of the same length")

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def duration_s(self) -> float:
        """Last arrival minus first (0 for offline traffic or a single request)."""
        return float(self.arrival_s[-1] - self.arrival_s[0]) if len(self) else 0.0


class ArrivalSpec(SpecModel):
    """When requests arrive."""

    origin: ClassVar[str] = "arrival"
    kind_fields: ClassVar = {"offline": ((), ()), "poisson": (("rate_per_s",), ()),
                             "gamma": (("rate_per_s", "cv"), ()),
                             "diurnal": (("curve",), ("start_hour",)),
                             "trace": (("path",), ("time_scale",))}

    kind: Literal["offline", "poisson", "gamma", "diurnal", "trace"]
    rate_per_s: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                     description="poisson, gamma: mean arrivals per second")
    # Far beyond these bounds the gamma's shape 1/cv^2 overflows a float; within them the
    # gaps range from equal to 1 % (0.01) to a few bursts (100: a trace says more).
    cv: float | None = Field(default=None, ge=0.01, le=100, allow_inf_nan=False,
                             description="gamma: coefficient of variation of inter-arrival "
                                         "times, 0.01-100 (> 1 bursty, 1 = Poisson, < 1 "
                                         "regular)")
    curve: tuple[tuple[float, float], ...] | None = Field(
        default=None, min_length=1, description="diurnal: [hour, rate_per_s] points, hours "
        "in [0, 24) increasing; linear in between and around midnight, repeats daily")
    start_hour: float = Field(default=0.0, ge=0, lt=24,
                              description="diurnal: hour of the day at t = 0")
    path: str | None = Field(default=None, description="trace: CSV with a header "
                             "arrival_s,input_len,output_len (relative to the scenario file)")
    time_scale: float = Field(default=1.0, gt=0, allow_inf_nan=False,
                              description="trace: multiplier on arrival times (0.5 = twice "
                                          "the rate)")

    def _check(self) -> None:
        if self.curve is None:
            return
        hours = [h for h, _ in self.curve]
        if not all(0 <= h < 24 for h in hours):
            raise FieldError("curve", f"hours must be in [0, 24) (got {hours})")
        if any(b <= a for a, b in itertools.pairwise(hours)):
            raise FieldError("curve", f"hours must increase strictly (got {hours})")
        rates = [r for _, r in self.curve]
        if not all(math.isfinite(r) and r >= 0 for r in rates) or max(rates) <= 0:
            raise FieldError("curve", f"rates must be finite, >= 0 and not all 0 (got {rates})")


class TrafficSpec(SpecModel):
    """The arrivals, the prompt and completion lengths, and how many requests (or how long)."""

    origin: ClassVar[str] = "traffic"
    arrival: ArrivalSpec
    input: LengthSpec | None = Field(default=None, description="prompt tokens per request "
                                     "(with a trace: overrides the trace's lengths)")
    output: LengthSpec | None = Field(default=None, description="completion tokens per "
                                      "request (with a trace: overrides the trace's lengths)")
    num_requests: int | None = Field(default=None, ge=1, le=MAX_REQUESTS, description="requests"
                                     " to generate (trace: keep the first)")
    duration_s: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="arriv"
                                     "als in [0, duration_s] (trace: drop later ones)")

    @model_validator(mode="before")
    @classmethod
    def _lengths_of_a_trace(cls, data: Any) -> Any:
        """`input: {kind: trace}`: the lengths of a trace are its columns, not a kind."""
        if not isinstance(data, dict):
            return data
        named = [n for n in ("input", "output")
                 if isinstance(data.get(n), dict) and data[n].get("kind") == "trace"]
        if named:
            arrival = data.get("arrival")
            replayed = isinstance(arrival, dict) and arrival.get("kind") == "trace"
            fix = (f"leave {' and '.join(named)} out: a trace arrival replays its lengths "
                   "(give one only to override them)" if replayed else
                   "replay a trace with arrival: {kind: trace, path: requests.csv} and no "
                   f"{' or '.join(named)}, or give {named[0]} a kind of fixed, uniform or "
                   "lognormal")
            raise FieldError(f"{named[0]}.kind", "'trace' is not a length distribution: a "
                             "trace's lengths are its input_len and output_len columns",
                             fix=fix)
        return data

    def _check(self) -> None:
        kind = self.arrival.kind
        if kind == "trace":
            return
        for name in ("input", "output"):
            if getattr(self, name) is None:
                raise FieldError(name, f"is required for arrival kind {kind!r} (only a trace "
                                 "gives lengths)", fix=f"add {name}: {{kind: lognormal, mean: "
                                 "..., sigma: ...}")
        if kind == "offline":
            if self.num_requests is None:
                raise FieldError("num_requests", "is required for arrival kind 'offline'",
                                 fix="add num_requests: 1000 (how many requests arrive at "
                                     "t = 0)")
            if self.duration_s is not None:
                raise FieldError("duration_s", "does not apply to arrival kind 'offline' (all "
                                 "requests arrive at t = 0)", fix="give num_requests only")
        elif (self.num_requests is None) == (self.duration_s is None):
            both = self.num_requests is not None
            raise FieldError("num_requests", f"or duration_s: give exactly one for arrival "
                             f"kind {kind!r} ({'both are' if both else 'neither is'} given)",
                             fix="keep num_requests (how many requests) or duration_s "
                                 "(seconds of arrivals), not both" if both else
                                 "add num_requests: 1000 (how many requests) or duration_s: "
                                 "600 (seconds of arrivals)")


def generate(spec: TrafficSpec, *, seed: int = 0, base_dir: Path | None = None,
             share_of: int = 1) -> Requests:
    """The requests `spec` describes; the same seed gives the same arrays.

    Arrivals, input lengths and output lengths use independent child streams of
    `SeedSequence(seed)`, so changing one distribution leaves the others' draws unchanged.
    `base_dir` resolves a relative trace path (the scenario file's folder).

    `share_of` R > 1: one replica's share of the stream when a router sends each request to
    one of R replicas at random; `num_requests` and `duration_s` then apply to that share.
    Thinning a Poisson stream (steady or diurnal) with probability 1 / R leaves a Poisson
    stream at rate / R; a gamma stream thins to another renewal stream (`_arrivals`); a
    trace is stretched to rate / R, its own bursts at one replica's scale (thinning it would
    leave 1 / R of its requests).
    """
    if not (isinstance(seed, (int, np.integer)) and seed >= 0):
        raise InputError(f"seed must be an integer >= 0 (got {seed!r})")
    if share_of > 1 and spec.arrival.kind != "gamma":
        rate = mean_rate_per_s(spec, base_dir=base_dir)
        spec = spec if math.isinf(rate) else with_rate(spec, rate / share_of, base_dir=base_dir)
        share_of = 1
    arrival_rng, input_rng, output_rng = (np.random.Generator(np.random.PCG64(child))
                                          for child in np.random.SeedSequence(seed).spawn(3))
    if spec.arrival.kind == "trace":
        trace = _trace(spec, base_dir)
        arrival_s, n = trace.arrival_s, len(trace)
        input_tokens, output_tokens = trace.input_tokens, trace.output_tokens
    else:
        arrival_s = _arrivals(spec, arrival_rng, share_of)
        n = len(arrival_s)
    if n and not arrival_s[-1] <= MAX_HORIZON_S:  # sorted: the last is the largest (or NaN)
        raise InputError(f"traffic.arrival: the requests would arrive over "
                         f"{arrival_s[-1]:.3g} s, past {MAX_HORIZON_S:.0e} s (about 30 years)",
                         fix=HORIZON_FIXES[spec.arrival.kind])
    if spec.input is not None:
        input_tokens = draw_lengths(spec.input, input_rng, n)
    if spec.output is not None:
        output_tokens = draw_lengths(spec.output, output_rng, n)
    return Requests(arrival_s, input_tokens, output_tokens)


def mean_rate_per_s(spec: TrafficSpec, *, base_dir: Path | None = None) -> float:
    """The long-run mean arrival rate: offline inf; poisson and gamma `rate_per_s` (a
    renewal process runs at 1 / mean gap); diurnal the time-average of the curve; trace
    requests / (last - first arrival), inf if they all arrive at once."""
    arrival = spec.arrival
    if arrival.kind == "offline":
        return math.inf
    if arrival.kind in ("poisson", "gamma"):
        return arrival.rate_per_s
    if arrival.kind == "diurnal":
        return DiurnalCurve(arrival).per_day / DAY_S
    trace = _trace(spec, base_dir)
    return len(trace) / trace.duration_s if trace.duration_s > 0 else math.inf


def rates_at(arrival: ArrivalSpec, t_s: np.ndarray) -> np.ndarray:
    """A diurnal curve's arrival rate at times of day `t_s` (seconds, wrapping at 24 h)."""
    curve = DiurnalCurve(arrival)
    return np.interp(np.mod(t_s, DAY_S), curve.t_s, curve.rate)


def with_rate(spec: TrafficSpec, rate_per_s: float, *,
              base_dir: Path | None = None) -> TrafficSpec:
    """The same traffic at a new mean rate: poisson/gamma set the rate (gamma keeps its cv);
    diurnal scales the curve (same shape); a trace scales time (its `time_scale`, and
    `duration_s` with it, so the same requests are kept); offline is returned unchanged.
    Otherwise `num_requests` or `duration_s` stay as they are."""
    if not (math.isfinite(rate_per_s) and rate_per_s > 0):
        raise InputError(f"rate_per_s must be finite and > 0 (got {rate_per_s!r})")
    arrival = spec.arrival
    old_rate = mean_rate_per_s(spec, base_dir=base_dir)
    if math.isinf(old_rate):
        return spec
    raw = spec.model_dump(exclude_unset=True)
    if arrival.kind in ("poisson", "gamma"):
        raw["arrival"]["rate_per_s"] = rate_per_s
    elif arrival.kind == "diurnal":
        factor = rate_per_s / old_rate
        raw["arrival"]["curve"] = [(hour, rate * factor) for hour, rate in arrival.curve]
    else:
        stretch = old_rate / rate_per_s
        raw["arrival"]["time_scale"] = arrival.time_scale * stretch
        if spec.duration_s is not None:
            raw["duration_s"] = spec.duration_s * stretch
    return TrafficSpec.model_validate(raw)


def _arrivals(spec: TrafficSpec, rng: np.random.Generator, share_of: int = 1) -> np.ndarray:
    arrival, n, duration_s = spec.arrival, spec.num_requests, spec.duration_s
    if arrival.kind == "offline":
        return np.zeros(n)
    if arrival.kind == "poisson":
        # A homogeneous Poisson process has i.i.d. exponential gaps of mean 1 / rate.
        scale = 1.0 / arrival.rate_per_s
        return _renewal(lambda k: rng.exponential(scale, k), n, duration_s, arrival.rate_per_s)
    if arrival.kind == "gamma":
        # Gamma(shape k, scale theta) has mean k*theta and CV 1/sqrt(k); k = 1/cv^2 and
        # theta = cv^2/rate give mean gap 1/rate and CV cv (k = 1 is the exponential).
        shape, scale = arrival.cv**-2, arrival.cv**2 / arrival.rate_per_s
        if share_of == 1:
            return _renewal(lambda k: rng.gamma(shape, scale, k), n, duration_s,
                            arrival.rate_per_s)
        # One of R random shares: a gap spans N ~ Geometric(1 / R) of the stream's gaps,
        # and gamma shapes add at a common scale, so it is Gamma(N k, theta): mean R / rate,
        # CV^2 = cv^2 / R + 1 - 1 / R (a geometric compound sum), bursts smoothed as R grows.
        return _renewal(lambda k: rng.gamma(shape * rng.geometric(1.0 / share_of, k), scale),
                        n, duration_s, arrival.rate_per_s / share_of)
    # Time-rescaling theorem (e.g. Brown et al., Neural Computation 14, 2002): if y_i are
    # the events of a unit-rate Poisson process, t_i = Lambda^-1(y_i) are the events of a
    # Poisson process with rate lambda(t), Lambda being its cumulative intensity.
    curve = DiurnalCurve(arrival)
    start_s = arrival.start_hour * HOUR_S
    offset = curve.cumulative(np.array([start_s]))[0]
    horizon = None if duration_s is None else \
        curve.cumulative(np.array([start_s + duration_s]))[0] - offset
    unit = _renewal(rng.standard_exponential, n, horizon, 1.0)
    # clip and accumulate undo float rounding (an ulp out of [0, duration] or out of order)
    arrival_s = np.clip(curve.invert(unit + offset) - start_s, 0.0, duration_s or math.inf)
    return np.maximum.accumulate(arrival_s) if len(arrival_s) else arrival_s


def _renewal(gaps: Callable[[int], np.ndarray], n: int | None, horizon: float | None,
             rate: float) -> np.ndarray:
    """Event times as cumulative sums of gaps: exactly n events, or every event <= horizon
    (drawn in chunks a few standard deviations above the expected count)."""
    if n is not None:
        return np.cumsum(gaps(n))
    expected = rate * horizon
    chunk = int(expected + 6 * math.sqrt(expected)) + 16
    parts, end = [], 0.0
    while end <= horizon:
        if expected > MAX_REQUESTS or len(parts) * chunk > 2 * MAX_REQUESTS:
            raise InputError(f"traffic would have more than {MAX_REQUESTS:,} requests (about "
                             f"{expected:.3g} expected)", fix="lower duration_s or the rate")
        parts.append(end + np.cumsum(gaps(chunk)))
        end = parts[-1][-1]
    times = np.concatenate(parts)
    return times[: np.searchsorted(times, horizon, side="right")]


def _trace(spec: TrafficSpec, base_dir: Path | None) -> Requests:
    """The trace of a trace spec, time-scaled then truncated to duration_s / num_requests."""
    trace = read_trace(spec.arrival.path, base_dir=base_dir)
    arrival_s = trace.arrival_s * spec.arrival.time_scale
    keep = len(trace)
    if spec.duration_s is not None:
        keep = int(np.searchsorted(arrival_s, spec.duration_s, side="right"))
    if spec.num_requests is not None:
        keep = min(keep, spec.num_requests)
    if keep == 0:
        raise InputError(f"traffic.duration_s {spec.duration_s:g} keeps no request of the trace "
                         f"(the first arrives at {arrival_s[0]:g} s)", fix="raise duration_s")
    return Requests(arrival_s[:keep], trace.input_tokens[:keep], trace.output_tokens[:keep])


def read_trace(path: str | Path, *, base_dir: Path | None = None) -> Requests:
    """Requests from a CSV with a header naming `arrival_s,input_len,output_len` (other
    columns are ignored; blank lines skipped). Rows out of arrival order are sorted by
    arrival, stably (rows with equal times keep their file order). A relative path is
    resolved against `base_dir` when given. Times are kept as given, not shifted to 0."""
    path = Path(path)
    if base_dir is not None and not path.is_absolute():
        path = Path(base_dir) / path
    fix = "give a CSV whose header has arrival_s,input_len,output_len, one request a row"
    reader = csv.reader(io.StringIO(read_user_file(path, "trace file", fix=fix)))
    header = [name.strip(" \t\ufeff") for name in next(reader, [])]  # spreadsheets add BOMs
    missing = [c for c in TRACE_COLUMNS if c not in header]
    if missing:
        raise InputError(f"{path.name}: the header lacks {', '.join(missing)} (found: "
                         f"{', '.join(header) or 'an empty file'})", fix=fix)
    twice = [c for c in TRACE_COLUMNS if header.count(c) > 1]
    if twice:
        raise InputError(f"{path.name}: the header names {', '.join(twice)} twice", fix=fix)
    columns = [(header.index(c), c) for c in TRACE_COLUMNS]
    rows = [[_cell(row, j, name, reader.line_num, path.name) for j, name in columns]
            for row in reader if any(cell.strip() for cell in row)]
    if not rows:
        raise InputError(f"{path.name}: the trace has no requests", fix=fix)
    table = np.array(rows)
    order = np.argsort(table[:, 0], kind="stable")
    return Requests(table[order, 0], table[order, 1].astype(np.int64),
                    table[order, 2].astype(np.int64))


def _cell(row: list[str], j: int, column: str, line: int, file: str) -> float:
    text = row[j].strip() if j < len(row) else ""
    where = f"{file}: line {line}, column {column}"
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{where}: {text!r} is not a number") from None
    if column == "arrival_s" and not (math.isfinite(value) and value >= 0):
        raise InputError(f"{where}: an arrival time must be finite and >= 0 (got {text})")
    if column != "arrival_s" and not (value.is_integer() and 1 <= value <= MAX_TOKENS):
        raise InputError(f"{where}: a token count must be a whole number from 1 to "
                         f"{MAX_TOKENS:,} (got {text})")
    return value
