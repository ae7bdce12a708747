"""Monte-Carlo training runs: closed forms where they hold, exact counts without failures,
determinism, prices, and the spot / reserved strategies."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from infraplan.errors import InputError
from infraplan.reliability.checkpoint import daly_interval_s, waste_fraction
from infraplan.reliability.failures import FailureModel
from infraplan.reliability.montecarlo import TrainingRun, compare_strategies, simulate_run
from infraplan.reliability.spot import (
    AWS_NOTICE_S,
    SpotModel,
    rate_from_monthly_fraction,
)

HOUR = 3600.0
NO_FAILURES = FailureModel(0.0, "none")
RARE_PREEMPTION = SpotModel(preemption_rate_per_node_s=1e-12)


def job(mtbf_s: float | None = None, *, num_gpus: int = 1024, **fields) -> TrainingRun:
    """A run whose job MTBF is `mtbf_s` (None: no failures)."""
    failures = NO_FAILURES if mtbf_s is None else FailureModel(1 / (mtbf_s * num_gpus), "t")
    base = {"work_s": 100 * HOUR, "checkpoint_s": 60.0, "restart_s": 60.0,
            "on_demand_usd_per_gpu_hour": 4.0}
    return TrainingRun(num_gpus=num_gpus, failures=failures, **(base | fields))


def expected_wall_s(work_s, tau_s, c_s, r_s, mtbf_s):
    """Exact mean wall time of the simulated model (synchronous checkpoints, failures only
    while running or checkpointing). A cycle of L = tau + C succeeds with probability
    e^{-L/M}; each failed attempt costs E[X | X < L] + R = M - L / (e^{L/M} - 1) + R, and
    e^{L/M} - 1 attempts fail on average, so E[T(L)] = (M + R)(e^{L/M} - 1). The run is
    k = ceil(W/tau) - 1 such cycles and a last stretch of W - k tau without a checkpoint."""
    k = math.ceil(work_s / tau_s) - 1
    return (mtbf_s + r_s) * (k * math.expm1((tau_s + c_s) / mtbf_s)
                             + math.expm1((work_s - k * tau_s) / mtbf_s))


def test_young_daly_regime_matches_closed_forms():
    """C << tau << M, R small, ~500 failures a trial. The first-order waste
    C/tau + tau/(2M) + R/M drops O(x^2) terms (x = the waste itself, ~0.06): the exact
    expectation above differs from it by ~2% here (asserted below), Monte-Carlo noise is
    ~0.2% (500 failures x 300 trials), so 5% relative is a tolerance the model must meet and
    a wrong loss accounting (e.g. losing a full tau, or no restart) would not."""
    m, c, r = 10 * HOUR, 60.0, 60.0
    run = job(m, work_s=500 * m, checkpoint_s=c, restart_s=r)
    result = simulate_run(run, trials=300, seed=11)
    tau = daly_interval_s(c, m)
    assert result.interval_s == pytest.approx(tau) and result.interval_source == "daly"
    walls = result.samples.wall_s
    exact = expected_wall_s(run.work_s, tau, c, r, m)
    assert abs(walls.mean() - exact) < 4 * walls.std() / math.sqrt(walls.size)
    first_order = waste_fraction(tau, c, m, r)
    exact_waste = 1 - run.work_s / exact
    assert abs(exact_waste / first_order - 1) < 0.03  # the model error, derived
    simulated_waste = 1 - run.work_s / walls.mean()
    assert simulated_waste == pytest.approx(first_order, rel=0.05)
    # failures strike only while running, so E[K] = E[wall - K R] / M = E[wall] / (M + R)
    assert result.interruptions.mean == pytest.approx(exact / (m + r), rel=0.03)

    scan = simulate_run(run, optimise_interval=True, trials=300, seed=11).scan
    assert scan.daly_interval_s == pytest.approx(tau)
    assert scan.best_interval_s == pytest.approx(tau, rel=0.2)
    assert scan.intervals_s.shape == scan.mean_goodput.shape == (25,)
    # the curve is the report's plot: goodput peaks inside the grid, falls at both ends
    assert scan.mean_goodput.max() > scan.mean_goodput[0]
    assert scan.mean_goodput.max() > scan.mean_goodput[-1]


def test_the_scan_starts_no_checkpoint_before_the_last_is_durable():
    """Daly's interval is held to the upload w; the scan around it went down to Daly / 4,
    below w (a 920 GiB checkpoint durable after 79 s, scanned from 20 s, chosen at 56 s)."""
    m, c, w = 10 * HOUR, 1.0, 150.0
    run = job(m, work_s=50 * m, checkpoint_s=c, checkpoint_write_s=w)
    daly = daly_interval_s(c, m)
    assert daly / 4 < w < daly  # the old grid's low end lies below the upload
    scan = simulate_run(run, optimise_interval=True, trials=50, seed=3).scan
    assert scan.intervals_s.min() == pytest.approx(w)
    assert scan.intervals_s.max() == pytest.approx(4 * daly)
    assert scan.intervals_s.shape == (25,)
    # an upload longer than Daly's interval holds the interval to it, and the scan starts
    # there; Daly's own is reported as Daly's (it read as the upload: 2,677 s for 268 s)
    slow = 10 * daly
    held = simulate_run(job(m, work_s=50 * m, checkpoint_s=c, checkpoint_write_s=slow),
                        optimise_interval=True, trials=20, seed=3)
    assert held.scan.daly_interval_s == held.daly_interval_s == pytest.approx(daly)
    assert daly == pytest.approx(267.66, abs=0.01)
    assert held.scan.upload_s == slow
    assert held.scan.intervals_s.min() == pytest.approx(slow)
    assert held.interval_s >= held.scan.intervals_s.min()
    once = simulate_run(job(m, work_s=50 * m, checkpoint_s=c, checkpoint_write_s=slow),
                        trials=20, seed=3)
    assert (once.interval_s, once.interval_source) == (slow, "upload")
    assert once.daly_interval_s == pytest.approx(daly)
    quick = simulate_run(job(m, work_s=50 * m, checkpoint_s=c), trials=20, seed=3)
    assert quick.interval_s == quick.daly_interval_s == pytest.approx(daly)
    assert quick.interval_source == "daly"


@pytest.mark.parametrize("work_s,tau_s,checkpoints", [(10_000, 1_000, 9), (10_500, 1_000, 10),
                                                        (999, 1_000, 0)])
@pytest.mark.parametrize("strategy", ["on_demand", "spot"])
def test_no_failures_costs_exactly_the_checkpoints(work_s, tau_s, checkpoints, strategy):
    run = job(None, work_s=work_s, checkpoint_s=7.0, checkpoint_write_s=30.0)
    spot = SpotModel(preemption_rate_per_node_s=0.0)
    result = simulate_run(run, strategy, spot=spot, interval_s=tau_s, trials=20)
    assert np.all(result.samples.wall_s == pytest.approx(work_s + checkpoints * 7.0,
                                                         rel=1e-12))
    assert result.interruptions.p90 == 0


def test_daly_default_without_failures_is_one_segment():
    result = simulate_run(job(None, work_s=5_000), trials=3)
    assert result.interval_s == 5_000 and result.wall_s.mean == pytest.approx(5_000)


def test_same_seed_same_results_other_seeds_differ():
    run = job(20 * HOUR)
    a, b = (simulate_run(run, "spot", trials=200, seed=3) for _ in range(2))
    c = simulate_run(run, "spot", trials=200, seed=4)
    assert np.array_equal(a.samples.wall_s, b.samples.wall_s)
    assert np.array_equal(a.samples.cost_usd, b.samples.cost_usd)
    assert a.wall_s == b.wall_s and a.cost_usd == b.cost_usd
    assert not np.array_equal(a.samples.wall_s, c.samples.wall_s)
    assert a.wall_s.mean != c.wall_s.mean


def test_goodput_and_on_demand_cost_bounds():
    run = job(5 * HOUR, num_gpus=512)
    result = simulate_run(run, trials=500, seed=1)
    goodput = run.work_s / result.samples.wall_s
    assert np.all((goodput > 0) & (goodput <= 1))
    floor_usd = run.on_demand_usd_per_gpu_hour * run.work_s * run.num_gpus / HOUR
    assert np.all(result.samples.cost_usd >= floor_usd)
    # on-demand bills every wall second
    assert np.allclose(result.samples.cost_usd, result.samples.wall_s * 512 * 4.0 / HOUR)
    assert result.goodput.p10 <= result.goodput.p50 <= result.goodput.p90 <= 1
    assert result.wall_s.p10 <= result.wall_s.p50 <= result.wall_s.p90
    # goodput's bad tail is its p10, the same trials as wall time's p90
    assert result.goodput.p10 == pytest.approx(run.work_s / result.wall_s.p90, rel=1e-3)


@pytest.mark.parametrize("spot", [SpotModel(discount=0.65, preemption_rate_per_node_s=0),
                                  SpotModel(spot_usd_per_gpu_hour=1.5,
                                            preemption_rate_per_node_s=0)])
def test_spot_without_preemptions_is_on_demand_at_the_spot_price(spot):
    run = job(8 * HOUR)
    on_demand = simulate_run(run, trials=100, seed=5)
    on_spot = simulate_run(run, "spot", spot=spot, trials=100, seed=5)
    ratio = spot.price_usd_per_gpu_hour(run.on_demand_usd_per_gpu_hour) / 4.0
    assert ratio == pytest.approx(0.35 if spot.spot_usd_per_gpu_hour is None else 1.5 / 4.0)
    assert np.array_equal(on_spot.samples.wall_s, on_demand.samples.wall_s)
    assert np.allclose(on_spot.samples.cost_usd, ratio * on_demand.samples.cost_usd)


def test_reserved_plus_spot_is_cheaper_when_spot_is_cheap_and_calm():
    run = job(20 * HOUR, num_gpus=1024)
    spot = SpotModel(discount=0.7, preemption_rate_per_node_s=rate_from_monthly_fraction(0.01))
    reserved_usd = 3.0
    results = compare_strategies(run, spot=spot, reserved_gpus=256,
                                 reserved_usd_per_gpu_hour=reserved_usd, trials=400, seed=2)
    od, mix = results["on_demand"], results["reserved_plus_spot"]
    assert set(results) == {"on_demand", "spot", "reserved_plus_spot"}
    assert 0 < mix.preemptions.mean < 5  # rare, not absent
    # prediction: the blended hourly price over the (slightly longer) wall time
    blended = (256 * reserved_usd + 768 * 0.3 * 4.0) / (1024 * 4.0)
    predicted = 1 - blended * mix.wall_s.mean / od.wall_s.mean
    reduction = 1 - mix.cost_usd.mean / od.cost_usd.mean
    assert reduction > 0
    assert reduction == pytest.approx(predicted, abs=0.01)
    # the spot GPUs are billed less than the whole wall time (unbilled while gone), never more
    assert mix.cost_usd.mean <= blended * od.cost_usd.mean * mix.wall_s.mean / od.wall_s.mean


def test_reserved_plus_spot_limits():
    run, spot = job(10 * HOUR), SpotModel(preemption_rate_per_node_s=1e-5)
    pure = simulate_run(run, "spot", spot=spot, trials=50, seed=9)
    none = simulate_run(run, "reserved_plus_spot", spot=spot, reserved_gpus=0,
                        trials=50, seed=9)
    assert np.array_equal(pure.samples.wall_s, none.samples.wall_s)
    assert pure.preemptions.mean > 1
    od = simulate_run(run, trials=50, seed=9)
    full = simulate_run(run, "reserved_plus_spot", spot=spot, reserved_gpus=1024,
                        reserved_usd_per_gpu_hour=2.0, trials=50, seed=9)
    assert np.array_equal(full.samples.wall_s, od.samples.wall_s)
    assert np.allclose(full.samples.cost_usd, od.samples.cost_usd / 2)
    # shrinking onto half the GPUs beats pausing, in wall time, when capacity is slow to return
    slow = SpotModel(preemption_rate_per_node_s=1e-5, capacity_wait_mean_s=20 * HOUR)
    paused = simulate_run(run, "spot", spot=slow, trials=200, seed=9)
    half = simulate_run(run, "reserved_plus_spot", spot=slow, reserved_gpus=512,
                        reserved_usd_per_gpu_hour=2.0, trials=200, seed=9)
    assert half.wall_s.mean < paused.wall_s.mean


def test_preemptions_with_enough_notice_cost_exactly_notice_restart_and_wait():
    """No failures and a notice that covers C + w: nothing is ever lost, so no regular
    checkpoints (Daly's interval is the whole run), each preemption costs notice + restart,
    preemptions come at nodes x rate per running second, and spot GPUs are billed for all but
    the waits."""
    run = job(None, checkpoint_s=20.0, checkpoint_write_s=10.0, work_s=200 * HOUR)
    rate = 1 / (2000 * HOUR)  # 128 nodes: 12.8 preemptions per trial
    spot = SpotModel(preemption_rate_per_node_s=rate, notice_s=30.0, restart_s=600.0,
                     capacity_wait_mean_s=0.0)
    now = simulate_run(run, "spot", spot=spot, trials=400, seed=4)
    k = now.samples.preemptions
    assert now.interval_s == run.work_s
    assert np.allclose(now.samples.wall_s, run.work_s + k * (30.0 + 600.0))
    expected = run.nodes * rate * run.work_s
    assert abs(k.mean() - expected) < 4 * math.sqrt(expected / k.size)
    price_usd_per_s = spot.price_usd_per_gpu_hour(4.0) * 1024 / HOUR
    assert np.allclose(now.samples.cost_usd, price_usd_per_s * now.samples.wall_s)
    # waits for capacity: the same preemptions (they strike only while running), longer
    # runs, the same bill
    later = simulate_run(run, "spot", spot=replace(spot, capacity_wait_mean_s=HOUR),
                         trials=400, seed=4)
    assert np.array_equal(later.samples.preemptions, k)
    assert np.allclose(later.samples.cost_usd, now.samples.cost_usd)
    waits = later.samples.wall_s - now.samples.wall_s
    assert waits.sum() / k.sum() == pytest.approx(HOUR, rel=0.1)


def test_a_longer_notice_never_costs_more():
    """The job trains through a notice and checkpoints at its end: a preemption costs
    C + w of it, whatever its length. A 2-hour notice cost 2 hours per preemption (92.3 %
    goodput against 96.9 % at 30 s, same preemptions)."""
    run = job(None, checkpoint_s=20.0, checkpoint_write_s=10.0, work_s=200 * HOUR)
    spot = SpotModel(preemption_rate_per_node_s=1 / (2000 * HOUR), capacity_wait_mean_s=0.0,
                     restart_s=600.0)
    walls = []
    for notice_s in (30.0, 120.0, 1800.0, 7200.0):
        res = simulate_run(run, "spot", spot=replace(spot, notice_s=notice_s),
                           interval_s=run.work_s, trials=200, seed=4)
        k = res.samples.preemptions
        assert np.allclose(res.samples.wall_s, run.work_s + k * (30.0 + 600.0))
        walls.append(res.wall_s.mean)
    # a preemption within the last notice of the run is none: the job finishes first
    assert walls == sorted(walls, reverse=True) and walls[-1] < walls[0]


def test_a_notice_too_short_for_a_durable_copy_loses_the_work_since_the_checkpoint():
    """Same interval, notice 30 s vs 29.9 s against C + w = 30 s. With rate x cycle ~0.02
    the preemption falls uniformly in the cycle L = tau + C: it loses r in compute, plus tau
    within w of a snapshot's end (not yet durable) or during the blocking copy, so
    (tau^2 / 2 + (C + w) tau) / L = 620 s per preemption on average."""
    run = job(None, checkpoint_s=20.0, checkpoint_write_s=10.0, work_s=200 * HOUR)
    spot = SpotModel(preemption_rate_per_node_s=1 / (2000 * HOUR), capacity_wait_mean_s=0.0,
                     notice_s=30.0)
    saved = simulate_run(run, "spot", spot=spot, interval_s=1200.0, trials=400, seed=4)
    lost = simulate_run(run, "spot", spot=replace(spot, notice_s=29.9), interval_s=1200.0,
                        trials=400, seed=4)
    tau, cycle = 1200.0, 1220.0
    loss_s = (tau**2 / 2 + 30.0 * tau) / cycle
    per_preemption_s = (lost.wall_s.mean - saved.wall_s.mean) / lost.preemptions.mean
    assert per_preemption_s == pytest.approx(loss_s, rel=0.15)
    # and Daly's interval now counts the preemptions as losses
    assert simulate_run(run, "spot", spot=replace(spot, notice_s=29.9), trials=1).interval_s \
        < run.work_s


def test_a_shrunk_job_trains_at_the_reserved_share_of_full_speed():
    """No failures, no checkpoints, notice enough to save: a preemption costs the emergency
    checkpoint C + w that ends the notice (the job trains through the rest of it) + R, then
    a wait Y (mean 2 h) training at B / N = 1/2 speed (Y / 2 lost), then a planned
    checkpoint C + w and the spot restart: 60 + 60 + 3600 + 60 + 600 = 4,380 s. The run may
    end inside a shrunk stretch, so a little less on average."""
    run = job(None, work_s=200 * HOUR, checkpoint_s=60.0, restart_s=60.0)
    spot = SpotModel(preemption_rate_per_node_s=10 / (64 * 200 * HOUR), notice_s=120.0,
                     capacity_wait_mean_s=2 * HOUR, restart_s=600.0)
    half = simulate_run(run, "reserved_plus_spot", spot=spot, reserved_gpus=512,
                        reserved_usd_per_gpu_hour=2.0, trials=400, seed=8)
    assert half.interval_s == run.work_s
    per_preemption_s = (half.wall_s.mean - run.work_s) / half.preemptions.mean
    assert per_preemption_s == pytest.approx(4380, rel=0.1)
    # spot GPUs are not billed while gone: for R and the wait Y (mean 2 h), per preemption
    spot_usd_per_s = 512 * spot.price_usd_per_gpu_hour(4.0) / HOUR
    held_s = (half.samples.cost_usd - 512 * 2.0 / HOUR * half.samples.wall_s) / spot_usd_per_s
    unbilled_s = (half.samples.wall_s - held_s).sum() / half.samples.preemptions.sum()
    assert unbilled_s == pytest.approx(60 + 2 * HOUR, rel=0.1)

    # capacity back at once: exactly (C + w) + R + (C + w) + spot restart per preemption,
    # and the spot GPUs billed for all of it but R
    back = simulate_run(run, "reserved_plus_spot", spot=replace(spot, capacity_wait_mean_s=0),
                        reserved_gpus=512, reserved_usd_per_gpu_hour=2.0, trials=50, seed=8)
    k = back.samples.preemptions
    assert k.mean() > 5
    assert np.allclose(back.samples.wall_s, run.work_s + k * (60 + 60 + 60 + 600))
    assert np.allclose(back.samples.cost_usd, 512 * 2.0 / HOUR * back.samples.wall_s
                       + spot_usd_per_s * (back.samples.wall_s - 60 * k))


def test_a_shrunk_job_fails_at_the_rate_of_its_reserved_gpus():
    """Preempted within seconds, capacity never back: the run trains on B = N / 4 GPUs, whose
    failure rate is B r, a quarter of the job's. Failures strike only while running, so
    E[K] = B r E[up], up = wall - K R - notice - R."""
    run = job(5 * HOUR, work_s=50 * HOUR, restart_s=60.0)
    spot = SpotModel(preemption_rate_per_node_s=1 / (96 * 60.0), notice_s=120.0,
                     capacity_wait_mean_s=1e12)
    stuck = simulate_run(run, "reserved_plus_spot", spot=spot, reserved_gpus=256,
                         reserved_usd_per_gpu_hour=2.0, trials=200, seed=12)
    assert np.all(stuck.samples.preemptions == 1)
    k = stuck.samples.failures
    up_s = stuck.samples.wall_s - 60.0 * k - 120.0 - 60.0
    assert k.sum() / up_s.sum() == pytest.approx(256 / 1024 / (5 * HOUR), rel=0.1)
    # the spot GPUs were billed only until they went: ~60 s of running and the notice
    spot_usd_per_s = 768 * spot.price_usd_per_gpu_hour(4.0) / HOUR
    held_s = (stuck.samples.cost_usd - 256 * 2.0 / HOUR * stuck.samples.wall_s) / spot_usd_per_s
    assert held_s.mean() == pytest.approx(60 + 120, rel=0.1)


def test_failures_and_preemptions_split_by_their_rates():
    run = job(10 * HOUR, work_s=100 * HOUR, num_gpus=64)  # 8 nodes
    spot = SpotModel(preemption_rate_per_node_s=1 / (8 * 10 * HOUR), capacity_wait_mean_s=0)
    result = simulate_run(run, "spot", spot=spot, trials=200, seed=3)
    ratio = result.samples.failures.sum() / result.samples.preemptions.sum()
    assert ratio == pytest.approx(1.0, rel=0.1)  # equal rates over the same running time


def test_async_lag_loses_more_than_a_synchronous_write():
    kwargs = {"work_s": 300 * HOUR, "checkpoint_s": 30.0, "restart_s": 60.0}
    sync = simulate_run(job(2 * HOUR, **kwargs), interval_s=1200.0, trials=300, seed=6)
    lagged = simulate_run(job(2 * HOUR, checkpoint_write_s=600.0, **kwargs),
                          interval_s=1200.0, trials=300, seed=6)
    # a failure in the 600 s after a snapshot (a share 600 / 1230 of the cycle) loses a
    # whole extra interval: (600 / 1230) x 1200 s = 585 s more per failure, ~150 failures
    extra_per_failure = (lagged.wall_s.mean - sync.wall_s.mean) / sync.interruptions.mean
    assert extra_per_failure == pytest.approx(600 / 1230 * 1200, rel=0.25)


@pytest.mark.parametrize("make,field", [
    (lambda: SpotModel(preemption_rate_per_node_s=-1e-6), "preemption_rate_per_node_s"),
    (lambda: SpotModel(discount=1.2), "discount"),
    (lambda: SpotModel(notice_s=-1), "notice_s"),
    (lambda: SpotModel(capacity_wait_mean_s=float("nan")), "capacity_wait_mean_s"),
    (lambda: job(None, num_gpus=0), "num_gpus"),
    (lambda: job(None, checkpoint_s=0), "checkpoint_s"),
    (lambda: job(None, work_s=-5), "work_s"),
    (lambda: TrainingRun(work_s=1, num_gpus=8, checkpoint_s=1, restart_s=1,
                         on_demand_usd_per_gpu_hour=1,
                         failures=FailureModel(-1e-9, "bad")), "rate_per_gpu_s"),
    (lambda: simulate_run(job(None), interval_s=0), "interval_s"),
    (lambda: simulate_run(job(None), interval_s=-10), "interval_s"),
    (lambda: simulate_run(job(None), trials=0), "trials"),
    (lambda: simulate_run(job(None), "spto"), "strategy"),
    (lambda: simulate_run(job(None), "reserved_plus_spot", reserved_gpus=100,
                          reserved_usd_per_gpu_hour=1), "reserved_gpus"),
    (lambda: simulate_run(job(None), "reserved_plus_spot", reserved_gpus=64),
     "reserved_usd_per_gpu_hour"),
    (lambda: simulate_run(job(60.0), interval_s=1e5), "checkpoint more often"),
    (lambda: SpotModel.from_aws_band("5-10"), "5-10%"),
])
def test_bad_input_names_the_field(make, field):
    with pytest.raises(InputError) as error:
        make()
    assert field in str(error.value)


def test_spot_defaults_are_the_cited_figures():
    spot = SpotModel()
    assert spot.notice_s == AWS_NOTICE_S == 120
    # 15% of instances interrupted in a 30-day month: -ln(0.85) / 720 h per node-hour
    assert spot.preemption_rate_per_node_s * HOUR == pytest.approx(-math.log(0.85) / 720)
    assert spot.job_preemption_rate_per_s(2048) == pytest.approx(
        2048 * spot.preemption_rate_per_node_s)
    band = SpotModel.from_aws_band("<5%")
    assert band.preemption_rate_per_node_s == pytest.approx(rate_from_monthly_fraction(0.025))
    assert spot.price_usd_per_gpu_hour(10.0) == pytest.approx(4.0)


@settings(max_examples=40, deadline=None)
@given(mtbf_h=st.floats(0.5, 50), c=st.floats(1, 300), w=st.floats(0, 600),
       r=st.floats(0, 1800), work_h=st.floats(1, 40), tau_factor=st.floats(0.3, 3),
       notice=st.sampled_from([30.0, 120.0]), preempt_per_node_s=st.floats(0, 2e-5),
       strategy=st.sampled_from(["on_demand", "spot", "reserved_plus_spot"]),
       seed=st.integers(0, 2**31))
# an interval a rounding error short of dividing the work: 24 intervals, not 24 + a sliver
@example(mtbf_h=1.0, c=1.0, w=149.9999999999999, r=0.0, work_h=1.0, tau_factor=1.0,
         notice=30.0, preempt_per_node_s=0.0, strategy="on_demand", seed=0)
# a failure, then a preemption whose notice holds the rest of the run: 3,799.3 s against
# 3,802 s without interruptions (the notice's 4 routine checkpoints are not taken)
@example(mtbf_h=0.5, c=1.0, w=0.0, r=0.0, work_h=1.0, tau_factor=0.3, notice=120.0,
         preempt_per_node_s=4.330956739639903e-06, strategy="spot", seed=1607728)
def test_invariants(mtbf_h, c, w, r, work_h, tau_factor, notice, preempt_per_node_s, strategy,
                    seed):
    """Wall time never beats the failure-free run: W plus a checkpoint per full interval
    (a save in a notice costs at least C too; a shrunk job is slower still). A longer restart
    adds exactly R per interruption: interruptions strike only while the job runs, so the
    same seed meets the same ones."""
    run = job(mtbf_h * HOUR, num_gpus=64, work_s=work_h * HOUR, checkpoint_s=c,
              checkpoint_write_s=w, restart_s=r)
    spot = SpotModel(preemption_rate_per_node_s=preempt_per_node_s, notice_s=notice,
                     capacity_wait_mean_s=1800)
    tau = max(tau_factor * daly_interval_s(c, mtbf_h * HOUR), w)
    options = {"spot": spot, "reserved_gpus": 32, "reserved_usd_per_gpu_hour": 3.0,
               "interval_s": tau, "trials": 30, "seed": seed}
    result = simulate_run(run, strategy, **options)
    walls = result.samples.wall_s
    # checkpoints after every full interval but the last; a remainder under 1e-12 of an
    # interval is rounding, not another interval (as montecarlo.py counts them). A run
    # that finishes inside a preemption's notice trains through it with no checkpoint (its
    # emergency save is not needed): the routine ones of that last notice's compute, up to
    # notice - C - w of it, are not taken
    skipped = math.ceil((notice - c - w) / tau) if strategy != "on_demand" \
        and notice >= c + w else 0
    floor_s = run.work_s + max(math.ceil(run.work_s * (1 - 1e-12) / tau) - 1 - skipped, 0) * c
    assert np.all(walls >= floor_s * (1 - 1e-9))
    assert np.all((result.samples.cost_usd > 0) & np.isfinite(walls))
    if strategy == "on_demand":
        slower = simulate_run(job(mtbf_h * HOUR, num_gpus=64, work_s=work_h * HOUR,
                                  checkpoint_s=c, checkpoint_write_s=w, restart_s=r + 100),
                              strategy, **options)
        interruptions = result.samples.failures
        assert np.array_equal(slower.samples.failures, interruptions)
        assert np.allclose(slower.samples.wall_s - walls, 100 * interruptions)


@pytest.mark.parametrize("provider, notice_s, whose", [
    ("aws", 120, "aws's"), ("gcp", 30, "gcp's"), ("azure", 30, "azure's"),
    ("nebius", 120, "AWS's (the catalog has no spot notice for nebius)"),
    (None, 120, "AWS's")])
def test_the_spot_notice_is_the_providers(provider, notice_s, whose):
    """Data, not code: catalog/data/reliability.yaml's spot-notice-<provider> rows, each
    with its source; a given run.spot.notice_s wins."""
    from infraplan.catalog import load_catalog
    from infraplan.reliability.run_spec import SpotSpec
    from infraplan.reliability.spot import provider_notice

    assert provider_notice(provider) == (notice_s, whose)
    assert SpotSpec().model(1.0, provider).notice_s == notice_s
    assert SpotSpec().basis(provider)["notice"] == whose
    assert SpotSpec(notice_s=45).model(1.0, provider).notice_s == 45
    assert SpotSpec(notice_s=45).basis(provider)["notice"] == "run.spot.notice_s"
    assert load_catalog().reliability.get("spot-notice-aws").value == AWS_NOTICE_S
    for name in ("spot-notice-aws", "spot-notice-gcp", "spot-notice-azure"):
        assert load_catalog().reliability.get(name).unit == "seconds"
