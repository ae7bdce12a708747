"""A scan steps its intervals as one array (s63): the same draws, so the same samples as
one interval at a time, whatever the strategy, the group size or the trial count."""

from __future__ import annotations

import pytest

from infraplan.reliability import montecarlo
from infraplan.reliability.failures import from_rate
from infraplan.reliability.montecarlo import TrainingRun, simulate_run
from infraplan.reliability.spot import SpotModel

DAY_S = 86400.0


def _busy_run() -> TrainingRun:
    """64 GPUs failing once a GPU-hour each: a failure every 56 s, ~1,000 per trial."""
    return TrainingRun(work_s=0.2 * DAY_S, num_gpus=64, checkpoint_s=0.5,
                       checkpoint_write_s=2.0, restart_s=30.0,
                       on_demand_usd_per_gpu_hour=3.0,
                       failures=from_rate(1.0, name="test"))


@pytest.mark.parametrize("strategy", ["on_demand", "spot", "reserved_plus_spot"])
@pytest.mark.parametrize("group", [1, 7, montecarlo.GROUP_ELEMENTS])
def test_a_scan_draws_what_each_interval_draws_alone(monkeypatch, strategy, group):
    run, spot = _busy_run(), SpotModel.from_aws_band(">20%")
    options = dict(spot=spot, reserved_gpus=32, reserved_usd_per_gpu_hour=2.0, trials=7,
                   seed=3)
    monkeypatch.setattr(montecarlo, "GROUP_ELEMENTS", group)  # 1 and 7: one interval a group
    scan = simulate_run(run, strategy, optimise_interval=True, **options).scan
    alone = [simulate_run(run, strategy, interval_s=float(t), **options)
             for t in scan.intervals_s]
    assert scan.mean_wall_s.tolist() == [r.wall_s.mean for r in alone]
    assert len(set(scan.mean_wall_s.tolist())) > 5  # the intervals do differ


def test_a_scan_steps_its_intervals_together_not_one_by_one(monkeypatch):
    """The event loop runs once per group of intervals: 25 intervals at 20 trials are one
    group (GROUP_ELEMENTS), so the loop's steps are one interval's, not 25 x."""
    calls = []
    real = montecarlo._simulate_group

    def counted(run, mode, taus, trials, seed):
        calls.append(len(taus))
        return real(run, mode, taus, trials, seed)

    monkeypatch.setattr(montecarlo, "_simulate_group", counted)
    simulate_run(_busy_run(), optimise_interval=True, trials=20)
    assert calls == [25]
    calls.clear()
    simulate_run(_busy_run(), optimise_interval=True, trials=10_000)
    assert calls == [6, 6, 6, 6, 1]  # 65,536 // 10,000 intervals a group
