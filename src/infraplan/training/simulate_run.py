"""`simulate train`: the whole run of the best plan under failures and spot preemptions.

The planner gives the steady-state step (no failures); this module turns it into a run:
work W = tokens / tokens-per-second of failure-free compute, checkpoints of the model and
optimizer state written to the scenario's storage tier (reliability/checkpoint.py), the
interruption rate of a job of that size (reliability/failures.py, from Llama 3 405B), and
spot capacity (reliability/spot.py); reliability/montecarlo.py draws the run `trials` times
per pricing strategy, each at its best checkpoint interval, and reports wall time, goodput
and compute cost as distributions.

Restart after a failure = detection (run.failure_detection_s, reliability/run_spec.py) +
the checkpoint read from the storage tier.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from infraplan.catalog import load_catalog
from infraplan.economics.offers import price_per_gpu_hour as offer_price
from infraplan.economics.spec import price_per_gpu_hour
from infraplan.errors import InputError
from infraplan.models import load_model, param_counts
from infraplan.physics import hardware
from infraplan.reliability.checkpoint import CheckpointPlan, plan_checkpoints, transfer_time_s
from infraplan.reliability.failures import llama3_failure_model
from infraplan.reliability.montecarlo import RunDistribution, TrainingRun, simulate_run
from infraplan.training.evaluate import PlanResult

@dataclass(frozen=True)
class RunSimulation:
    plan: PlanResult
    checkpoint: CheckpointPlan
    work_s: float
    restart_s: float
    mtbf_s: float
    strategies: dict[str, RunDistribution]
    prices_usd_per_gpu_hour: dict[str, float]

    def to_json(self) -> dict:
        def stat(s):
            return {"p50": s.p50, "p90": s.p90, "mean": s.mean}

        out = {}
        for name, d in self.strategies.items():
            out[name] = {"interval_s": d.interval_s, "interval_source": d.interval_source,
                         "wall_s": stat(d.wall_s), "goodput": stat(d.goodput),
                         "cost_usd": stat(d.cost_usd), "interruptions": stat(d.interruptions),
                         "preemptions": stat(d.preemptions), "trials": d.trials,
                         "seed": d.seed}
            if d.scan is not None:
                out[name]["scan"] = {"intervals_s": d.scan.intervals_s.tolist(),
                                     "mean_goodput": d.scan.mean_goodput.tolist(),
                                     "daly_interval_s": d.scan.daly_interval_s}
        cp = self.checkpoint
        return {"plan": self.plan.to_json(), "work_s": self.work_s,
                "restart_s": self.restart_s, "job_mtbf_s": self.mtbf_s,
                "checkpoint": {"size_bytes": cp.size_bytes, "blocking_s": cp.blocking_s,
                               "write_s": cp.write_s, "daly_interval_s": cp.interval_s},
                "prices_usd_per_gpu_hour": self.prices_usd_per_gpu_hour, "strategies": out}


def simulate_training_run(scenario, plan: PlanResult, progress=None) -> RunSimulation:
    """Monte-Carlo runs of `plan` (the planner's best for `scenario`, a TrainScenario)."""
    run = scenario.run
    if scenario.training.tokens is None or plan.tokens_per_s <= 0:
        raise InputError("simulate train needs training.tokens")
    arch = load_model(scenario.model)
    gpu, n = plan.accelerator, plan.plan.num_gpus
    per_node = hardware.cluster(gpu).system.accelerators_per_node
    nodes = math.ceil(n / per_node)
    tier = load_catalog().storage.get(run.checkpoint_storage)
    failures = llama3_failure_model()
    mtbf = failures.job_mtbf_s(n)
    params = param_counts(arch).total
    cp = plan_checkpoints(params, tier, nodes=nodes, num_gpus=n, mtbf_s=mtbf,
                          asynchronous=run.asynchronous, precision=scenario.training.precision,
                          optimizer_name=scenario.training.optimizer)
    restart = run.failure_detection_s + transfer_time_s(cp.size_bytes, tier, nodes,
                                                        write=False)
    on_demand = price_per_gpu_hour(gpu, prices=scenario.prices, pricing="on_demand")
    work = scenario.training.tokens / plan.tokens_per_s
    training_run = TrainingRun.from_checkpoint_plan(
        cp, asynchronous=run.asynchronous, work_s=work, num_gpus=n, restart_s=restart,
        on_demand_usd_per_gpu_hour=on_demand, gpus_per_node=per_node, failures=failures)
    spot = run.spot.model(gpu)
    prices = {"on_demand": on_demand, "spot": spot.price_usd_per_gpu_hour(on_demand)}
    reserved_gpus, reserved_price = 0, None
    if "reserved_plus_spot" in run.strategies:
        if run.reserved is None:
            raise InputError("run.strategies has reserved_plus_spot but run.reserved is "
                             "missing", fix="add run.reserved: {gpus: 64}")
        reserved_gpus = run.reserved.gpus
        if reserved_gpus > n:
            raise InputError(f"run.reserved.gpus = {reserved_gpus} exceeds the plan's {n} GPUs")
        reserved_price = run.reserved.usd_per_gpu_hour or _reserved_offer(gpu)
        prices["reserved"] = reserved_price
    results = {}
    for done, name in enumerate(run.strategies):
        if progress:
            progress(done, len(run.strategies))
        results[name] = simulate_run(training_run, name, spot=spot, reserved_gpus=reserved_gpus,
                                     reserved_usd_per_gpu_hour=reserved_price,
                                     optimise_interval=run.optimise_interval,
                                     trials=run.trials, seed=run.seed)
    return RunSimulation(plan=plan, checkpoint=cp, work_s=work, restart_s=restart, mtbf_s=mtbf,
                         strategies=results, prices_usd_per_gpu_hour=prices)


def _reserved_offer(gpu: str) -> float:
    try:
        return offer_price(gpu, "reserved-1y")
    except InputError:
        raise InputError(f"no 1-year reserved offer for {gpu} in the catalog",
                         fix="give run.reserved.usd_per_gpu_hour") from None
