"""Request generation: the statistics of each arrival process and length distribution,
determinism per seed, trace replay, rate scaling and the messages bad input gets."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infraplan.errors import InputError
from infraplan.serving.lengths import draw_lengths
from infraplan.serving.traffic import (
    ArrivalSpec,
    LengthSpec,
    Requests,
    TrafficSpec,
    generate,
    mean_rate_per_s,
    read_trace,
    with_rate,
)

FIXED = {"kind": "fixed", "value": 7}


def spec(arrival: dict, **rest) -> TrafficSpec:
    return TrafficSpec.model_validate({"arrival": arrival, "input": FIXED, "output": FIXED,
                                       **rest})


def gaps(requests: Requests) -> np.ndarray:
    return np.diff(requests.arrival_s, prepend=0.0)


def cv(x: np.ndarray) -> float:
    return float(x.std() / x.mean())


# ---- arrival processes -------------------------------------------------------------------


def test_poisson_gaps_are_exponential():
    g = gaps(generate(spec({"kind": "poisson", "rate_per_s": 10}, num_requests=200_000)))
    assert len(g) == 200_000
    assert g.mean() == pytest.approx(0.1, rel=0.01)
    assert cv(g) == pytest.approx(1.0, rel=0.02)


def test_gamma_gaps_have_the_requested_cv_and_rate():
    r = generate(spec({"kind": "gamma", "rate_per_s": 10, "cv": 3}, num_requests=200_000))
    g = gaps(r)
    assert cv(g) == pytest.approx(3.0, rel=0.05)
    assert 1 / g.mean() == pytest.approx(10.0, rel=0.02)


@pytest.mark.parametrize("cv_in, replicas", [(4.0, 8), (0.25, 4)])
def test_a_random_share_of_a_gamma_stream_is_the_thinned_stream(cv_in, replicas):
    # one replica of R under a random router: each request kept with probability 1/R.
    # Its gaps have mean R / rate and CV^2 = cv^2 / R + 1 - 1/R (geometric compound sum)
    rate, n = 30.0, 200_000
    share = gaps(generate(spec({"kind": "gamma", "rate_per_s": rate, "cv": cv_in},
                               num_requests=n), seed=4, share_of=replicas))
    assert share.mean() == pytest.approx(replicas / rate, rel=0.01)
    assert cv(share) ** 2 == pytest.approx(cv_in**2 / replicas + 1 - 1 / replicas, rel=0.03)
    # the same statistics as thinning the whole stream explicitly
    whole = generate(spec({"kind": "gamma", "rate_per_s": rate, "cv": cv_in},
                          num_requests=n * replicas), seed=5).arrival_s
    kept = whole[np.random.default_rng(6).random(len(whole)) < 1 / replicas]
    assert cv(np.diff(kept)) == pytest.approx(cv(share), rel=0.05)


def test_a_random_share_of_a_poisson_stream_is_poisson_at_rate_over_r():
    stream = spec({"kind": "poisson", "rate_per_s": 30.0}, num_requests=500)
    share = generate(stream, seed=2, share_of=6)
    assert np.array_equal(share.arrival_s, generate(with_rate(stream, 5.0), seed=2).arrival_s)


def test_poisson_with_a_duration_stays_inside_it():
    r = generate(spec({"kind": "poisson", "rate_per_s": 50}, duration_s=2000.0), seed=4)
    assert r.arrival_s.max() <= 2000.0
    # Poisson count: mean 100,000, standard deviation 316
    assert abs(len(r) - 100_000) < 5 * 316
    assert r.arrival_s[-1] > 1999.0  # generated up to the end, not one chunk short


def test_too_many_requests_is_refused_before_drawing_them():
    s = spec({"kind": "poisson", "rate_per_s": 1e6}, duration_s=1e6)
    with pytest.raises(InputError, match="more than 50,000,000 requests .about 1e.12 expected"):
        generate(s)


def test_offline_requests_all_arrive_at_zero():
    s = spec({"kind": "offline"}, num_requests=5)
    r = generate(s)
    assert r.arrival_s.tolist() == [0.0] * 5 and r.duration_s == 0.0 and len(r) == 5
    assert mean_rate_per_s(s) == math.inf
    assert with_rate(s, 3.0) is s


def _hour_of_day(arrival_s: np.ndarray, start_hour: float = 0.0) -> np.ndarray:
    return (arrival_s / 3600 + start_hour) % 24


def test_diurnal_counts_follow_the_integral_of_the_curve():
    s = spec({"kind": "diurnal", "curve": [[0, 1], [12, 9]]}, duration_s=20 * 86_400.0)
    assert mean_rate_per_s(s) == 5.0  # a triangle from 1 to 9 and back: average 5
    r = generate(s, seed=11)
    hour = _hour_of_day(r.arrival_s)
    noon = np.count_nonzero((hour >= 11) & (hour < 13))
    midnight = np.count_nonzero((hour >= 23) | (hour < 1))
    # rate 1 + 8h/12 rising, symmetric after noon: trapezoids over each 2-hour window
    noon_integral = 2 * (1 + 8 * 11 / 12 + 9) / 2
    midnight_integral = 2 * (1 + 8 * 1 / 12 + 1) / 2
    assert noon / midnight == pytest.approx(noon_integral / midnight_integral, rel=0.05)
    assert len(r) / (20 * 86_400) == pytest.approx(5.0, rel=0.01)


def test_diurnal_start_hour_and_wrap_around_midnight():
    # zero from 18 h through midnight to 6 h; starts at noon, so the first night is at 6 h
    curve = [[0, 0], [6, 0], [12, 10], [18, 0]]
    s = spec({"kind": "diurnal", "curve": curve, "start_hour": 12}, num_requests=300_000)
    r = generate(s, seed=2)
    hour = _hour_of_day(r.arrival_s, start_hour=12)
    assert np.count_nonzero((hour > 18 + 1e-6) | (hour < 6 - 1e-6)) == 0
    assert np.count_nonzero(hour < 8) > 0  # 216,000 requests a day: the next morning came
    # the first hour runs from 12 h to 13 h, where the rate falls from 10/s to 8.33/s
    first_hour = np.count_nonzero(r.arrival_s < 3600)
    assert first_hour == pytest.approx((10 + 10 * 5 / 6) / 2 * 3600, rel=0.03)
    assert r.arrival_s[0] < 1.0  # rate 10/s at noon: the first arrival comes at once
    assert mean_rate_per_s(s) == pytest.approx(10 * 12 / 2 / 24, rel=1e-12)


def test_diurnal_inversion_is_exact():
    from infraplan.serving.diurnal import DiurnalCurve

    arrival = ArrivalSpec.model_validate(
        {"kind": "diurnal", "curve": [[2, 0], [5, 0], [9, 4], [17.5, 6], [22, 1]]})
    curve = DiurnalCurve(arrival)
    # trapezoids 5-9 h, 9-17.5 h, 17.5-22 h and 22-26 h (wrapping to 2 h, rate 0)
    assert curve.per_day == pytest.approx(3600 * (4 * 4 + 8.5 * 10 + 4.5 * 7 + 4 * 1) / 2)
    y = np.linspace(0, 3.5 * curve.per_day, 10_001)
    t = curve.invert(y)
    assert np.all(np.diff(t) >= 0)
    assert np.allclose(curve.cumulative(t), y, rtol=0, atol=1e-9 * curve.per_day)
    day_hour = t / 3600 % 24
    inside_gap = (day_hour > 2 + 1e-9) & (day_hour < 5 - 1e-9)  # zero rate: never landed in
    assert not np.any(inside_gap)


# ---- lengths ----------------------------------------------------------------------------


def _lengths(**fields) -> np.ndarray:
    rng = np.random.Generator(np.random.PCG64(5))
    return draw_lengths(LengthSpec.model_validate(fields), rng, 200_000)


def test_lognormal_mean_is_the_mean_of_the_distribution():
    x = _lengths(kind="lognormal", mean=500, sigma=0.5)
    assert x.dtype == np.int64
    assert x.mean() == pytest.approx(500, rel=0.02)
    # the median is exp(mu) = 500 exp(-sigma^2/2) = 441
    assert np.median(x) == pytest.approx(500 * math.exp(-0.125), rel=0.02)


def test_fixed_and_uniform_bounds_are_exact():
    assert set(_lengths(kind="fixed", value=128).tolist()) == {128}
    x = _lengths(kind="uniform", low=10, high=20)
    assert x.min() == 10 and x.max() == 20 and len(set(x.tolist())) == 11


def test_lengths_round_to_the_nearest_integer():
    # sigma ~ 0: every draw is within 1e-5 of the mean
    assert set(_lengths(kind="lognormal", mean=10.7, sigma=1e-6).tolist()) == {11}
    assert set(_lengths(kind="lognormal", mean=10.3, sigma=1e-6).tolist()) == {10}


def test_clipping_to_min_and_max():
    x = _lengths(kind="lognormal", mean=200, sigma=1.0, min=100, max=300)
    assert x.min() == 100 and x.max() == 300
    assert set(_lengths(kind="fixed", value=4096, max=4096).tolist()) == {4096}


@pytest.mark.parametrize("fields, message", [
    # clipped lengths average within min..max: a stated mean outside it is never drawn
    ({"kind": "fixed", "value": 5000, "max": 4096},
     "length.value 5000 is above max (4,096): lengths clipped to min..max cannot average 5000; "
     "to fix: raise max, or set value within min..max"),
    ({"kind": "lognormal", "mean": 1000, "max": 999}, "length.mean 1000 is above max (999)"),
    ({"kind": "lognormal", "mean": 0.5}, "length.mean 0.5 is below min (1)"),
    ({"kind": "uniform", "low": 10, "high": 30, "min": 21},
     "length.low 10..30 (mean 20) is below min (21): lengths clipped to min..max cannot "
     "average 20; to fix: lower min, or set low..high within min..max"),
])
def test_a_mean_outside_min_and_max_is_refused(fields, message):
    with pytest.raises(InputError) as info:
        LengthSpec.model_validate(fields)
    assert str(info.value).startswith(message)
    # at the bound it runs, and clipping leaves that mean possible
    bound = fields.get("max", fields.get("min", 1))
    edge = {**fields, "max" if "max" in fields else "min": bound}
    key = {"fixed": "value", "lognormal": "mean"}.get(fields["kind"])
    if key is not None:
        edge[key] = bound
        assert LengthSpec.model_validate(edge).mean_before_clipping() == bound


# ---- determinism ------------------------------------------------------------------------


def test_same_seed_same_arrays_and_streams_are_independent():
    raw = {"arrival": {"kind": "gamma", "rate_per_s": 3, "cv": 2},
           "input": {"kind": "lognormal", "mean": 300},
           "output": {"kind": "uniform", "low": 1, "high": 100}, "num_requests": 1000}
    a, b = generate(TrafficSpec.model_validate(raw), seed=7), \
        generate(TrafficSpec.model_validate(raw), seed=7)
    for name in ("arrival_s", "input_tokens", "output_tokens"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    c = generate(TrafficSpec.model_validate(raw), seed=8)
    assert not np.array_equal(a.arrival_s, c.arrival_s)
    assert not np.array_equal(a.input_tokens, c.input_tokens)
    raw["output"] = {"kind": "lognormal", "mean": 50, "sigma": 0.3}
    d = generate(TrafficSpec.model_validate(raw), seed=7)
    assert np.array_equal(a.arrival_s, d.arrival_s)
    assert np.array_equal(a.input_tokens, d.input_tokens)
    assert not np.array_equal(a.output_tokens, d.output_tokens)


def test_streams_are_the_spawned_children_of_the_seed():
    same = {"kind": "uniform", "low": 1, "high": 10**6}
    s = TrafficSpec.model_validate({"arrival": {"kind": "poisson", "rate_per_s": 2},
                                    "input": same, "output": same, "num_requests": 500})
    r = generate(s, seed=7)
    assert not np.array_equal(r.input_tokens, r.output_tokens)
    children = np.random.SeedSequence(7).spawn(3)
    arrival_rng, input_rng = (np.random.Generator(np.random.PCG64(c)) for c in children[:2])
    assert np.array_equal(r.arrival_s, np.cumsum(arrival_rng.exponential(0.5, 500)))
    assert np.array_equal(r.input_tokens, draw_lengths(s.input, input_rng, 500))


# ---- traces -----------------------------------------------------------------------------


def _write(tmp_path, text: str, name: str = "trace.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_trace_read_back_exactly(tmp_path):
    path = _write(tmp_path, "arrival_s,input_len,output_len,user\n"
                            "0.0,100,20,a\n0.25, 300 ,40,b\n\n1.5,7,1,c\n")
    r = read_trace(path)
    assert r.arrival_s.tolist() == [0.0, 0.25, 1.5]
    assert r.input_tokens.tolist() == [100, 300, 7]
    assert r.output_tokens.tolist() == [20, 40, 1]
    assert r.arrival_s.dtype == np.float64 and r.input_tokens.dtype == np.int64
    assert r.duration_s == 1.5


def test_unsorted_trace_is_sorted_with_its_lengths_stably(tmp_path):
    path = _write(tmp_path, "output_len,arrival_s,input_len\n"
                            "1,3.0,10\n2,1.0,20\n3,3.0,30\n4,0.5,40\n")
    r = read_trace(path)
    assert r.arrival_s.tolist() == [0.5, 1.0, 3.0, 3.0]
    assert r.input_tokens.tolist() == [40, 20, 10, 30]
    assert r.output_tokens.tolist() == [4, 2, 1, 3]


@pytest.mark.parametrize("body, expected", [
    ("0.0,10,5\n0.5,abc,5\n", "line 3, column input_len: 'abc' is not a number"),
    ("0.0,10,5\n-1,10,5\n", "line 3, column arrival_s"),
    ("0.0,10,5\n1.0,10,0\n", "line 3, column output_len"),
    ("0.0,10.5,5\n", "line 2, column input_len"),
    ("0.0,10\n", "line 2, column output_len: '' is not a number"),
    ("", "has no requests"),
])
def test_bad_trace_rows_name_the_line(tmp_path, body, expected):
    path = _write(tmp_path, "arrival_s,input_len,output_len\n" + body)
    with pytest.raises(InputError, match="trace.csv: .*" + expected.replace("(", r"\(")):
        read_trace(path)


def test_sorting_keeps_the_file_order_of_ties(tmp_path):
    # 200 rows, 5 distinct times: enough for an unstable sort to reorder ties
    rows = "".join(f"{(i * 7) % 5},{i + 1},1\n" for i in range(200))
    r = read_trace(_write(tmp_path, "arrival_s,input_len,output_len\n" + rows))
    assert np.all(np.diff(r.arrival_s) >= 0)
    for t in range(5):
        order = r.input_tokens[r.arrival_s == t]
        assert len(order) == 40 and np.all(np.diff(order) > 0)


def test_trace_file_problems(tmp_path):
    with pytest.raises(InputError, match="lacks output_len"):
        read_trace(_write(tmp_path, "arrival_s,input_len\n0,1\n"))
    with pytest.raises(InputError, match="lacks arrival_s"):
        read_trace(_write(tmp_path, ""))
    with pytest.raises(InputError, match="does not exist"):
        read_trace("missing.csv", base_dir=tmp_path)


def test_trace_spec_time_scale_truncation_overrides_and_with_rate(tmp_path):
    _write(tmp_path, "arrival_s,input_len,output_len\n0,10,1\n1,20,2\n3,30,3\n4,40,4\n")
    s = TrafficSpec.model_validate({"arrival": {"kind": "trace", "path": "trace.csv"}})
    r = generate(s, base_dir=tmp_path)
    assert r.arrival_s.tolist() == [0, 1, 3, 4] and r.input_tokens.tolist() == [10, 20, 30, 40]
    assert mean_rate_per_s(s, base_dir=tmp_path) == 1.0  # 4 requests over 4 s

    scaled = s.model_copy(update={"arrival": s.arrival.model_copy(update={"time_scale": 2.5})})
    assert generate(scaled, base_dir=tmp_path).arrival_s.tolist() == [0, 2.5, 7.5, 10]

    cut = TrafficSpec.model_validate({"arrival": {"kind": "trace", "path": "trace.csv"},
                                      "duration_s": 3.0, "output": FIXED})
    r = generate(cut, base_dir=tmp_path)
    assert r.arrival_s.tolist() == [0, 1, 3] and r.output_tokens.tolist() == [7, 7, 7]
    assert r.input_tokens.tolist() == [10, 20, 30]  # the trace's, not overridden
    assert len(generate(cut.model_copy(update={"num_requests": 2}), base_dir=tmp_path)) == 2
    _write(tmp_path, "arrival_s,input_len,output_len\n10,1,1\n11,1,1\n", name="late.csv")
    late = TrafficSpec.model_validate({"arrival": {"kind": "trace", "path": "late.csv",
                                                   "time_scale": 1.5}, "duration_s": 9.0})
    with pytest.raises(InputError, match="duration_s 9 keeps no request.*first arrives at 15 s"):
        generate(late, base_dir=tmp_path)

    faster = with_rate(s, 2.0, base_dir=tmp_path)
    slower = with_rate(s, 0.5, base_dir=tmp_path)
    assert generate(faster, base_dir=tmp_path).duration_s == 4.0 / 2
    assert generate(slower, base_dir=tmp_path).duration_s == 4.0 * 2
    # duration_s scales with time: the truncated trace keeps the same requests
    assert len(generate(with_rate(cut, 7.0, base_dir=tmp_path), base_dir=tmp_path)) == 3


# ---- rate scaling -----------------------------------------------------------------------


@pytest.mark.parametrize("arrival", [
    {"kind": "poisson", "rate_per_s": 4.0},
    {"kind": "gamma", "rate_per_s": 4.0, "cv": 2.5},
    {"kind": "diurnal", "curve": [[1, 0.3], [9.5, 7.0], [20, 2.0]], "start_hour": 8},
])
@pytest.mark.parametrize("rate", [0.37, 12.0, 1234.5])
def test_with_rate_gives_the_requested_mean_rate(arrival, rate):
    s = spec(arrival, duration_s=60.0)
    scaled = with_rate(s, rate)
    assert mean_rate_per_s(scaled) == pytest.approx(rate, rel=1e-12)
    assert scaled.duration_s == 60.0 and scaled.arrival.kind == arrival["kind"]
    if arrival["kind"] == "gamma":
        assert scaled.arrival.cv == 2.5
    if arrival["kind"] == "diurnal":  # same shape: every point scaled by one factor
        ratios = [b[1] / a[1] for a, b in zip(s.arrival.curve, scaled.arrival.curve)]
        assert max(ratios) == pytest.approx(min(ratios), rel=1e-12)


def test_with_rate_rejects_a_bad_rate():
    with pytest.raises(InputError, match="rate_per_s must be finite and > 0"):
        with_rate(spec({"kind": "poisson", "rate_per_s": 1}, num_requests=3), -2.0)


# ---- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize("raw, message", [
    # a trace's lengths are its columns; 'trace' as a length kind listed three other kinds
    ({"arrival": {"kind": "trace", "path": "t.csv"}, "input": {"kind": "trace"},
      "output": {"kind": "trace"}},
     r"traffic.input.kind 'trace' is not a length distribution: a trace's lengths are its "
     r"input_len and output_len columns; to fix: leave input and output out: a trace "
     r"arrival replays its lengths"),
    ({"arrival": {"kind": "poisson", "rate_per_s": 1}, "num_requests": 3,
      "input": {"kind": "fixed", "value": 9}, "output": {"kind": "trace"}},
     r"traffic.output.kind 'trace' is not .*; to fix: replay a trace with arrival: \{kind: "
     r"trace, path: requests.csv\} and no output, or give output a kind of fixed, uniform "
     r"or lognormal"),
    ({"arrival": {"kind": "poisson", "rate_per_sec": 10}, "num_requests": 3},
     "traffic.arrival.rate_per_sec is not a known key; did you mean 'rate_per_s'?"),
    ({"arrival": {"kind": "poisson"}, "num_requests": 3},
     "traffic.arrival.rate_per_s is required for kind 'poisson'"),
    ({"arrival": {"kind": "poisson", "rate_per_s": -2}, "num_requests": 3},
     r"traffic.arrival.rate_per_s must be > 0 \(got -2\)"),
    ({"arrival": {"kind": "poisson", "rate_per_s": 1}, "num_requests": 3, "duration_s": 9},
     r"traffic.num_requests or duration_s: give exactly one for arrival kind 'poisson' \(both "
     r"are given\); to fix: keep num_requests \(how many requests\) or duration_s \(seconds "
     r"of arrivals\), not both"),
    ({"arrival": {"kind": "poisson", "rate_per_s": 1}},
     r"traffic.num_requests or duration_s: give exactly one for arrival kind 'poisson' "
     r"\(neither is given\); to fix: add num_requests: 1000 \(how many requests\) or "
     r"duration_s: 600"),
    ({"arrival": {"kind": "offline"}, "duration_s": 9},
     "traffic.num_requests is required for arrival kind 'offline'; to fix: add num_requests: "
     "1000"),
    ({"arrival": {"kind": "poison", "rate_per_s": 1}, "num_requests": 3},
     "traffic.arrival.kind must be one of .*did you mean 'poisson'?"),
    ({"arrival": {"kind": "poisson", "rate_per_s": 1, "cv": 2}, "num_requests": 3},
     "traffic.arrival.cv does not apply to kind 'poisson'.*set kind: gamma"),
    ({"arrival": {"kind": "gamma", "rate_per_s": 1}, "num_requests": 3},
     "traffic.arrival.cv is required for kind 'gamma'; to fix: set cv \\(kind 'gamma' needs it"),
    ({"arrival": {"kind": "gamma"}, "num_requests": 3},
     "traffic.arrival.rate_per_s is required .* set rate_per_s and cv \\(kind 'gamma' needs them"),
    # 1/cv^2 overflowed a float (OverflowError traceback) below these bounds
    ({"arrival": {"kind": "gamma", "rate_per_s": 1, "cv": 1e-170}, "num_requests": 3},
     r"traffic.arrival.cv must be >= 0.01 \(got 1e-170\)"),
    ({"arrival": {"kind": "gamma", "rate_per_s": 1, "cv": 1e200}, "num_requests": 3},
     r"traffic.arrival.cv must be <= 100 \(got 1e\+200\)"),
    ({"arrival": {"kind": "diurnal", "curve": [[0, 1], [24, 2]]}, "num_requests": 3},
     r"traffic.arrival.curve hours must be in \[0, 24\)"),
    ({"arrival": {"kind": "diurnal", "curve": [[5, 1], [3, 2]]}, "num_requests": 3},
     "traffic.arrival.curve hours must increase strictly"),
    ({"arrival": {"kind": "diurnal", "curve": [[5, 0]]}, "num_requests": 3},
     "traffic.arrival.curve rates must be finite, >= 0 and not all 0"),
    ({"arrival": {"kind": "diurnal", "curve": [[5, 1, 2]]}, "num_requests": 3},
     "^traffic.arrival.curve.0 must have at most 2 items, not 3$"),
    ({"arrival": {"kind": "diurnal", "curve": []}, "num_requests": 3},
     "^traffic.arrival.curve must not be empty$"),
    ({"arrival": {"kind": "trace"}}, "traffic.arrival.path is required for kind 'trace'"),
    ({"arrival": {"kind": "poisson", "rate_per_s": 1}, "num_requests": 3,
      "input": {"kind": "uniform", "low": 5, "high": 2}},
     r"traffic.input.high must be >= low \(5\) \(got 2\)"),
    # min/max (clip bounds of every kind) are not the uniform range: say so
    ({"arrival": {"kind": "poisson", "rate_per_s": 1}, "num_requests": 3,
      "input": {"kind": "uniform", "min": 100, "max": 800}},
     "traffic.input.low is required for kind 'uniform'; to fix: set low and high .*"
     "min and max only clip the drawn lengths, the uniform range is low..high$"),
    ({"arrival": {"kind": "poisson", "rate_per_s": 1}, "num_requests": 3,
      "input": {"kind": "uniform", "high": 800}},
     r"traffic.input.low is required for kind 'uniform'; to fix: set low \(kind 'uniform' "
     "needs it\\)$"),
    ({"arrival": {"kind": "poisson", "rate_per_s": 1}, "num_requests": 3,
      "input": {"kind": "fixed", "value": 5, "sigma": 0.5}},
     "traffic.input.sigma does not apply to kind 'fixed'"),
    ({"arrival": {"kind": "poisson", "rate_per_s": 1}, "num_requests": 3,
      "input": {"kind": "lognormal"}}, "traffic.input.mean is required for kind 'lognormal'"),
    ({"arrival": {"kind": "poisson", "rate_per_s": 1}, "num_requests": 3, "input": None},
     "traffic.input is required for arrival kind 'poisson'"),
])
def test_bad_specs_name_the_field(raw, message):
    raw = {"input": FIXED, "output": FIXED, **raw}
    with pytest.raises(InputError, match=message) as info:
        TrafficSpec.model_validate(raw)
    assert "\n" not in str(info.value)  # one line for the CLI


def test_all_problems_are_reported_at_once():
    raw = {"arrival": {"kind": "poisson", "rate_per_s": 0}, "num_requests": 0,
           "input": {"kind": "fixed", "vlaue": 3}, "output": FIXED}
    with pytest.raises(InputError) as info:
        TrafficSpec.model_validate(raw)
    assert str(info.value) == ("traffic.arrival.rate_per_s must be > 0 (got 0); "
                               "traffic.input.vlaue is not a known key; did you mean 'value'?; "
                               "traffic.num_requests must be >= 1 (got 0)")


def test_standalone_specs_validate_too():
    with pytest.raises(InputError, match="arrival.rate_per_s is required"):
        ArrivalSpec.model_validate({"kind": "gamma", "cv": 2})
    with pytest.raises(InputError, match="seed must be an integer >= 0"):
        generate(spec({"kind": "offline"}, num_requests=1), seed=-1)


# ---- properties over random specs -------------------------------------------------------


@st.composite
def length_specs(draw) -> dict:
    kind = draw(st.sampled_from(["fixed", "uniform", "lognormal"]))
    if kind == "fixed":
        out = {"value": draw(st.integers(1, 100_000))}
    elif kind == "uniform":
        low = draw(st.integers(1, 10_000))
        out = {"low": low, "high": draw(st.integers(low, 20_000))}
    else:
        out = {"mean": draw(st.floats(1, 1e5)), "sigma": draw(st.floats(0.05, 4))}
    centre = LengthSpec.model_validate({"kind": kind, **out}).mean_before_clipping()
    # min and max around the stated mean: a mean outside them is refused (tested above)
    out |= {"kind": kind, "min": draw(st.integers(1, max(1, min(500, math.floor(centre)))))}
    if draw(st.booleans()):
        out["max"] = draw(st.integers(max(out["min"], math.ceil(centre)), 100_000))
    return out


@st.composite
def arrival_specs(draw) -> dict:
    kind = draw(st.sampled_from(["offline", "poisson", "gamma", "diurnal"]))
    out: dict = {"kind": kind}
    if kind in ("poisson", "gamma"):
        out["rate_per_s"] = draw(st.floats(1e-3, 1e4))
    if kind == "gamma":
        out["cv"] = draw(st.floats(0.05, 10))
    if kind == "diurnal":
        hours = sorted(draw(st.sets(st.floats(0, 23.99), min_size=1, max_size=6)))
        rates = draw(st.lists(st.floats(0, 100), min_size=len(hours), max_size=len(hours)))
        rates[draw(st.integers(0, len(hours) - 1))] = draw(st.floats(0.01, 100))
        out |= {"curve": [list(p) for p in zip(hours, rates)],
                "start_hour": draw(st.floats(0, 23.99))}
    return out


@settings(max_examples=50, deadline=None)
@given(arrival=arrival_specs(), lengths=st.tuples(length_specs(), length_specs()),
       size=st.one_of(st.integers(1, 300), st.floats(1e-3, 1.0)), seed=st.integers(0, 2**32))
def test_generated_requests_keep_their_invariants(arrival, lengths, size, seed):
    raw = {"arrival": arrival, "input": lengths[0], "output": lengths[1]}
    if isinstance(size, int) or arrival["kind"] == "offline":
        raw["num_requests"] = size if isinstance(size, int) else 17
    s = TrafficSpec.model_validate(raw | {"num_requests": 1})  # to know the mean rate
    if "num_requests" not in raw:
        raw["duration_s"] = size * 500 / mean_rate_per_s(s)  # up to ~500 requests
    s = TrafficSpec.model_validate(raw)
    r = generate(s, seed=seed)

    t = r.arrival_s
    assert np.all(np.isfinite(t)) and np.all(t >= 0) and np.all(np.diff(t) >= 0)
    if s.num_requests is not None:
        assert len(r) == s.num_requests
    else:
        assert np.all(t <= s.duration_s)
    for tokens, length in ((r.input_tokens, s.input), (r.output_tokens, s.output)):
        assert tokens.dtype == np.int64 and np.all(tokens >= max(1, length.min))
        if length.max is not None:
            assert np.all(tokens <= length.max)
    if arrival["kind"] != "offline":
        assert mean_rate_per_s(with_rate(s, 3.0)) == pytest.approx(3.0, rel=1e-12)


@pytest.mark.parametrize("spec", [
    {"kind": "fixed", "value": 700},
    {"kind": "uniform", "low": 10, "high": 90, "min": 30, "max": 60},
    {"kind": "uniform", "low": 1, "high": 4000},
    {"kind": "lognormal", "mean": 300, "sigma": 0.8, "max": 4000},
    {"kind": "lognormal", "mean": 1500, "sigma": 1.5, "min": 200, "max": 2000},
    {"kind": "lognormal", "mean": 3, "sigma": 1.0},
])
def test_expected_length_is_the_mean_of_the_draws(spec):
    """expected_length: exact for fixed and uniform, the clipped lognormal's partial
    expectations for lognormal; 2 million draws agree within 4 standard errors."""
    from infraplan.serving.lengths import LengthSpec, draw_lengths, expected_length

    length = LengthSpec.model_validate(spec)
    draws = draw_lengths(length, np.random.default_rng(7), 2_000_000)
    error = draws.std() / np.sqrt(len(draws))
    expected = expected_length(length)
    assert abs(draws.mean() - expected) <= 4 * error + 0.02, (draws.mean(), expected)
    if spec["kind"] != "lognormal":  # exact: every value is equally likely
        low, high = length.min, length.max or 10**9
        values = [spec["value"]] if spec["kind"] == "fixed" else \
            range(spec["low"], spec["high"] + 1)
        assert expected == pytest.approx(np.clip(np.array(values), low, high).mean(), rel=1e-12)
