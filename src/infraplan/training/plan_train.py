"""`plan train`: from a training scenario to ranked plans, the frontier and why others lost."""

from __future__ import annotations

from dataclasses import replace

from infraplan.catalog import load_catalog
from infraplan.catalog.schema import Accelerator
from infraplan.economics.cost import CostInputs
from infraplan.economics.spec import (LinearCost, plan_economics, price_per_gpu_hour,
                                      training_footprint_for)
from infraplan.errors import InputError
from infraplan.models import load_model
from infraplan.models.arch import ModelArch
from infraplan.models.flops import executed_share_of_model_flops
from infraplan.physics import hardware
from infraplan.physics.memory.training import recompute_code
from infraplan.training.batch_note import batch_note
from infraplan.training.constraints import applied_note
from infraplan.training.evaluate import (AUTO_RECOMPUTE, PlanResult, TrainingJob,
                                         check_precision_peak, precisions_of)
from infraplan.training.memory import model_notes
from infraplan.training.search import SearchResult, node_for, search
from infraplan.training.space import Knobs
from infraplan.units import format_usd_rate
from infraplan.workloads import TrainScenario

SECONDS_PER_DAY = 86400.0
# Exposed communication that crosses nodes in the plans the search picks (data-parallel
# sync, ZeRO-3 gathers, pipeline sends, ring attention; TP stays in the node, and the MoE
# all-to-all is heavy on any network) past this share of a step marks a plan bound by its
# network. Measured on the published runs of validation/ (their own clusters): the 17
# development rows expose 0.6-12.9 % of the step in these, and 190 of 191 held-out rows
# under 26 % (the one above: FSDP 405B on 512 H100s, 34.5 %).
COMMUNICATION_BOUND_SHARE = 1 / 3
COMMUNICATION_PARTS = ("cp_comm", "pp_p2p", "dp_comm", "zero3_comm")
# Counted work a quarter above the executed one makes MFU misleading enough to say so
# (Llama 3.1 8B from 32k tokens, 70B from 64k; at 1M tokens the count is twice the work)
EXECUTED_SHARE_NOTED_BELOW = 0.8


def _pinned(value, default):
    return default if value is None else (value,)


def gpu_counts(low: int, high: int, step: int) -> tuple[int, ...]:
    """Whole nodes of `step` GPUs from low to high, and the partial node sizes 1, 2, 4...
    below one node when low allows them."""
    if low > high:
        raise InputError(f"hardware.min_count {low} exceeds max_count {high}")
    counts = {c for c in range(step, high + 1, step) if c >= low}
    counts |= {c for c in (1, 2, 4) if low <= c < step and c <= high}
    if not counts:
        raise InputError(f"no GPU count between {low} and {high} in steps of {step}",
                         fix="widen min_count/max_count or set counts")
    return tuple(sorted(counts))


def knobs_for(scenario: TrainScenario, gpu: str) -> Knobs:
    hw, pin = scenario.hardware, scenario.pin
    counts = tuple(sorted(set(hw.counts))) if hw.counts else gpu_counts(
        hw.min_count, hw.max_count,
        hw.count_step or hardware.cluster(gpu, hw.system).system.accelerators_per_node)
    base = Knobs(gpus=counts)
    recompute = None if pin.recompute is None else (
        AUTO_RECOMPUTE if pin.recompute == "auto" else recompute_code(pin.recompute))
    return Knobs(
        gpus=counts, tp=_pinned(pin.tp, base.tp), pp=_pinned(pin.pp, None),
        cp=_pinned(pin.cp, base.cp), ep=_pinned(pin.ep, None), dp=_pinned(pin.dp, None),
        zero=_pinned(pin.zero, base.zero), micro_batch=_pinned(pin.micro_batch,
                                                               base.micro_batch),
        recompute=_pinned(recompute, base.recompute),
        sequence_parallel=_pinned(None if pin.sequence_parallel is None
                                  else int(pin.sequence_parallel), base.sequence_parallel),
        tp_overlap=_pinned(None if pin.tp_comm_overlap is None else int(pin.tp_comm_overlap),
                           base.tp_overlap),
        ep_overlap={None: base.ep_overlap, "auto": (0, 1), True: (1,), False: (0,)}[
            pin.ep_comm_overlap],
        etp=_pinned(pin.etp, base.etp),  # 0 stands for etp = tp
        vp=_pinned(pin.vp, base.vp))


def node_types(scenario: TrainScenario):
    """The node type each accelerator runs in: the scenario's system (or the GPU's default)
    with its scale-out network replaced when the scenario names one."""
    hw = scenario.hardware
    if hw.network is None:
        if hw.nics_per_node is not None:
            raise InputError("hardware.nics_per_node needs hardware.network",
                             fix="name the network too, for example network: ethernet-100g")
        return hw.system
    return {hardware.cluster(g, hw.system).gpu.name: hardware.with_network(
        hardware.cluster(g, hw.system).system, hw.network, hw.nics_per_node) for g in hw.gpus}


def plan_training(scenario: TrainScenario, progress=None, arch: ModelArch | None = None
                  ) -> SearchResult:
    """Search the scenario's plans; `arch` stands in for scenario.model (an uploaded
    config.json), `progress(done, total)` is told per accelerator type."""
    arch = arch or load_model(scenario.model)
    if scenario.pin.ep_comm_overlap is True and not arch.is_moe:
        raise InputError(f"pin.ep_comm_overlap overlaps expert all-to-alls, but {arch.name} "
                         "has no experts", fix="remove pin.ep_comm_overlap")
    if scenario.pin.etp is not None and not arch.is_moe:
        raise InputError(f"pin.etp sets the routed experts' tensor parallelism, but "
                         f"{arch.name} has no experts", fix="remove pin.etp")
    t = scenario.training
    job = scenario_job(scenario)
    hw = scenario.hardware
    gpus, left_out = _with_precision([hardware.cluster(g, hw.system).gpu for g in hw.gpus],
                                     t.precision)
    cost, unpriced = _linear_cost(scenario, gpus)
    if scenario.objective == "cost" or scenario.constraints.budget_usd is not None:
        gpus = [g for g in gpus if g not in unpriced]  # cost ranks the priced ones only
        left_out += [f"{g} is left out of the {_cost_use(scenario)}: {why}. To fix: give "
                     f"prices: {{{g}: usd_per_gpu_hour}}" for g, why in unpriced.items()]
    # one knob set per accelerator type (node sizes differ); counts come from the first
    knobs = knobs_for(scenario, gpus[0])
    deadline = scenario.constraints.deadline_days
    nodes = node_types(scenario)
    result = search(arch, gpus, knobs, job, top=scenario.top, system=nodes,
                    deadline_s=None if deadline is None else deadline * SECONDS_PER_DAY,
                    budget_gpu_hours=scenario.constraints.budget_gpu_hours, cost=cost,
                    budget_usd=scenario.constraints.budget_usd, objective=scenario.objective,
                    progress=progress)
    if job.tokens:
        for plans in (result.best, result.frontier, result.by_accelerator):
            costs = scenario.billed_costs()  # once: it looks the storage tiers up
            plans[:] = [with_economics(p, scenario, node_for(nodes, p.accelerator, gpus),
                                       costs) for p in plans]
    result.notes[:0] = applied_note(scenario.constraints, scenario.objective) \
        + unused_price_notes(scenario)
    result.notes += left_out + model_notes(arch, t.seq_len)
    result.notes += node_notes(nodes, result.by_accelerator)
    result.notes += causal_notes(arch, t.seq_len, result.best[:1])
    if result.best:
        best = result.best[0]
        result.notes += batch_note(arch, best, knobs_for(scenario, best.accelerator), job,
                                   node_for(nodes, best.accelerator, gpus))
    layout = result.best[0].plan.uneven_layout_note(arch.num_layers) if result.best else None
    result.notes += [f"best plan: {layout}"] if layout else []
    if cost is None:
        named = ", ".join(unpriced)
        result.notes.append(f"no cost: {named} {'has' if len(unpriced) == 1 else 'have'} no "
                            f"{scenario.pricing} price in the catalog, so plans are compared "
                            f"in GPU-hours; give prices: {{{next(iter(unpriced))}: "
                            "usd_per_gpu_hour}")
    return result


def unused_price_notes(scenario: TrainScenario) -> list[str]:
    """A price keyed by an accelerator the scenario does not compare is used nowhere: say so
    rather than bill the compared ones at the catalog's offers while the user thinks them
    priced (prices: {h100-pcie: 2.5} beside gpus: [h100], the SXM part). A note, not an
    error: a scenario may keep the prices of GPUs it leaves out of one comparison."""
    catalog = load_catalog()
    compared = [catalog.accelerators.get(g).name for g in scenario.hardware.gpus]
    notes = []
    for key, usd in scenario.prices.items():
        name = catalog.accelerators.get(key).name
        if name in compared:
            continue
        means = "" if name == key else f", the catalog's {name}"
        notes.append(f"prices: {key} (${format_usd_rate(usd)}/GPU-h{means}) is unused: it is "
                     f"not among the accelerators compared ({', '.join(compared)}). To fix: "
                     f"add {key} to hardware.gpus to compare it, or key the price by a "
                     "compared one "
                     f"(prices: {{{compared[0]}: {usd:g}}})")
    return notes


def causal_notes(arch: ModelArch, seq_len: int, best: list[PlanResult]) -> list[str]:
    """At long sequences MFU's attention count (the whole sequence, as published MFUs
    take it) is well above what causal kernels run: say what the best plan executes."""
    share = executed_share_of_model_flops(arch, seq_len)
    if not best or share >= EXECUTED_SHARE_NOTED_BELOW:
        return []
    return [f"MFU and HFU count attention over the whole sequence (PaLM App. B, Narayanan "
            f"et al. 2021), as published MFUs do; causal kernels run {share:.0%} of that "
            f"work at seq_len {seq_len:,}, so the best plan's {best[0].mfu:.1%} MFU is "
            f"{best[0].mfu * share:.1%} of peak executed"]


def scenario_job(scenario) -> TrainingJob:
    """The job a TrainScenario's training: block describes."""
    t = scenario.training
    return TrainingJob(seq_len=t.seq_len, global_batch=t.global_batch, tokens=t.tokens,
                       precision=t.precision, grad_dtype=t.grad_dtype, optimizer=t.optimizer,
                       kernels=t.kernels, storage=t.storage,
                       data_bytes_per_token=t.data_bytes_per_token)


def node_notes(system, best_of_each: list[PlanResult]) -> list[str]:
    """Which node type and scale-out network each accelerator was planned on (its default
    node unless the scenario names one), and a warning for an accelerator whose best plan
    spans nodes and spends over COMMUNICATION_BOUND_SHARE of its step communicating."""
    described, bound = [], []
    for best in best_of_each:
        node = system.get(best.accelerator) if isinstance(system, dict) else system
        c = hardware.cluster(best.accelerator, node)
        s = c.system
        link_gb_s = s.intra_node_bandwidth_bytes_per_s_per_direction / 1e9
        inside = ("" if s.accelerators_per_node == 1 else
                  f", {s.intra_node_fabric} {link_gb_s:,.0f} GB/s")
        described.append(f"{best.accelerator} on {s.name} ({s.accelerators_per_node} per node"
                         f"{inside}; {s.nics_per_node} x {c.network.name} "
                         f"{c.network.bandwidth_bytes_per_s_per_direction * 8 / 1e9:,.0f} "
                         "Gb/s between nodes)")
        exposed = sum(best.breakdown_s.get(k, 0.0) for k in COMMUNICATION_PARTS)
        if best.plan.num_gpus > s.accelerators_per_node \
                and exposed > COMMUNICATION_BOUND_SHARE * best.step_s:
            bound.append(f"{best.accelerator}'s best plan ({best.plan.num_gpus:,} GPUs, "
                         f"{s.accelerators_per_node} per node over {s.nics_per_node} x "
                         f"{c.network.name}) spends {exposed / best.step_s:.0%} of its step "
                         "in data-parallel and pipeline communication")
    notes = [f"node types: {'; '.join(described)}; set hardware.system or hardware.network "
             "to plan others"] if described else []
    if bound:
        notes.append("network-bound: " + "; ".join(bound) + ": a faster scale-out network "
                     "(hardware.network, for example ib-ndr-400) or a node type with more "
                     "accelerators (hardware.system) would shorten it")
    return notes


def _with_precision(accelerators: list[Accelerator], precision: str | None
                    ) -> tuple[list[str], list[str]]:
    """The accelerators with tensor cores for `precision`, and a note for each left out
    (V100 and T4 in bf16, A100 in fp8); when none has them, check_precision_peak says what
    to change. Without a precision each trains in its 16-bit type (TrainingJob.on), and a
    chip that takes fp16 for it is named: fp16 runs need loss scaling."""
    if precision is None:
        return [a.name for a in accelerators], [
            f"{a.name} trains in {a.sixteen_bit}: it has no bf16 tensor cores "
            "(training.precision is not set; fp16 needs loss scaling)"
            for a in accelerators if a.sixteen_bit != "bf16"]
    runs = [a.name for a in accelerators if precision in a.peak_flops]
    if not runs:
        check_precision_peak(accelerators[0], precision)
    return runs, [f"{a.name} is left out: it has no {precision} tensor cores for "
                  f"{precision} training (set training.precision to "
                  f"{' or '.join(precisions_of(a))} "
                  "to plan it)" for a in accelerators if a.name not in runs]


def _linear_cost(scenario: TrainScenario, gpus: list[str]
                 ) -> tuple[LinearCost | None, dict[str, str]]:
    """(cost rates, {accelerator: why it has no price}). The rates cover every accelerator
    compared, or, when cost ranks or limits the plans (objective: cost, budget_usd), the
    priced ones (an error when none is); None when one has no price and nothing asks for
    cost (ranking by time works without prices, and the frontier stays in GPU-hours
    rather than mix dollars and GPU-hours)."""
    unpriced, first = {}, None
    for g in gpus:
        try:
            price_per_gpu_hour(g, prices=scenario.prices, pricing=scenario.pricing)
        except InputError as exc:
            unpriced[g] = f"the catalog has no {scenario.pricing} offer for it"
            first = first or exc
    wanted = scenario.objective == "cost" or scenario.constraints.budget_usd is not None
    if unpriced and (not wanted or len(unpriced) == len(gpus)):
        if wanted:
            raise first
        return None, unpriced
    priced = [g for g in gpus if g not in unpriced]
    return LinearCost.build(priced, prices=scenario.prices, pricing=scenario.pricing,
                            costs=scenario.billed_costs()), unpriced


def _cost_use(scenario: TrainScenario) -> str:
    """What cost does in the scenario: ranks the plans, limits them, or both."""
    uses = (["cost ranking (objective: cost)"] * (scenario.objective == "cost")
            + ["USD budget (budget_usd)"] * (scenario.constraints.budget_usd is not None))
    return " and ".join(uses)


def with_economics(plan: PlanResult, scenario: TrainScenario, node=None,
                   costs: CostInputs | None = None) -> PlanResult:
    """The plan with its cost line items, facility energy and carbon attached; priced on
    whole instances that hold its GPUs up to a `node` (the node type it was planned on).
    `costs`: scenario.billed_costs(), when the caller has it already."""
    n = plan.plan.num_gpus
    costs = scenario.billed_costs() if costs is None else costs
    e = plan_economics(plan.accelerator, n, plan.gpu_hours,
                       plan.time_to_train_s, prices=scenario.prices, pricing=scenario.pricing,
                       costs=costs, energy=scenario.energy,
                       footprint=training_footprint_for(plan.accelerator, n, node))
    return replace(plan, economics=e.to_json())
