"""simulate train: the best plan's run drawn under failures and spot preemptions."""

from __future__ import annotations

import json

import pytest

from infraplan.cli import main
from infraplan.errors import InputError
from infraplan.training.plan_train import plan_training
from infraplan.training.simulate_run import simulate_training_run
from infraplan.workloads import TrainScenario

BASE = {"model": "megatron-gpt-1.7b",
        "training": {"tokens": 2e11, "global_batch": 512, "seq_len": 2048},
        "hardware": {"gpus": ["h100"], "counts": [64]}, "prices": {"h100": 3.0}}


def _scenario(**run) -> TrainScenario:
    return TrainScenario.model_validate({**BASE, "run": {"trials": 200, **run}})


def test_run_is_the_plans_work_billed_at_its_prices():
    scenario = _scenario(strategies=["on_demand", "spot"], spot={"discount": 0.5,
                                                                 "usd_per_gpu_hour": 1.5})
    plan = plan_training(scenario).best[0]
    sim = simulate_training_run(scenario, plan)
    assert sim.work_s == pytest.approx(2e11 / plan.tokens_per_s)
    od, spot = sim.strategies["on_demand"], sim.strategies["spot"]
    # on-demand bills every GPU for the whole wall time
    assert od.samples.cost_usd == pytest.approx(od.samples.wall_s * 64 * 3.0 / 3600)
    assert all(0 < g <= 1 for g in (od.goodput.p50, spot.goodput.p50))
    assert od.wall_s.p50 >= sim.work_s
    assert sim.prices_usd_per_gpu_hour == {"on_demand": 3.0, "spot": 1.5}
    again = simulate_training_run(scenario, plan)
    assert (again.strategies["spot"].samples.wall_s == spot.samples.wall_s).all()


def test_reserved_baseline_needs_its_size_and_price():
    plan = plan_training(_scenario()).best[0]
    with pytest.raises(InputError, match="run.reserved is missing"):
        simulate_training_run(_scenario(), plan)
    with pytest.raises(InputError, match="exceeds the plan's 64 GPUs"):
        simulate_training_run(_scenario(reserved={"gpus": 65, "usd_per_gpu_hour": 2}), plan)
    sim = simulate_training_run(_scenario(reserved={"gpus": 32, "usd_per_gpu_hour": 2.0}),
                                plan)
    assert set(sim.strategies) == {"on_demand", "spot", "reserved_plus_spot"}
    assert sim.prices_usd_per_gpu_hour["reserved"] == 2.0


def test_simulate_train_cli(tmp_path, capsys):
    import yaml

    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({**BASE, "run": {"trials": 100, "strategies": ["spot"],
                                                    "spot": {"advisor_band": "<5%"}}}))
    assert main(["simulate", "train", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["strategies"]) == {"spot"}
    assert data["strategies"]["spot"]["trials"] == 100
    assert main(["simulate", "train", str(path)]) == 0
    assert "goodput vs checkpoint interval" in capsys.readouterr().out
    path.write_text(yaml.safe_dump({**BASE, "run": {"strategies": ["spto"]}}))
    assert main(["simulate", "train", str(path)]) == 2
    err = capsys.readouterr().err
    assert "run.strategies" in err and err.count("\n") == 1
