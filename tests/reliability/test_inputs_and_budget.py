"""Bad numbers into the reliability library are InputErrors naming the argument; an interval
longer than the work is one checkpoint-free stretch; runs too long to draw are refused up
front, and a 15T-token run on 16,384 GPUs is not."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from infraplan.catalog import load_catalog
from infraplan.errors import InputError
from infraplan.reliability import montecarlo
from infraplan.reliability.checkpoint import daly_interval_s, plan_checkpoints, young_interval_s
from infraplan.checks import check_number
from infraplan.reliability.failures import FailureModel, from_rate, from_run
from infraplan.reliability.montecarlo import (
    MAX_TRIAL_EVENTS,
    MAX_TRIALS,
    TrainingRun,
    simulate_run,
)
from infraplan.reliability.spot import SpotModel, rate_from_monthly_fraction

NAN, INF = float("nan"), float("inf")
DAY_S = 86400.0
TIER = load_catalog().storage.get("fsx-lustre-p2-1000")


def _run(**fields) -> TrainingRun:
    base = {"work_s": DAY_S, "num_gpus": 1024, "checkpoint_s": 30.0, "restart_s": 600.0,
            "on_demand_usd_per_gpu_hour": 2.0}
    return TrainingRun(**(base | fields))


def _plan(**fields):
    base = {"nodes": 8, "num_gpus": 64, "mtbf_s": 1e5}
    return plan_checkpoints(2e9, TIER, **(base | fields))


@pytest.mark.parametrize("make,name", [
    (lambda: young_interval_s(NAN, 100), "checkpoint_s"),
    (lambda: young_interval_s(10, INF), "mtbf_s"),
    (lambda: daly_interval_s(10, NAN), "mtbf_s"),
    (lambda: daly_interval_s(INF, 100), "checkpoint_s"),
    (lambda: _plan(mtbf_s=NAN), "mtbf_s"),
    (lambda: _plan(num_gpus=0), "num_gpus"),
    (lambda: _plan(nodes=0), "nodes"),
    (lambda: from_run(0, 54, 16384, name="x"), "interruptions"),
    (lambda: from_run(NAN, 54, 16384, name="x"), "interruptions"),
    (lambda: from_run(10, 54, 0, name="x"), "gpus"),
    (lambda: from_rate(0, name="run.failures_per_gpu_hour"), "run.failures_per_gpu_hour"),
    (lambda: from_rate(NAN, name="run.failures_per_gpu_hour"), "run.failures_per_gpu_hour"),
    (lambda: FailureModel(-1e-9, "negative"), "rate_per_gpu_s"),
    (lambda: FailureModel(NAN, "nan"), "rate_per_gpu_s"),
    (lambda: SpotModel(spot_usd_per_gpu_hour=NAN), "spot_usd_per_gpu_hour"),
    (lambda: SpotModel(discount=NAN), "discount"),
    (lambda: rate_from_monthly_fraction(NAN), "monthly interrupted fraction"),
    (lambda: _run(checkpoint_s=INF), "checkpoint_s"),
    (lambda: _run(work_s=NAN), "work_s"),
    (lambda: _run(num_gpus=8.5), "num_gpus"),
    (lambda: simulate_run(_run(), seed=-1), "seed"),
    (lambda: simulate_run(_run(), trials=10**9), "trials"),
    (lambda: simulate_run(_run(), trials=2.5), "trials"),
    (lambda: simulate_run(_run(), interval_s=100, optimise_interval=True), "interval_s"),
    (lambda: simulate_run(_run(), interval_grid_s=[100.0]), "interval_grid_s"),
])
def test_bad_numbers_are_input_errors_naming_the_argument(make, name):
    with pytest.raises(InputError) as error:
        make()
    assert name in str(error.value)


def test_the_shared_check_says_the_range_and_the_value():
    with pytest.raises(InputError, match=r"^trials must be an integer >= 1 and <= 100,000, "
                                         r"got 1000000000$"):
        check_number("trials", 10**9, ge=1, le=MAX_TRIALS, integer=True)
    assert check_number("x", np.float64(2.0), gt=0) == 2.0
    assert check_number("n", np.int64(3), ge=1, integer=True) == 3
    with pytest.raises(InputError, match="a finite number"):
        check_number("x", True)


def test_a_failure_free_model_has_an_infinite_mtbf():
    assert FailureModel(0.0, "none").job_mtbf_s(8) == math.inf


def test_an_interval_longer_than_the_work_is_one_stretch_without_checkpoints():
    """Regression: interval_s=1e7 on a 1-day run was refused as needing ~2e22 restarts."""
    run = _run()
    longer = simulate_run(run, interval_s=1e7, trials=200, seed=2)
    whole = simulate_run(run, interval_s=DAY_S, trials=200, seed=2)
    assert np.array_equal(longer.samples.wall_s, whole.samples.wall_s)
    assert np.array_equal(longer.samples.cost_usd, whole.samples.cost_usd)
    assert longer.wall_s == whole.wall_s and longer.goodput == whole.goodput
    # no checkpoint is taken: without failures the run is exactly its work
    calm = simulate_run(_run(failures=FailureModel(0.0, "none")), interval_s=1e7, trials=5)
    assert calm.wall_s.mean == DAY_S


def _llama_405b_run(days: float) -> TrainingRun:
    """15T tokens of Llama 3.1 405B on 16,384 H100s is ~63 days of failure-free compute
    (plan train's best plan); checkpoints async to FSx as simulate train plans them."""
    from infraplan.reliability.failures import llama3_failure_model

    failures = llama3_failure_model()
    return TrainingRun(work_s=days * DAY_S, num_gpus=16384, checkpoint_s=0.0139,
                       checkpoint_write_s=56.8, restart_s=654.0,
                       on_demand_usd_per_gpu_hour=3.0, failures=failures)


def test_the_work_budget_admits_15t_tokens_on_16k_gpus_at_1000_trials():
    spot = SpotModel.from_aws_band(">20%")
    for days in (63.0, 630.0):  # 15T tokens, and 150T still under the budget
        run = _llama_405b_run(days)
        mode = montecarlo._mode(run, "spot", spot, 0, None)
        grid = montecarlo._daly(run, mode) * np.geomspace(0.25, 4.0, 25)
        events = max(montecarlo._events_per_trial(run, mode, float(t)) for t in grid)
        # the 25 intervals step as one array of 25 x 1,000 elements (GROUP_ELEMENTS)
        assert events * (25 * 1000 + montecarlo.STEP_TRIALS) < MAX_TRIAL_EVENTS
        montecarlo._check_work(run, mode, [float(t) for t in grid], 1000)  # no error


def test_a_run_too_long_to_draw_is_refused_up_front_with_the_fix():
    """Regression: 1e16 tokens on 16,384 GPUs, spot in the >20% band, 10 trials ran for
    more than 10 minutes; ~1.2 million events a trial at each of 25 intervals."""
    run = _llama_405b_run(63.0 * 1e16 / 15e12)
    start = time.perf_counter()
    with pytest.raises(InputError) as error:
        simulate_run(run, "spot", spot=SpotModel.from_aws_band(">20%"),
                     optimise_interval=True, trials=10)
    assert time.perf_counter() - start < 1.0
    message = str(error.value)
    assert "too long to draw" in message and "10 trials x 25 checkpoint interval" in message
    for fix in ("run.trials", "run.optimise_interval: false", "training.tokens"):
        assert fix in message
