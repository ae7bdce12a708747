"""`simulate train`: the whole run of the best plan under failures and spot preemptions.

The planner gives the steady-state step (no failures); this module turns it into a run:
work W = tokens / tokens-per-second of failure-free compute, checkpoints of the model and
optimizer state written to the scenario's storage tier (reliability/checkpoint.py), the
interruption rate of a job of that size (reliability/failures.py: run.failures_per_gpu_hour,
else the Llama 3 405B run's), and
spot capacity (reliability/spot.py); reliability/montecarlo.py draws the run `trials` times
per pricing strategy, each at its best checkpoint interval, and reports wall time, goodput
and compute cost as distributions.

Restart after a failure = detection (run.failure_detection_s, reliability/run_spec.py) +
the checkpoint read from the storage tier. `run_setup` derives the checkpoint plan, its tier,
the job MTBF and the restart time; the HTML report's Yield plan reads the same call, so the
two cannot disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from infraplan.catalog import load_catalog
from infraplan.catalog.schema import StorageTier
from infraplan.economics.instances import rent, training_footprint
from infraplan.economics import spec
from infraplan.errors import InputError
from infraplan.models import load_model, param_counts
from infraplan.physics import hardware
from infraplan.reliability.checkpoint import (
    CheckpointPlan,
    checkpoint_bytes,
    plan_checkpoints,
    transfer_time_s,
)
from infraplan.reliability.failures import HOUR_S, FailureModel
from infraplan.reliability.montecarlo import RunDistribution, TrainingRun, simulate_run
from infraplan.reliability.outcomes import Commitment, Stat
from infraplan.reliability.run_spec import spot_provider
from infraplan.reliability.spot import MONTH_S
from infraplan.training.evaluate import PlanResult, evaluate_plan
from infraplan.training.memory import training_memory
from infraplan.training.plan_train import (node_types, plan_training, scenario_job,
                                          unused_price_notes)
from infraplan.training.search import node_for
from infraplan.units import GiB, format_usd_rate, run_length

@dataclass(frozen=True)
class RunSetup:
    """What failures cost a plan: where its checkpoints go, what they cost, how often the
    job is interrupted and how long a restart takes."""

    tier: StorageTier
    nodes: int
    gpus_per_node: int
    failures: FailureModel
    failures_given: bool  # run.failures_per_gpu_hour, not the default (Llama 3 405B's)
    mtbf_s: float  # the job's mean time between interruptions
    checkpoint: CheckpointPlan  # its interval (Daly's or the write) and first-order waste
    restart_s: float  # run.failure_detection_s + reading the checkpoint back
    asynchronous: bool


def run_setup(scenario, plan: PlanResult, arch=None) -> RunSetup:
    """The checkpoint plan, tier, job MTBF and restart time of `plan` under `scenario`'s
    run: block (tier: TrainScenario.checkpoint_tier). `arch`: the model's architecture when
    it is not in the catalog (an uploaded config.json); default: load_model(scenario.model)."""
    run, training = scenario.run, scenario.training
    n = plan.plan.num_gpus
    per_node = hardware.cluster(plan.accelerator,
                                scenario.hardware.system).system.accelerators_per_node
    nodes = math.ceil(n / per_node)
    tier = load_catalog().storage.get(scenario.checkpoint_tier)
    failures = run.failure_model()
    mtbf = failures.job_mtbf_s(n)
    params = param_counts(arch or load_model(scenario.model)).total
    size = checkpoint_bytes(params, precision=plan.precision,
                            optimizer_name=training.optimizer)
    restart = run.failure_detection_s + transfer_time_s(size, tier, nodes, write=False)
    cp = plan_checkpoints(params, tier, nodes=nodes, num_gpus=n, mtbf_s=mtbf, restart_s=restart,
                          asynchronous=run.asynchronous, precision=plan.precision,
                          optimizer_name=training.optimizer)
    return RunSetup(tier=tier, nodes=nodes, gpus_per_node=per_node, failures=failures,
                    failures_given=run.failures_per_gpu_hour is not None, mtbf_s=mtbf,
                    checkpoint=cp, restart_s=restart, asynchronous=run.asynchronous)


@dataclass(frozen=True)
class RunSimulation:
    plan: PlanResult
    setup: RunSetup
    work_s: float
    strategies: dict[str, RunDistribution]
    prices_usd_per_gpu_hour: dict[str, float]
    price_sources: dict[str, str]  # where each price came from, for the reader
    reserved_notes: tuple[str, ...] = ()  # what the reserved GPUs alone run (check_reserved_pool)
    spot_terms: dict | None = None  # the spot capacity's notice, rate and whose they are
    commitment: str = ""  # the reserved GPUs' term beside the run's share of it (_commitment)
    term: Commitment | None = None  # the reserved GPUs' whole term, in dollars (_commitment)
    price_notes: tuple[str, ...] = ()  # prices: keyed by a GPU not compared, as plan train's

    @property
    def checkpoint(self) -> CheckpointPlan:
        return self.setup.checkpoint

    @property
    def restart_s(self) -> float:
        return self.setup.restart_s

    @property
    def mtbf_s(self) -> float:
        return self.setup.mtbf_s

    @property
    def notes(self) -> list[str]:
        return [*self.price_notes, *self.reserved_notes,
                *([self.commitment] if self.commitment else []),
                *([self.plan_train_note] if self.plan_train_note else [])]

    @property
    def plan_train_note(self) -> str | None:
        """How plan train's time to train relates to these runs: it divides the same
        work by a fixed run goodput measured at 16,384 GPUs, which also covers stops this
        simulation does not draw (evaluation, slow nodes, manual restarts)."""
        if self.plan.time_to_train_s is None:
            return None
        goodput = hardware.calibration("run-goodput")
        return (f"plan train's time to train, {run_length(self.plan.time_to_train_s)}, is "
                f"this work over a {goodput:.0%} run goodput (Llama 3 405B's run on 16,384 "
                "GPUs: restarts, checkpoints, evaluation and other stops); the runs here "
                "draw only this job's failures, preemptions and checkpoints")

    def to_json(self) -> dict:
        """Each distribution as its median, mean and bad tail: p90 of wall time, cost and
        interruptions (1 trial in 10 is longer, dearer, more interrupted), p10 of goodput
        (1 in 10 is lower), so that the tail shown is always the one to plan for."""
        def high(s):
            return {"p50": s.p50, "p90": s.p90, "mean": s.mean}

        out = {}
        for name, d in self.strategies.items():
            out[name] = {"interval_s": d.interval_s, "interval_source": d.interval_source,
                         "daly_interval_s": d.daly_interval_s, "wall_s": high(d.wall_s),
                         "goodput": {"p10": d.goodput.p10, "p50": d.goodput.p50,
                                     "mean": d.goodput.mean},
                         "cost_usd": high(d.cost_usd), "interruptions": high(d.interruptions),
                         "preemptions": high(d.preemptions), "trials": d.trials,
                         "seed": d.seed}
            if d.scan is not None:
                out[name]["scan"] = {"intervals_s": d.scan.intervals_s.tolist(),
                                     "mean_goodput": d.scan.mean_goodput.tolist(),
                                     "daly_interval_s": d.scan.daly_interval_s,
                                     "upload_s": d.scan.upload_s}
        cp = self.checkpoint
        return {"plan": self.plan.to_json(), "work_s": self.work_s,
                "restart_s": self.restart_s, "job_mtbf_s": self.mtbf_s,
                "failures": {"per_gpu_hour": self.setup.failures.rate_per_gpu_s * HOUR_S,
                             "derivation": self.setup.failures.derivation},
                "checkpoint": {"storage_tier": self.setup.tier.name,
                               "asynchronous": self.setup.asynchronous,
                               "size_bytes": cp.size_bytes, "blocking_s": cp.blocking_s,
                               "write_s": cp.write_s, "daly_interval_s": cp.daly_interval_s},
                # no interval here: each strategy's interval_s is the one its runs used (an
                # 'interval_s' of Daly's here was read as theirs)
                "prices_usd_per_gpu_hour": self.prices_usd_per_gpu_hour,
                "price_sources": self.price_sources, "spot": self.spot_terms,
                "strategies": out,
                "commitment": self.term.to_json() if self.term else None,
                "notes": self.notes}


def simulate_training_run(scenario, plan: PlanResult | None = None, progress=None, arch=None
                          ) -> RunSimulation:
    """Monte-Carlo runs of `plan` (by default the planner's best for `scenario`, a
    TrainScenario, as `infraplan simulate train` takes it); `arch` as in run_setup."""
    if plan is None:
        plan = plan_training(scenario, arch=arch).best[0]
    elif not isinstance(plan, PlanResult):
        raise InputError(f"plan must be a PlanResult (one of plan_training(...).best), got "
                         f"{type(plan).__name__}", fix="pass plan_training(scenario).best[0], "
                                                       "or leave plan out for the best one")
    run = scenario.run
    if scenario.training.tokens is None or plan.tokens_per_s <= 0:
        raise InputError("simulate train needs training.tokens")
    gpu, n = plan.accelerator, plan.plan.num_gpus
    setup = run_setup(scenario, plan, arch)
    prices, sources, spot, spot_terms, reserved_gpus = _prices(scenario, gpu, n,
                                                               setup.gpus_per_node)
    reserved_notes = (check_reserved_pool(scenario, plan, reserved_gpus, setup.gpus_per_node,
                                          arch) if reserved_gpus else [])
    work = scenario.training.tokens / plan.tokens_per_s
    training_run = TrainingRun.from_checkpoint_plan(
        setup.checkpoint, asynchronous=run.asynchronous, work_s=work, num_gpus=n,
        restart_s=setup.restart_s, on_demand_usd_per_gpu_hour=prices["on_demand"],
        gpus_per_node=setup.gpus_per_node, failures=setup.failures)
    results = {}
    for done, name in enumerate(run.strategies):
        if progress:
            progress(done, len(run.strategies))
        results[name] = simulate_run(training_run, name, spot=spot, reserved_gpus=reserved_gpus,
                                     reserved_usd_per_gpu_hour=prices.get("reserved"),
                                     optimise_interval=run.optimise_interval,
                                     trials=run.trials, seed=run.seed)
    commitment, term = _commitment(scenario, sources["reserved"], reserved_gpus,
                                   prices["reserved"], results["reserved_plus_spot"]) \
        if reserved_gpus else ("", None)
    return RunSimulation(plan=plan, setup=setup, work_s=work, strategies=results,
                         prices_usd_per_gpu_hour=prices, price_sources=sources,
                         reserved_notes=tuple(reserved_notes), spot_terms=spot_terms,
                         commitment=commitment, term=term,
                         price_notes=tuple(unused_price_notes(scenario)))


def _commitment(scenario, source: str, reserved: int, usd_per_gpu_hour: float, run
                ) -> tuple[str, Commitment]:
    """The reserved GPUs' term beside the run's share of it (spec.commitment_note): the
    strategy's cost counts only the hours the run holds them; and the term in dollars
    (Commitment). The term is the scenario's pricing when its prices: gave the reserved
    price, else a year (the catalog's offer is reserved-1y; run.reserved.usd_per_gpu_hour
    names no term, so one year is assumed)."""
    from infraplan.economics.tco import HOURS_PER_YEAR

    own = source.startswith("the scenario's") and scenario.pricing in spec.TERM_YEARS
    term = scenario.pricing if own else "reserved-1y"
    assumed = " (taken as a 1-year price)" if source == "run.reserved.usd_per_gpu_hour" else ""
    hours = reserved * run.wall_s.p50 / HOUR_S
    years = spec.TERM_YEARS[term]
    term_s = years * HOURS_PER_YEAR * HOUR_S
    committed = spec.commitment_usd(term, reserved, usd_per_gpu_hour)
    wall = run.samples.wall_s
    with_term = (run.samples.cost_usd + committed
                 - reserved * usd_per_gpu_hour * np.minimum(wall, term_s) / HOUR_S)
    return ("reserved + spot burst" + assumed + ": " + spec.commitment_note(
        term, reserved, usd_per_gpu_hour, hours, what="of the reserved GPUs the median run holds",
        counts="its cost p50 counts")), Commitment(reserved, years, usd_per_gpu_hour,
                                                  committed, Stat.of(with_term))


def check_reserved_pool(scenario, plan: PlanResult, reserved: int, per_node: int,
                        arch=None) -> list[str]:
    """With its spot GPUs gone, reserved_plus_spot trains on the reserved ones alone by
    shrinking data parallelism (montecarlo.py): they must hold whole model replicas (TP x
    PP x CP GPUs each) that split the global batch, with the model's states in memory at
    the smaller DP, over which ZeRO shards them (more per GPU). A smaller micro-batch,
    selective or full recompute may make room: the fastest that fits is named, with its
    speed against the B / N of full speed modelled; an error when none fits."""
    p = plan.plan
    replica = p.tp * p.pp * p.cp
    unit = math.lcm(replica, per_node)  # whole replicas on whole nodes
    near = max(unit, round(p.num_gpus / 2 / unit) * unit)
    fix = (f"reserve a multiple of {unit} GPUs (whole {replica}-GPU replicas on whole "
           f"{per_node}-GPU nodes; {near} is about half the plan), or drop reserved_plus_spot")
    what = f"run.reserved.gpus = {reserved}: with the spot GPUs gone the job trains on these"
    if reserved % replica:
        raise InputError(f"{what} alone, but they are not a whole number of model replicas: "
                         f"the plan ({p.describe()}) spreads one over {replica} GPUs", fix=fix)
    if reserved == p.num_gpus:
        return []
    model = arch or load_model(scenario.model)
    job = scenario_job(scenario).on(hardware.cluster(plan.accelerator,
                                                     scenario.hardware.system).gpu)
    shrunk = replace(p, dp=reserved // replica)
    try:  # a shrunk plan that cannot run at all (EP no longer divides DP x CP, ...)
        mem = training_memory(model, plan.accelerator, shrunk, job.memory_options(),
                              global_batch=job.global_batch)
    except InputError as exc:
        raise InputError(f"{what} as {shrunk.describe()}, which cannot run: "
                         f"{exc.message}", fix=fix) from None
    if mem.fits:
        return []
    system = node_for(node_types(scenario), plan.accelerator, scenario.hardware.gpus)
    fallbacks = [r for r in (evaluate_plan(model, plan.accelerator, job, c, system=system)
                             for c in _fallbacks(shrunk)) if r.fits]
    if fallbacks:
        best = min(fallbacks, key=lambda r: r.step_s)
        c = best.plan
        took = [f"{c.recompute} recompute"] * (c.recompute_code != p.recompute_code) \
            + [f"micro-batch {c.micro_batch}"] * (c.micro_batch != p.micro_batch)
        pace = best.tokens_per_s / (plan.tokens_per_s * reserved / p.num_gpus)
        return [f"the reserved {reserved} GPUs alone hold the model only with "
                f"{' and '.join(took)} ({c.describe()}, {best.memory_bytes / GiB:.1f} GiB per "
                f"GPU, the fastest change that fits): the spot-less stretches run at "
                f"{pace:.0%} of the {reserved}/{p.num_gpus} of full speed simulated"]
    sharding = (f"; ZeRO-{p.zero} shards the states over DP={shrunk.dp} instead of {p.dp}"
                if p.zero else "")
    smallest = replace(shrunk, micro_batch=1, recompute="full", recompute_fraction=1.0)
    mem = training_memory(model, plan.accelerator, smallest, job.memory_options(),
                          global_batch=job.global_batch)
    raise InputError(f"{what} as {smallest.describe()}, which needs "
                     f"{mem.total_bytes / GiB:.1f} GiB per GPU against "
                     f"{mem.capacity_bytes / GiB:.1f} GiB{sharding}", fix=fix)


def _fallbacks(shrunk):
    """What the reserved GPUs may change to hold the shrunk plan, cheapest kinds first: a
    smaller micro-batch (a divisor of the plan's, so the global batch still splits),
    selective then full recompute, and both."""
    mbs = [m for m in range(shrunk.micro_batch, 0, -1) if shrunk.micro_batch % m == 0]
    kinds = [k for k in ("none", "selective", "full")
             if ("none", "selective", "full").index(k) >= min(shrunk.recompute_code, 2)]
    tries = [replace(shrunk, micro_batch=m, recompute=k, recompute_fraction=1.0)
             for k in kinds for m in mbs]
    return [t for t in tries if t != shrunk]


def _prices(scenario, gpu: str, n: int, per_node: int):
    """(prices, their sources, the spot model, its terms and whose figures they are,
    reserved GPUs) of the strategies asked for: spot and reserved must each be below
    on-demand, or the strategy could never pay. Spot capacity is taken to be the provider's
    of the catalog's cheapest spot rental for the job (run_spec.spot_provider): its notice."""
    run = scenario.run
    # prices: is the price of the scenario's pricing: (as plan train bills it); the other
    # strategies' prices come from run: or the catalog
    own = spec.given_price(gpu, scenario.prices)
    given = {} if own is None else {scenario.pricing: own}
    label = f"the scenario's (prices:, pricing: {scenario.pricing})"
    # whole instances holding the job's GPUs up to a node, as plan train prices it
    footprint = training_footprint(n, per_node)
    if "on_demand" in given:
        on_demand, basis = given["on_demand"], label
    else:
        on_demand, basis = spec.priced(gpu, prices={}, pricing="on_demand",
                                       footprint=footprint)
    prices, sources = {"on_demand": on_demand}, {"on_demand": basis}
    spot, spot_terms = None, None
    if {"spot", "reserved_plus_spot"} & set(run.strategies):
        if "spot" in given and run.spot.usd_per_gpu_hour is None and run.spot.discount is None:
            prices["spot"], sources["spot"] = given["spot"], label
            if not given["spot"] < on_demand:
                raise InputError(f"prices: the spot price ${format_usd_rate(given['spot'])} is "
                                 f"not below on-demand ${format_usd_rate(on_demand)} ({basis})",
                                 fix="drop spot from run.strategies, or check the price")
        else:
            prices["spot"], sources["spot"] = run.spot.price(
                gpu, on_demand, scenario_priced="on_demand" in given, footprint=footprint)
        provider = spot_provider(gpu, footprint)
        spot = run.spot.model(prices["spot"], provider)
        rate = spot.preemption_rate_per_node_s
        spot_terms = {"provider": provider, "notice_s": spot.notice_s,
                      "monthly_interrupted_fraction": -math.expm1(-rate * MONTH_S),
                      "preemptions_per_node_hour": rate * HOUR_S,
                      "capacity_wait_mean_s": spot.capacity_wait_mean_s,
                      "restart_s": spot.restart_s, "gpu": gpu, **run.spot.basis(provider)}
    if "reserved_plus_spot" not in run.strategies:
        return prices, sources, spot, spot_terms, 0
    half = min(n, max(1, round(n / per_node / 2)) * per_node)  # half the GPUs, whole nodes
    if run.reserved is None:
        raise InputError("run.strategies has reserved_plus_spot but run.reserved is missing",
                         fix=f"add run.reserved: {{gpus: {half}}} (half of the plan's {n} "
                             "GPUs, in whole nodes), or drop reserved_plus_spot")
    reserved = run.reserved.gpus
    if reserved > n:
        raise InputError(f"run.reserved.gpus = {reserved} exceeds the plan's {n} GPUs",
                         fix=f"reserve at most {n}, e.g. run.reserved: {{gpus: {half}}}")
    if reserved % per_node and reserved != n:
        raise InputError(f"run.reserved.gpus = {reserved} is not a whole number of "
                         f"{per_node}-GPU nodes", fix=f"use a multiple of {per_node}, e.g. "
                                                      f"{half}")
    if run.reserved.usd_per_gpu_hour is not None:
        prices["reserved"], sources["reserved"] = run.reserved.usd_per_gpu_hour, \
            "run.reserved.usd_per_gpu_hour"
    elif scenario.pricing.startswith("reserved") and own is not None:
        prices["reserved"], sources["reserved"] = own, label
    else:
        prices["reserved"], sources["reserved"] = _reserved_offer(
            gpu, training_footprint(reserved, per_node))
    if not prices["reserved"] < on_demand:
        origin = "" if run.reserved.usd_per_gpu_hour else f" ({sources['reserved']})"
        raise InputError(f"run.reserved.usd_per_gpu_hour: the reserved price "
                         f"${format_usd_rate(prices['reserved'])}{origin} is not below "
                         f"on-demand ${format_usd_rate(on_demand)}, so a reservation could "
                         "never pay", fix="give run.reserved.usd_per_gpu_hour below "
                                          f"${format_usd_rate(on_demand)}")
    return prices, sources, spot, spot_terms, reserved


def _reserved_offer(gpu: str, footprint) -> tuple[float, str]:
    """(USD per GPU-hour, its basis) of the catalog's 1-year reservation of the reserved
    GPUs' whole instances."""
    try:
        rental = rent(gpu, "reserved-1y", footprint)
    except InputError:
        raise InputError(f"no 1-year reserved offer for {gpu} in the catalog",
                         fix="give run.reserved.usd_per_gpu_hour") from None
    return rental.usd_per_gpu_hour, f"the catalog's {rental.basis()}"
